// berth-agent: the node agent as a standalone process. Wires flags, the GPU
// provider (NVML, or a simulated node from a cluster file), the channel to
// berthd and the Agent together, then waits for SIGTERM/SIGINT.
#include <fmt/format.h>
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
#include "common/self_path.h"
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
  auto dir = ExecutableDir();
  return dir ? *dir / "berth-shim" : fs::path("berth-shim");
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

// Every flag, as given.
struct AgentFlags {
  std::string server = "127.0.0.1:7461";
  std::string data_dir = DefaultDataDir();
  std::string node_name;
  std::string advertise_address;
  std::vector<std::string> labels;
  std::vector<std::string> taints;
  std::string simulate;
  std::string simulate_node;
  std::string sim_faults;
  std::string health_interval = "2s";
  std::string telemetry_interval = "10s";
  std::string shim = DefaultShim().string();
  std::string shared_gpus;
  std::string pull_timeout = "10m";
  std::string fence_grace = berth::FormatDurationMs(berth::model::kDefaultFenceGraceMs);
  std::string output_retention = berth::FormatDurationMs(agent::kDefaultOutputRetentionMs);
  std::string podman_conf;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  bool insecure = false;
  bool single_user = false;
  std::string cgroup_parent = "berth";
};

void AddFlags(CLI::App& app, AgentFlags& f) {
  app.add_option("--server", f.server,
                 "berthd agent endpoint HOST:PORT, or every control-plane berthd's as "
                 "IP:PORT,IP:PORT (the agent follows the leader) (env BERTH_AGENT_SERVER)")
      ->capture_default_str();
  app.add_option("--data-dir", f.data_dir,
                 "where run directories live; jobs are recovered from here after a restart")
      ->capture_default_str();
  app.add_option("--node-name", f.node_name, "node name reported to berthd (default: hostname)");
  app.add_option("--advertise-address", f.advertise_address,
                 "IP address the gateway reaches this node's service replicas at (default: the "
                 "address berthd sees this agent connect from)");
  app.add_option("--label", f.labels, "node label k=v (repeatable)");
  app.add_option("--taint", f.taints, "node taint k=v:NoSchedule|PreferNoSchedule (repeatable)");
  app.add_option("--simulate", f.simulate,
                 "simulated cluster YAML (docs/inventory.md): report its GPUs instead of NVML's")
      ->check(CLI::ExistingFile);
  app.add_option("--simulate-node", f.simulate_node,
                 "which node of the --simulate file this agent is (optional if it has one)");
  app.add_option("--sim-faults", f.sim_faults,
                 "with --simulate: a file of injected GPU faults, one '<index> <detail>' line "
                 "per failed GPU (default: <data-dir>/sim-faults)");
  app.add_option("--health-interval", f.health_interval, "how often GPU health is polled")
      ->capture_default_str();
  app.add_option("--telemetry-interval", f.telemetry_interval,
                 "how often every GPU is sampled and the readings streamed to berthd; 0: never")
      ->capture_default_str();
  app.add_option("--shim", f.shim, "berth-shim executable")->capture_default_str();
  app.add_option("--shared-gpus", f.shared_gpus,
                 "GPUs in sharing mode, taking slices of jobs with resources.gpu_share: all, or "
                 "indices such as 0,1 (default: none; with --simulate, the file's shared_gpus)");
  app.add_option("--pull-timeout", f.pull_timeout,
                 "how long a container run may take to pull its image (podman pull) before it "
                 "fails, e.g. 10m")
      ->capture_default_str();
  app.add_option("--fence-grace", f.fence_grace,
                 "cut off from berthd for its lease plus this long, the agent stops every run "
                 "it holds (stopped_for \"fenced\"), since berthd may then start their jobs "
                 "elsewhere; berthd's --agent-fence-grace must be at least this "
                 "(docs/operations.md, \"Fencing\")")
      ->capture_default_str();
  app.add_option("--output-retention", f.output_retention,
                 "how long a run's output directory (BERTH_OUTPUT_DIR) stays on the node after "
                 "the run, for its tenant to download with `berth cp` (docs/jobs.md, \"Outputs\")")
      ->capture_default_str();
  app.add_option("--podman-conf", f.podman_conf,
                 "a containers.conf for the podman of container runs, given to it as "
                 "CONTAINERS_CONF (deploy/podman/containers.conf: runc, lower ulimits); default: "
                 "podman's own configuration")
      ->check(CLI::ExistingFile);
  app.add_flag("--single-user", f.single_user,
               "run every job as this agent's own user, with no run identity and no cgroup (a "
               "laptop; never a node shared by more than one person). An agent that is not root "
               "always runs this way");
  app.add_option("--cgroup-parent", f.cgroup_parent,
                 "the cgroup (below each hierarchy's root) that holds one cgroup per run")
      ->capture_default_str();
  app.add_option("--tls-ca", f.tls_ca, "PEM CA that berthd's certificate must chain to (ca.pem)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", f.tls_cert,
                 "this node's PEM certificate, from `berthd cert node NODE` (its CN must be the "
                 "node name)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", f.tls_key, "the PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-server-name", f.tls_server_name,
                 "the name berthd's certificate is checked against (default: the --server host)");
  app.add_flag("--insecure", f.insecure,
               "connect without TLS, to a loopback berthd started with --plain-agents (dev, "
               "tests)");
}

Error Invalid(std::string message) {
  return Error{Code::kInvalidArgument, std::move(message), {}};
}

// The agent's TLS credentials; nullopt with --insecure.
Result<std::optional<agent::AgentTls>> CheckTls(const AgentFlags& f) {
  if (f.insecure) {
    if (!f.tls_ca.empty() || !f.tls_cert.empty() || !f.tls_key.empty()) {
      return std::unexpected(Invalid("--insecure and --tls-* exclude each other"));
    }
    return std::optional<agent::AgentTls>();
  }
  if (f.tls_ca.empty() || f.tls_cert.empty() || f.tls_key.empty()) {
    return std::unexpected(Invalid(
        "berthd takes agents over mutual TLS: give --tls-ca, --tls-cert and --tls-key (write "
        "them with `berthd cert node NODE --out DIR` on the berthd host), or --insecure for a "
        "loopback berthd run with --plain-agents"));
  }
  auto ca = agent::ReadWholeFile(f.tls_ca);
  auto cert = agent::ReadWholeFile(f.tls_cert);
  auto key = agent::ReadWholeFile(f.tls_key);
  if (!ca || !cert || !key) {
    return std::unexpected(Invalid("cannot read --tls-ca, --tls-cert or --tls-key"));
  }
  return std::optional<agent::AgentTls>(agent::AgentTls{*ca, *cert, *key, f.tls_server_name});
}

// The node this agent reports (this host, or one of a simulated cluster)
// with its labels and taints, and its GPU provider.
struct LocalNode {
  model::NodeInfo info;
  std::unique_ptr<agent::GpuProvider> provider;
};

Result<LocalNode> LoadNode(const AgentFlags& f) {
  LocalNode node{agent::LocalHostNode(), nullptr};
  if (!f.simulate.empty()) {
    auto nodes = agent::LoadSimulatedCluster(f.simulate);
    if (!nodes) return std::unexpected(nodes.error());
    auto chosen = agent::SelectSimulatedNode(*nodes, f.simulate_node);
    if (!chosen) return std::unexpected(chosen.error());
    node.info = *chosen;
    const std::string faults =
        f.sim_faults.empty() ? (fs::path(f.data_dir) / "sim-faults").string() : f.sim_faults;
    node.provider = std::make_unique<agent::SimulatedProvider>(std::move(*chosen), faults);
  } else {
    if (!f.simulate_node.empty()) {
      return std::unexpected(Invalid("--simulate-node needs --simulate FILE"));
    }
    auto nvml = std::make_unique<agent::NvmlProvider>();
    if (!nvml->available()) {
      spdlog::warn("NVML unavailable ({}); running as a node without GPUs",
                   nvml->unavailable_reason());
    }
    node.provider = std::move(nvml);
  }
  if (!f.node_name.empty()) node.info.name = f.node_name;
  node.info.address = f.advertise_address;
  for (const auto& text : f.labels) {
    std::string k, v;
    if (!SplitLabel(text, k, v)) {
      return std::unexpected(Invalid(fmt::format("--label '{}': write key=value", text)));
    }
    node.info.labels[k] = v;
  }
  for (const auto& text : f.taints) {
    model::Taint t;
    if (!ParseTaint(text, t)) {
      return std::unexpected(Invalid(fmt::format(
          "--taint '{}': write key=value:NoSchedule or key=value:PreferNoSchedule", text)));
    }
    node.info.taints.push_back(t);
  }
  return node;
}

// A duration flag of at least `min_ms`, or the flag's own error.
Result<std::int64_t> DurationFlag(const std::string& flag, const std::string& value,
                                  std::int64_t min_ms, std::string_view example) {
  if (auto ms = berth::ParseDurationMs(value); ms && *ms >= min_ms) return *ms;
  return std::unexpected(
      Invalid(fmt::format("{} '{}': write a duration such as {}", flag, value, example)));
}

// The Agent's options: intervals, graces, the shim, cgroups, sharing.
Result<agent::AgentOptions> CheckOptions(const AgentFlags& f) {
  agent::AgentOptions options;
  options.data_dir = f.data_dir;
  options.shim_path = f.shim;
  options.single_user = f.single_user;
  if (f.cgroup_parent.empty() || f.cgroup_parent.front() == '/' ||
      f.cgroup_parent.find("..") != std::string::npos) {
    return std::unexpected(Invalid(fmt::format(
        "--cgroup-parent '{}': give a relative cgroup name such as berth", f.cgroup_parent)));
  }
  options.cgroup_parent = f.cgroup_parent;
  auto health = DurationFlag("--health-interval", f.health_interval, 1, "2s");
  if (!health) return std::unexpected(health.error());
  options.health_interval_ms = *health;
  if (f.telemetry_interval == "0") {
    options.telemetry_interval_ms = 0;
  } else {
    auto telemetry = DurationFlag("--telemetry-interval", f.telemetry_interval, 100,
                                  "10s (at least 100ms), or 0 for none");
    if (!telemetry) return std::unexpected(telemetry.error());
    options.telemetry_interval_ms = *telemetry;
  }
  auto pull = DurationFlag("--pull-timeout", f.pull_timeout, 1, "10m or 90s");
  if (!pull) return std::unexpected(pull.error());
  options.pull_timeout_ms = *pull;
  auto fence = DurationFlag("--fence-grace", f.fence_grace, 0, "30s");
  if (!fence) return std::unexpected(fence.error());
  options.fence_grace_ms = *fence;
  auto retention = DurationFlag("--output-retention", f.output_retention, 1, "7d or 12h");
  if (!retention) return std::unexpected(retention.error());
  options.output_retention_ms = *retention;
  // Absolute: podman runs in each run's directory.
  if (!f.podman_conf.empty()) options.podman_conf = fs::absolute(f.podman_conf);
  auto shared = agent::ParseSharedGpus(f.shared_gpus);
  if (!shared) {
    return std::unexpected(
        Invalid(fmt::format("--shared-gpus '{}': {}", f.shared_gpus, shared.error().message)));
  }
  options.shared_gpus = *shared;
  return options;
}

int Fatal(const Error& error) {
  spdlog::critical("{}", error.message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-agent: runs Berth jobs on this node and reports its GPUs to berthd"};
  AgentFlags f;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
  if (const char* env = std::getenv("BERTH_AGENT_SERVER")) f.server = env;
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_default_logger(spdlog::stderr_color_mt("berth-agent"));

  auto target = agent::AgentTarget(f.server);
  if (!target) {
    return Fatal(Invalid(fmt::format("--server: {}", target.error().message)));
  }
  auto tls = CheckTls(f);
  if (!tls) return Fatal(tls.error());
  if (*tls && (*tls)->server_name.empty() && f.server.find(',') != std::string::npos) {
    // One name for the whole control plane: every berthd's certificate
    // carries the first address (docs/operations.md, "High availability").
    std::string first = f.server.substr(0, f.server.find(','));
    first = first.substr(0, first.rfind(':'));
    if (first.size() > 2 && first.front() == '[') first = first.substr(1, first.size() - 2);
    (*tls)->server_name = first;
  }
  auto node = LoadNode(f);
  if (!node) return Fatal(node.error());
  auto options = CheckOptions(f);
  if (!options) return Fatal(options.error());

  // Block the stop signals before any thread exists, so every thread
  // inherits the mask and only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::error_code ec;
  fs::create_directories(f.data_dir, ec);
  if (ec) {
    return Fatal(Invalid(fmt::format("cannot create --data-dir {}: {}", f.data_dir, ec.message())));
  }
  spdlog::info("berth-agent {} node {} ({} GPU provider), berthd at {}, data in {}",
               agent::kAgentVersion, node->info.name, node->provider->Name(), f.server, f.data_dir);

  if (*tls) {
    // The agent renews its certificate over its stream and writes it back
    // over --tls-cert and --tls-key (docs/operations.md).
    agent::AgentOptions::CertRenewal renewal;
    renewal.cert_file = f.tls_cert;
    renewal.key_file = f.tls_key;
    renewal.cert_pem = (*tls)->cert_pem;
    renewal.key_pem = (*tls)->key_pem;
    renewal.channel = [server = *target, base = **tls](const std::string& cert_pem,
                                                       const std::string& key_pem) {
      agent::AgentTls next = base;
      next.cert_pem = cert_pem;
      next.key_pem = key_pem;
      return agent::MakeAgentChannel(server, next);
    };
    options->cert_renewal = std::move(renewal);
  }
  options->new_channel = [target = *target, tls = *tls] {
    return agent::MakeAgentChannel(target, tls);
  };
  berth::SystemClock clock;
  agent::Agent agent(*options, std::move(node->info), std::move(node->provider),
                     agent::MakeAgentChannel(*target, *tls), clock);
  agent.Start();

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping; running jobs keep running", sig);
  agent.Stop();
  return 0;
}
