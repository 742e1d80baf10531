// berth-agent: the node agent as a standalone process. Wires flags, the GPU
// provider (NVML, or a simulated node from a cluster file), the channel to
// berthd and the Agent together, then waits for SIGTERM/SIGINT.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>

#include "agent/agent.h"
#include "agent/atomic_file.h"
#include "agent/host.h"
#include "agent/nvml_provider.h"
#include "agent/sim_cluster.h"
#include "agent/sim_provider.h"
#include "common/units.h"
#include "model/fencing.h"

namespace {

namespace fs = std::filesystem;
using namespace berth;

std::string DefaultDataDir() {
  if (::geteuid() == 0) return "/var/lib/berth-agent";
  const char* home = std::getenv("HOME");  // NOLINT(concurrency-mt-unsafe): before threads
  return std::string(home ? home : "/tmp") + "/.local/share/berth-agent";
}

fs::path DefaultShim() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path("berth-shim") : self.parent_path() / "berth-shim";
}

// "k=v" -> (k, v).
bool SplitLabel(const std::string& text, std::string& key, std::string& value) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  key = text.substr(0, eq);
  value = text.substr(eq + 1);
  return true;
}

// "k=v:Effect" or "k:Effect" -> Taint.
bool ParseTaint(const std::string& text, model::Taint& taint) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  taint.effect = text.substr(colon + 1);
  if (taint.effect != "NoSchedule" && taint.effect != "PreferNoSchedule") return false;
  std::string kv = text.substr(0, colon);
  auto eq = kv.find('=');
  taint.key = kv.substr(0, eq);
  taint.value = eq == std::string::npos ? "" : kv.substr(eq + 1);
  return !taint.key.empty();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-agent: runs Berth jobs on this node and reports its GPUs to berthd"};
  std::string server = "127.0.0.1:7461";
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
  if (const char* env = std::getenv("BERTH_AGENT_SERVER")) server = env;
  std::string data_dir = DefaultDataDir();
  std::string node_name;
  std::vector<std::string> labels;
  std::vector<std::string> taints;
  std::string simulate;
  std::string simulate_node;
  std::string shim = DefaultShim().string();
  std::string shared_gpus;
  std::string pull_timeout = "10m";
  app.add_option("--server", server, "berthd agent endpoint HOST:PORT (env BERTH_AGENT_SERVER)")
      ->capture_default_str();
  app.add_option("--data-dir", data_dir,
                 "where run directories live; jobs are recovered from here after a restart")
      ->capture_default_str();
  app.add_option("--node-name", node_name, "node name reported to berthd (default: hostname)");
  app.add_option("--label", labels, "node label k=v (repeatable)");
  app.add_option("--taint", taints, "node taint k=v:NoSchedule|PreferNoSchedule (repeatable)");
  app.add_option("--simulate", simulate,
                 "simulated cluster YAML (docs/inventory.md): report its GPUs instead of NVML's")
      ->check(CLI::ExistingFile);
  app.add_option("--simulate-node", simulate_node,
                 "which node of the --simulate file this agent is (optional if it has one)");
  std::string sim_faults;
  app.add_option("--sim-faults", sim_faults,
                 "with --simulate: a file of injected GPU faults, one '<index> <detail>' line "
                 "per failed GPU (default: <data-dir>/sim-faults)");
  std::string health_interval = "2s";
  app.add_option("--health-interval", health_interval, "how often GPU health is polled")
      ->capture_default_str();
  std::string telemetry_interval = "10s";
  app.add_option("--telemetry-interval", telemetry_interval,
                 "how often every GPU is sampled and the readings streamed to berthd; 0: never")
      ->capture_default_str();
  app.add_option("--shim", shim, "berth-shim executable")->capture_default_str();
  app.add_option("--shared-gpus", shared_gpus,
                 "GPUs in sharing mode, taking slices of jobs with resources.gpu_share: all, or "
                 "indices such as 0,1 (default: none; with --simulate, the file's shared_gpus)");
  app.add_option("--pull-timeout", pull_timeout,
                 "how long a container run may take to pull its image (podman pull) before it "
                 "fails, e.g. 10m")
      ->capture_default_str();
  std::string fence_grace = berth::FormatDurationMs(berth::model::kDefaultFenceGraceMs);
  app.add_option("--fence-grace", fence_grace,
                 "cut off from berthd for its lease plus this long, the agent stops every run "
                 "it holds (stopped_for \"fenced\"), since berthd may then start their jobs "
                 "elsewhere; berthd's --agent-fence-grace must be at least this "
                 "(docs/operations.md, \"Fencing\")")
      ->capture_default_str();
  std::string output_retention = berth::FormatDurationMs(agent::kDefaultOutputRetentionMs);
  app.add_option("--output-retention", output_retention,
                 "how long a run's output directory (BERTH_OUTPUT_DIR) stays on the node after "
                 "the run, for its tenant to download with `berth cp` (docs/jobs.md, \"Outputs\")")
      ->capture_default_str();
  std::string podman_conf;
  app.add_option("--podman-conf", podman_conf,
                 "a containers.conf for the podman of container runs, given to it as "
                 "CONTAINERS_CONF (deploy/podman/containers.conf: runc, lower ulimits); default: "
                 "podman's own configuration")
      ->check(CLI::ExistingFile);
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  bool insecure = false;
  bool single_user = false;
  std::string cgroup_parent = "berth";
  app.add_flag("--single-user", single_user,
               "run every job as this agent's own user, with no run identity and no cgroup (a "
               "laptop; never a node shared by more than one person). An agent that is not root "
               "always runs this way");
  app.add_option("--cgroup-parent", cgroup_parent,
                 "the cgroup (below each hierarchy's root) that holds one cgroup per run")
      ->capture_default_str();
  app.add_option("--tls-ca", tls_ca, "PEM CA that berthd's certificate must chain to (ca.pem)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", tls_cert,
                 "this node's PEM certificate, from `berthd cert node NODE` (its CN must be the "
                 "node name)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", tls_key, "the PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-server-name", tls_server_name,
                 "the name berthd's certificate is checked against (default: the --server host)");
  app.add_flag("--insecure", insecure,
               "connect without TLS, to a loopback berthd started with --plain-agents (dev, "
               "tests)");
  CLI11_PARSE(app, argc, argv);

  spdlog::set_default_logger(spdlog::stderr_color_mt("berth-agent"));

  std::optional<agent::AgentTls> tls;
  if (insecure) {
    if (!tls_ca.empty() || !tls_cert.empty() || !tls_key.empty()) {
      spdlog::critical("--insecure and --tls-* exclude each other");
      return 2;
    }
  } else {
    if (tls_ca.empty() || tls_cert.empty() || tls_key.empty()) {
      spdlog::critical(
          "berthd takes agents over mutual TLS: give --tls-ca, --tls-cert and --tls-key (write "
          "them with `berthd cert node NODE --out DIR` on the berthd host), or --insecure for a "
          "loopback berthd run with --plain-agents");
      return 2;
    }
    auto ca = agent::ReadWholeFile(tls_ca);
    auto cert = agent::ReadWholeFile(tls_cert);
    auto key = agent::ReadWholeFile(tls_key);
    if (!ca || !cert || !key) {
      spdlog::critical("cannot read --tls-ca, --tls-cert or --tls-key");
      return 2;
    }
    tls = agent::AgentTls{*ca, *cert, *key, tls_server_name};
  }

  model::NodeInfo base = agent::LocalHostNode();
  std::unique_ptr<agent::GpuProvider> provider;
  if (!simulate.empty()) {
    auto nodes = agent::LoadSimulatedCluster(simulate);
    if (!nodes) {
      spdlog::critical("{}", nodes.error().message);
      return 2;
    }
    auto node = agent::SelectSimulatedNode(*nodes, simulate_node);
    if (!node) {
      spdlog::critical("{}", node.error().message);
      return 2;
    }
    base = *node;
    if (sim_faults.empty()) sim_faults = (fs::path(data_dir) / "sim-faults").string();
    provider = std::make_unique<agent::SimulatedProvider>(std::move(*node), sim_faults);
  } else {
    if (!simulate_node.empty()) {
      spdlog::critical("--simulate-node needs --simulate FILE");
      return 2;
    }
    auto nvml = std::make_unique<agent::NvmlProvider>();
    if (!nvml->available()) {
      spdlog::warn("NVML unavailable ({}); running as a node without GPUs",
                   nvml->unavailable_reason());
    }
    provider = std::move(nvml);
  }
  if (!node_name.empty()) base.name = node_name;
  for (const auto& text : labels) {
    std::string k, v;
    if (!SplitLabel(text, k, v)) {
      spdlog::critical("--label '{}': write key=value", text);
      return 2;
    }
    base.labels[k] = v;
  }
  for (const auto& text : taints) {
    model::Taint t;
    if (!ParseTaint(text, t)) {
      spdlog::critical("--taint '{}': write key=value:NoSchedule or key=value:PreferNoSchedule",
                       text);
      return 2;
    }
    base.taints.push_back(t);
  }

  // Block the stop signals before any thread exists, so every thread
  // inherits the mask and only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec) {
    spdlog::critical("cannot create --data-dir {}: {}", data_dir, ec.message());
    return 2;
  }
  spdlog::info("berth-agent {} node {} ({} GPU provider), berthd at {}, data in {}",
               agent::kAgentVersion, base.name, provider->Name(), server, data_dir);

  berth::SystemClock clock;
  agent::AgentOptions options;
  options.data_dir = data_dir;
  options.shim_path = shim;
  options.single_user = single_user;
  if (cgroup_parent.empty() || cgroup_parent.front() == '/' ||
      cgroup_parent.find("..") != std::string::npos) {
    spdlog::critical("--cgroup-parent '{}': give a relative cgroup name such as berth",
                     cgroup_parent);
    return 2;
  }
  options.cgroup_parent = cgroup_parent;
  if (auto ms = berth::ParseDurationMs(health_interval); ms && *ms > 0) {
    options.health_interval_ms = *ms;
  } else {
    spdlog::critical("--health-interval '{}': give a duration such as 2s", health_interval);
    return 2;
  }
  if (telemetry_interval == "0") {
    options.telemetry_interval_ms = 0;
  } else if (auto ms = berth::ParseDurationMs(telemetry_interval); ms && *ms >= 100) {
    options.telemetry_interval_ms = *ms;
  } else {
    spdlog::critical(
        "--telemetry-interval '{}': give a duration of at least 100ms such as 10s, or 0 for "
        "none",
        telemetry_interval);
    return 2;
  }
  if (auto ms = berth::ParseDurationMs(pull_timeout); ms && *ms > 0) {
    options.pull_timeout_ms = *ms;
  } else {
    spdlog::critical("--pull-timeout '{}': write a duration such as 10m or 90s", pull_timeout);
    return 2;
  }
  if (auto ms = berth::ParseDurationMs(fence_grace); ms && *ms >= 0) {
    options.fence_grace_ms = *ms;
  } else {
    spdlog::critical("--fence-grace '{}': write a duration such as 30s", fence_grace);
    return 2;
  }
  if (auto ms = berth::ParseDurationMs(output_retention); ms && *ms > 0) {
    options.output_retention_ms = *ms;
  } else {
    spdlog::critical("--output-retention '{}': write a duration such as 7d or 12h",
                     output_retention);
    return 2;
  }
  // Absolute: podman runs in each run's directory.
  if (!podman_conf.empty()) options.podman_conf = fs::absolute(podman_conf);
  if (auto s = agent::ParseSharedGpus(shared_gpus); s) {
    options.shared_gpus = *s;
  } else {
    spdlog::critical("--shared-gpus '{}': {}", shared_gpus, s.error().message);
    return 2;
  }
  agent::Agent agent(options, std::move(base), std::move(provider),
                     agent::MakeAgentChannel(server, tls), clock);
  agent.Start();

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping; running jobs keep running", sig);
  agent.Stop();
  return 0;
}
