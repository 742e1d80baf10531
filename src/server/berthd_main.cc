// berthd: the Berth control plane. The composition root: every part is
// constructed and wired here and nowhere else.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "agent/agent.h"
#include "agent/host.h"
#include "agent/nvml_provider.h"
#include "agent/sim_cluster.h"
#include "agent/sim_provider.h"
#include "common/clock.h"
#include "common/units.h"
#include "sched/core_scheduler.h"
#include "server/agent_service.h"
#include "server/api.h"
#include "server/auth.h"
#include "server/controller.h"
#include "store/audit_log.h"
#include "store/identity_store.h"
#include "store/meter_store.h"
#include "store/sqlite_store.h"

namespace {

using berth::Result;

std::filesystem::path DefaultDataDir() {
  if (::geteuid() == 0) return "/var/lib/berth";
  const char* home = std::getenv("HOME");  // NOLINT(concurrency-mt-unsafe): before threads start
  return std::filesystem::path(home != nullptr ? home : ".") / ".local/share/berth";
}

Result<std::pair<std::string, int>> SplitHostPort(const std::string& flag, const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return berth::InvalidField(flag, fmt::format("'{}' is not HOST:PORT, e.g. 127.0.0.1:7460", s));
  }
  int port = 0;
  try {
    port = std::stoi(s.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return berth::InvalidField(flag, fmt::format("'{}' has no valid port (0-65535)", s));
  }
  return std::pair{s.substr(0, colon), port};
}

std::filesystem::path SiblingBinary(const char* name) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path(name) : self.parent_path() / name;
}

// Where an embedded simulated node's injected GPU faults are read from.
std::filesystem::path SimFaults(const std::string& data_dir, const std::string& node) {
  return std::filesystem::path(data_dir) / "agents" / node / "sim-faults";
}

int Fatal(const std::string& message) {
  spdlog::critical("{}", message);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "berthd: the Berth control plane.\n\n"
      "Serves the REST API (with its OpenAPI document at /v1/openapi.json), accepts\n"
      "berth-agent streams, keeps state in SQLite under --data-dir and schedules jobs."};
  bool all_in_one = false;
  bool reset_admin_token = false;
  std::string data_dir = DefaultDataDir().string();
  std::string listen = "127.0.0.1:7460";
  std::string agent_listen = "127.0.0.1:7461";
  std::string simulate;
  std::string lease = "10s";
  std::string heartbeat = "1s";
  std::string grace = "10s";
  std::string lost_grace = "60s";
  std::string shim = SiblingBinary("berth-shim").string();
  std::string log_level = "info";
  app.add_flag("--all-in-one", all_in_one,
               "Also run an agent for this host inside berthd: NVML GPUs where the driver has "
               "any, else --simulate FILE, else the default simulated node (8x H100-80GB)");
  app.add_option("--data-dir", data_dir,
                 "Directory for the state database, job logs and embedded agents' run state")
      ->capture_default_str();
  app.add_option("--listen", listen, "HOST:PORT of the REST API (loopback by default)")
      ->capture_default_str();
  app.add_option("--agent-listen", agent_listen, "HOST:PORT where berth-agents connect (gRPC)")
      ->capture_default_str();
  app.add_option("--simulate", simulate,
                 "Cluster YAML file describing a simulated GPU inventory (docs/inventory.md); "
                 "with --all-in-one, one embedded agent runs per node in the file");
  app.add_option("--lease", lease, "A node is NotReady this long after its last heartbeat")
      ->capture_default_str();
  app.add_option("--heartbeat", heartbeat, "How often agents heartbeat")->capture_default_str();
  app.add_option("--stop-grace", grace, "SIGTERM to SIGKILL grace for cancel and max runtime")
      ->capture_default_str();
  app.add_option("--node-lost-grace", lost_grace,
                 "After a node's lease lapses, how long its runs may stay unaccounted for before "
                 "they are declared lost and their jobs follow their retry policies")
      ->capture_default_str();
  app.add_option("--shim", shim, "Path to berth-shim, the per-job supervisor")
      ->capture_default_str();
  app.add_flag("--reset-admin-token", reset_admin_token,
               "Give the platform admin 'admin' a new token in <data-dir>/bootstrap-token "
               "(recovery: re-enables it and makes it platform admin)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error")
      ->capture_default_str();
  std::string log_limit = "64Mi";
  app.add_option("--log-limit", log_limit,
                 "Per-run log size kept (e.g. 64Mi); a longer log keeps its first quarter and its "
                 "latest output, with a marker where bytes were dropped; 0: unlimited")
      ->capture_default_str();
  std::string shared_gpus;
  app.add_option("--shared-gpus", shared_gpus,
                 "All-in-one: the embedded agents' GPUs in sharing mode, taking slices of jobs "
                 "with resources.gpu_share: all, or indices such as 0,1 (default: none; with "
                 "--simulate, the file's shared_gpus)");
  std::string max_body = "2Mi";
  app.add_option("--max-body", max_body,
                 "Largest request body the API reads (e.g. 2Mi); larger ones get 413")
      ->capture_default_str();
  std::int64_t rate_limit = 50;
  app.add_option("--rate-limit", rate_limit,
                 "API requests per second per caller (bearer token id, else source address); "
                 "0: no limit")
      ->capture_default_str();
  std::int64_t rate_burst = 100;
  app.add_option("--rate-burst", rate_burst,
                 "API requests a caller may make at once before --rate-limit applies")
      ->capture_default_str();
  std::string io_timeout = "10s";
  app.add_option("--http-timeout", io_timeout,
                 "How long the API waits on a slow client reading a request or writing an answer")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto shared = berth::agent::ParseSharedGpus(shared_gpus);
  if (!shared)
    return Fatal(fmt::format("--shared-gpus '{}': {}", shared_gpus, shared.error().message));

  spdlog::set_level(spdlog::level::from_str(log_level));
  berth::SystemClock clock;

  auto listen_hp = SplitHostPort("--listen", listen);
  if (!listen_hp) return Fatal(listen_hp.error().message);
  auto lease_ms = berth::ParseDurationMs(lease);
  auto heartbeat_ms = berth::ParseDurationMs(heartbeat);
  auto grace_ms = berth::ParseDurationMs(grace);
  auto lost_grace_ms = berth::ParseDurationMs(lost_grace);
  if (!lease_ms || !heartbeat_ms || !grace_ms || !lost_grace_ms || *heartbeat_ms <= 0 ||
      *lease_ms <= *heartbeat_ms || *lost_grace_ms < 0) {
    return Fatal(
        "--lease, --heartbeat, --stop-grace and --node-lost-grace take durations such as 10s, "
        "and the lease must be longer than the heartbeat");
  }

  auto log_limit_bytes = berth::ParseBytes(log_limit);
  if (!log_limit_bytes || (*log_limit_bytes > 0 && *log_limit_bytes < 4096)) {
    return Fatal(fmt::format("--log-limit '{}': write a size of at least 4Ki, such as 64Mi, or 0",
                             log_limit));
  }

  // Simulated inventory (validated before anything is started).
  std::vector<berth::model::NodeInfo> sim_nodes;
  if (!simulate.empty()) {
    auto nodes = berth::agent::LoadSimulatedCluster(simulate);
    if (!nodes) return Fatal(fmt::format("--simulate {}: {}", simulate, nodes.error().message));
    sim_nodes = std::move(*nodes);
  }

  auto store = berth::store::SqliteStore::Open(data_dir, clock.NowMs());
  if (!store) return Fatal(store.error().message);
  berth::sched::CoreScheduler scheduler;
  berth::server::ControllerOptions options;
  options.log_dir = std::filesystem::path(data_dir) / "logs";
  options.lease_ms = *lease_ms;
  options.heartbeat_interval_ms = *heartbeat_ms;
  options.stop_grace_ms = *grace_ms;
  options.node_lost_grace_ms = *lost_grace_ms;
  options.log_limit_bytes = *log_limit_bytes;
  // The audit trail shares berth.db on a connection of its own.
  auto audit = berth::store::AuditLog::Open(data_dir);
  if (!audit) return Fatal(audit.error().message);
  // So do metering's prices and budgets.
  auto meter_store = berth::store::MeterStore::Open(data_dir);
  if (!meter_store) return Fatal(meter_store.error().message);
  berth::server::Meter meter(**meter_store, **store);
  berth::server::Controller controller(**store, scheduler, clock, options);
  controller.set_audit(audit->get());
  controller.set_meter(&meter);

  berth::server::AgentService agent_service(controller);
  grpc::ServerBuilder builder;
  int agent_port = 0;
  builder.AddListeningPort(agent_listen, grpc::InsecureServerCredentials(), &agent_port);
  builder.RegisterService(&agent_service);
  std::unique_ptr<grpc::Server> agent_server = builder.BuildAndStart();
  if (!agent_server || agent_port == 0) {
    return Fatal(fmt::format("cannot listen for agents on {} (--agent-listen)", agent_listen));
  }
  if (auto st = controller.Start(); !st) return Fatal(st.error().message);

  // All-in-one: agents for this host, in process, over an in-process channel.
  std::vector<std::unique_ptr<berth::agent::Agent>> agents;
  if (all_in_one) {
    std::vector<std::pair<berth::model::NodeInfo, std::unique_ptr<berth::agent::GpuProvider>>> plan;
    if (!sim_nodes.empty()) {
      for (auto& n : sim_nodes) {
        plan.emplace_back(
            n, std::make_unique<berth::agent::SimulatedProvider>(n, SimFaults(data_dir, n.name)));
      }
    } else {
      auto nvml = std::make_unique<berth::agent::NvmlProvider>();
      auto found = nvml->Discover();
      if (found && !found->gpus.empty()) {
        spdlog::info("NVML reports {} GPUs; running on them", found->gpus.size());
        plan.emplace_back(berth::agent::LocalHostNode(), std::move(nvml));
      } else {
        auto node = berth::agent::DefaultSimulatedNode();
        spdlog::info("no NVIDIA GPUs here; using the default simulated node {} (8x H100-80GB)",
                     node.name);
        plan.emplace_back(node, std::make_unique<berth::agent::SimulatedProvider>(
                                    node, SimFaults(data_dir, node.name)));
      }
    }
    for (auto& [node, provider] : plan) {
      berth::agent::AgentOptions ao;
      ao.data_dir = std::filesystem::path(data_dir) / "agents" / node.name;
      ao.shim_path = shim;
      ao.shared_gpus = *shared;
      auto channel = agent_server->InProcessChannel(grpc::ChannelArguments());
      agents.push_back(
          std::make_unique<berth::agent::Agent>(ao, node, std::move(provider), channel, clock));
      agents.back()->Start();
    }
  }

  auto max_body_bytes = berth::ParseBytes(max_body);
  if (!max_body_bytes || *max_body_bytes < 1024) {
    return Fatal(fmt::format("--max-body '{}': use a size of at least 1Ki, e.g. 2Mi", max_body));
  }
  if (rate_limit < 0 || rate_burst < 1 || rate_limit > 1'000'000 || rate_burst > 1'000'000) {
    return Fatal("--rate-limit must be 0 (none) to 1000000 and --rate-burst 1 to 1000000");
  }
  auto io_timeout_ms = berth::ParseDurationMs(io_timeout);
  if (!io_timeout_ms || *io_timeout_ms < 100) {
    return Fatal(
        fmt::format("--http-timeout '{}': use a duration of at least 100ms, e.g. 10s", io_timeout));
  }
  httplib::Server http;
  http.set_payload_max_length(*max_body_bytes);
  http.set_read_timeout(std::chrono::milliseconds(*io_timeout_ms));
  http.set_write_timeout(std::chrono::milliseconds(*io_timeout_ms));
  berth::server::RateLimiter limiter({rate_limit, rate_burst, 10000}, clock);
  // Identities and tokens; the first start makes the bootstrap admin.
  auto identities = berth::store::IdentityStore::Open(data_dir);
  if (!identities) return Fatal(identities.error().message);
  const auto token_file = std::filesystem::path(data_dir) / "bootstrap-token";
  auto bootstrapped =
      berth::server::BootstrapAdmin(**identities, token_file, clock.NowMs(), reset_admin_token);
  if (!bootstrapped) return Fatal(bootstrapped.error().message);
  if (*bootstrapped) {
    spdlog::info(
        "created the platform admin '{}'; its token is in {} (readable by this user "
        "only): berth login --token-file {}",
        berth::server::kBootstrapAdmin, token_file.string(), token_file.string());
  }
  berth::server::Authorizer authorizer(**identities, clock);
  berth::server::Api api(controller, **store, authorizer, clock);
  api.set_audit(audit->get());
  api.set_max_body_bytes(*max_body_bytes);
  if (rate_limit > 0) api.set_rate_limiter(&limiter);
  api.set_meter(&meter);
  api.Register(http);
  if (!http.bind_to_port(listen_hp->first, listen_hp->second)) {
    return Fatal(fmt::format("cannot listen on {} (--listen)", listen));
  }

  // Signals are taken by a dedicated thread, so shutdown runs in normal code.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {}: shutting down (running jobs keep running)", sig);
    http.stop();
  });

  spdlog::info("berthd serving the API on http://{} and agents on {}; state in {}", listen,
               agent_listen, data_dir);
  http.listen_after_bind();

  for (auto& a : agents) a->Stop();
  controller.Stop();
  agent_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (waiter.joinable()) {
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
  }
  return 0;
}
