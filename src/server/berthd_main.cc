// berthd: the Berth control plane. The composition root: every part is
// constructed and wired here and nowhere else.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/host.h"
#include "agent/nvml_provider.h"
#include "agent/sim_cluster.h"
#include "agent/sim_provider.h"
#include "common/clock.h"
#include "common/units.h"
#include "model/fencing.h"
#include "sched/core_scheduler.h"
#include "server/agent_service.h"
#include "server/alerting.h"
#include "server/api.h"
#include "server/auth.h"
#include "server/bootstrap.h"
#include "server/controller.h"
#include "server/data_dir.h"
#include "server/job_token.h"
#include "server/pki.h"
#include "store/audit_log.h"
#include "store/identity_store.h"
#include "store/meter_store.h"
#include "store/sqlite_store.h"
#include "store/telemetry_store.h"

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

// Room for `connections` sockets besides berthd's files: the soft limit
// on descriptors raised toward the hard one.
void RaiseFileLimit(std::size_t connections) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t want = static_cast<rlim_t>(connections) + 1024;
  if (lim.rlim_cur >= want) return;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur < want) {
    spdlog::warn("open files limited to {}: fewer than --max-connections {} can be served",
                 lim.rlim_cur, connections);
  }
}

int Fatal(const std::string& message) {
  spdlog::critical("{}", message);
  return 1;
}

// Whether `host` (from HOST:PORT) can only be reached from this machine.
bool IsLoopback(std::string host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

// The URL jobs reach the REST API at (BERTH_API_URL), from --listen: a
// wildcard address becomes this host's name, which the generated server
// certificate carries.
std::string DefaultApiUrl(bool https, const std::string& host, int port) {
  std::string h = host;
  if (h.empty() || h == "0.0.0.0" || h == "::" || h == "[::]") {
    std::array<char, 256> name{};
    h = ::gethostname(name.data(), name.size() - 1) == 0 ? std::string(name.data()) : "localhost";
  }
  return fmt::format("{}://{}:{}", https ? "https" : "http", h, port);
}

// `berthd cert node NODE --out DIR`: credentials for one berth-agent.
int IssueNodeCredentials(const std::string& data_dir, const std::string& node,
                         const std::string& out, std::int64_t now_ms) {
  auto st = berth::server::pki::WriteNodeCredentials(data_dir, node, out, now_ms);
  if (!st) {
    fmt::print(stderr, "berthd cert node: {}\n", st.error().message);
    return 1;
  }
  std::filesystem::path dir(out);
  fmt::print(
      "wrote {ca}, {cert} and {key} (mode 0600)\n"
      "start the agent on {node} with:\n"
      "  berth-agent --node-name {node} --tls-ca {ca} --tls-cert {cert} --tls-key {key} "
      "--server HOST:7461\n",
      fmt::arg("ca", (dir / "ca.pem").string()), fmt::arg("cert", (dir / (node + ".pem")).string()),
      fmt::arg("key", (dir / (node + "-key.pem")).string()), fmt::arg("node", node));
  return 0;
}

// What the listeners serve with: the server certificate (also presented to
// agents) and the CA agents' client certificates must chain to.
struct TlsSetup {
  std::filesystem::path cert_file;
  std::filesystem::path key_file;
  berth::server::pki::Credentials server;
  std::string client_ca_pem;
  std::string ca_file;  // what clients are told to trust
  std::string ca_pem;   // the data dir's CA when it issued the certificate; else ""
};

Result<TlsSetup> SetUpTls(const std::string& data_dir, const std::string& tls_cert,
                          const std::string& tls_key, const std::string& tls_client_ca,
                          const std::vector<std::string>& sans, bool need_agents_ca,
                          std::int64_t now_ms) {
  namespace pki = berth::server::pki;
  TlsSetup tls;
  pki::TlsFiles files = pki::FilesIn(data_dir);
  if (tls_cert.empty() != tls_key.empty()) {
    return berth::InvalidField("--tls-cert",
                               "--tls-cert and --tls-key go together: give both files of your "
                               "own certificate, or neither to use the data dir's CA");
  }
  if (!tls_cert.empty()) {
    auto own = pki::LoadCredentials(tls_cert, tls_key);
    if (!own) return std::unexpected(own.error());
    tls.server = std::move(*own);
    tls.cert_file = tls_cert;
    tls.key_file = tls_key;
    tls.ca_file = "the CA that issued " + tls_cert;
  } else {
    auto issued = pki::EnsureServerCert(data_dir, sans, now_ms);
    if (!issued) return std::unexpected(issued.error());
    tls.server = std::move(*issued);
    tls.cert_file = files.server_cert;
    tls.key_file = files.server_key;
    tls.ca_file = files.ca_cert.string();
    auto ca = pki::LoadCa(data_dir);
    if (!ca) return std::unexpected(ca.error());
    tls.ca_pem = ca->cert_pem;
  }
  if (!need_agents_ca) return tls;
  if (!tls_client_ca.empty()) {
    std::ifstream in(tls_client_ca);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in || text.str().find("BEGIN CERTIFICATE") == std::string::npos) {
      return berth::InvalidField(
          "--tls-client-ca",
          fmt::format("--tls-client-ca {}: cannot read a PEM CA certificate from it",
                      tls_client_ca));
    }
    tls.client_ca_pem = std::move(text).str();
  } else {
    // Node certificates come from `berthd cert node`, signed by this CA.
    auto ca = pki::EnsureCa(data_dir, now_ms);
    if (!ca) return std::unexpected(ca.error());
    tls.client_ca_pem = ca->cert_pem;
  }
  return tls;
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
  std::string agent_fence_grace = berth::FormatDurationMs(berth::model::kDefaultFenceGraceMs);
  std::string telemetry_interval = "10s";
  std::string alert_interval = "2s";
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
  app.add_option("--telemetry-interval", telemetry_interval,
                 "With --all-in-one: how often the embedded agents sample every GPU and stream "
                 "the readings; 0: never (berth-agent has the same flag)")
      ->capture_default_str();
  app.add_option("--alert-interval", alert_interval,
                 "How often alert rules are evaluated (docs/operations.md, \"Alerts\")")
      ->capture_default_str();
  app.add_option("--node-lost-grace", lost_grace,
                 "After a node's lease lapses, how long its runs may stay unaccounted for before "
                 "they are declared lost and their jobs follow their retry policies; never "
                 "before the node's agent has stopped them itself (--agent-fence-grace)")
      ->capture_default_str();
  app.add_option("--agent-fence-grace", agent_fence_grace,
                 "The longest berth-agent --fence-grace in the cluster: a silent node's runs are "
                 "presumed lost only after the lease, this, two stop graces and a margin "
                 "(docs/operations.md, \"Fencing\")")
      ->capture_default_str();
  std::string podman_conf;
  app.add_option("--podman-conf", podman_conf,
                 "With --all-in-one: a containers.conf for the podman of container runs, given "
                 "to it as CONTAINERS_CONF (deploy/podman/containers.conf)")
      ->check(CLI::ExistingFile);
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
  std::string webhook_secret_dir;
  app.add_option("--webhook-secret-dir", webhook_secret_dir,
                 "The only directory alert sinks' secret_file may name a file in (default: "
                 "<data-dir>/secrets, created 0700); a file elsewhere, a .. or a link out of it "
                 "is refused when the rules are applied");
  std::string shared_gpus;
  app.add_option("--shared-gpus", shared_gpus,
                 "All-in-one: the embedded agents' GPUs in sharing mode, taking slices of jobs "
                 "with resources.gpu_share: all, or indices such as 0,1 (default: none; with "
                 "--simulate, the file's shared_gpus)");
  std::string max_body = "2Mi";
  app.add_option("--max-body", max_body,
                 "Largest request body the API reads (e.g. 2Mi); larger ones get 413")
      ->capture_default_str();
  std::int64_t report_max_rows = static_cast<std::int64_t>(berth::server::kDefaultReportMaxRows);
  app.add_option("--report-max-rows", report_max_rows,
                 "Most stored rows one operations report or usage request reads; a window "
                 "holding more is refused with 400 (docs/operations.md, Read limits)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100'000'000}))
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
                 "How long a request may take to arrive whole (and an idle kept-alive "
                 "connection may stay), and how long the API waits on a client that reads "
                 "nothing of an answer")
      ->capture_default_str();
  std::string max_header = "16Ki";
  app.add_option("--max-header-bytes", max_header,
                 "Largest request header (request line and fields) the API reads; larger ones "
                 "get 431")
      ->capture_default_str();
  std::size_t max_connections = 4096;
  app.add_option("--max-connections", max_connections,
                 "Open API connections in all; more are closed as they arrive")
      ->capture_default_str();
  std::size_t max_source_connections = 512;
  app.add_option("--max-connections-per-source", max_source_connections,
                 "Open API connections from one source address; more are closed as they arrive")
      ->capture_default_str();
  int http_workers = 8;
  app.add_option("--http-workers", http_workers,
                 "Threads that run API handlers (reading and writing, and streams waiting "
                 "for data, take none)")
      ->capture_default_str();
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::vector<std::string> tls_sans;
  bool plain_http = false;
  bool plain_agents = false;
  app.add_option("--tls-cert", tls_cert,
                 "PEM certificate (chain) of the REST API and agent listener (default: "
                 "<data-dir>/tls/server.pem, issued by the data dir's CA at first start)");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", tls_client_ca,
                 "PEM CA that agents' client certificates must chain to (default: "
                 "<data-dir>/tls/ca.pem)");
  app.add_option("--tls-san", tls_sans,
                 "Extra host name or IP address for the generated server certificate, e.g. the "
                 "name agents and users reach berthd by (repeatable)");
  std::string api_url;
  app.add_option("--api-url", api_url,
                 "The URL jobs reach the REST API at, given to each run as BERTH_API_URL with "
                 "its job token (default: from --listen, a wildcard address as this host's "
                 "name)");
  app.add_flag("--plain-http", plain_http,
               "Serve the REST API over plain HTTP; only with a loopback --listen (dev, tests)");
  app.add_flag("--plain-agents", plain_agents,
               "Accept agents without TLS client certificates; only with a loopback "
               "--agent-listen (dev, tests)");

  std::string telemetry_minutes = "7d";
  std::string telemetry_hours = "400d";
  std::int64_t idle_threshold = 5;
  std::string idle_window = "30m";
  app.add_option("--telemetry-minute-retention", telemetry_minutes,
                 "How long GPU telemetry is kept in minute buckets before it is rolled up into "
                 "hour buckets (at least 1h)")
      ->capture_default_str();
  app.add_option("--telemetry-hour-retention", telemetry_hours,
                 "How long hour buckets of GPU telemetry are kept (at least the minute retention)")
      ->capture_default_str();
  app.add_option("--idle-threshold", idle_threshold,
                 "A GPU sample under this utilization (percent, 0-100) counts as idle, for the "
                 "idle share and idle-allocation flags")
      ->capture_default_str();
  app.add_option("--idle-window", idle_window,
                 "A usage record is flagged an idle allocation when its GPUs stayed under the idle "
                 "threshold this long (docs/metering.md)")
      ->capture_default_str();

  std::string cert_node;
  std::string cert_out;
  auto* cert_cmd = app.add_subcommand("cert", "Issue certificates from the data dir's CA");
  cert_cmd->require_subcommand(1);
  auto* node_cmd = cert_cmd->add_subcommand(
      "node",
      "Write DIR/ca.pem, DIR/NODE.pem and DIR/NODE-key.pem (0600): what berth-agent's "
      "--tls-ca, --tls-cert and --tls-key need to connect as node NODE");
  node_cmd->add_option("NODE", cert_node, "the node name the agent registers as")->required();
  node_cmd->add_option("--out", cert_out, "directory to write the three files to")->required();
  node_cmd->add_option("--data-dir", data_dir, "berthd's data dir, whose tls/ca-key.pem signs")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (*node_cmd) {
    berth::SystemClock cert_clock;
    return IssueNodeCredentials(data_dir, cert_node, cert_out, cert_clock.NowMs());
  }
  // SIGINT and SIGTERM are blocked before any thread starts, so every
  // thread inherits the mask and the waiter below takes them: otherwise the
  // kernel may deliver one to a controller or gRPC thread and end berthd
  // without its shutdown (and the final telemetry flush).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto shared = berth::agent::ParseSharedGpus(shared_gpus);
  if (!shared)
    return Fatal(fmt::format("--shared-gpus '{}': {}", shared_gpus, shared.error().message));

  spdlog::set_level(spdlog::level::from_str(log_level));
  berth::SystemClock clock;

  auto listen_hp = SplitHostPort("--listen", listen);
  if (!listen_hp) return Fatal(listen_hp.error().message);
  auto agent_hp = SplitHostPort("--agent-listen", agent_listen);
  if (!agent_hp) return Fatal(agent_hp.error().message);
  if (plain_http && !IsLoopback(listen_hp->first)) {
    return Fatal(fmt::format(
        "--plain-http is allowed only with a loopback --listen (127.0.0.1, ::1 or localhost), "
        "not '{}': anyone on the network could read tokens and job specs. Drop --plain-http to "
        "serve HTTPS",
        listen));
  }
  if (plain_agents && !IsLoopback(agent_hp->first)) {
    return Fatal(fmt::format(
        "--plain-agents is allowed only with a loopback --agent-listen (127.0.0.1, ::1 or "
        "localhost), not '{}'. Drop --plain-agents and give each agent a certificate from "
        "`berthd cert node NODE --out DIR`",
        agent_listen));
  }
  auto lease_ms = berth::ParseDurationMs(lease);
  auto heartbeat_ms = berth::ParseDurationMs(heartbeat);
  auto grace_ms = berth::ParseDurationMs(grace);
  auto lost_grace_ms = berth::ParseDurationMs(lost_grace);
  auto agent_fence_grace_ms = berth::ParseDurationMs(agent_fence_grace);
  if (!agent_fence_grace_ms || *agent_fence_grace_ms < 0) {
    return Fatal(fmt::format(
        "--agent-fence-grace '{}': give a duration such as 30s, at least the agents' --fence-grace",
        agent_fence_grace));
  }
  auto alert_interval_ms = berth::ParseDurationMs(alert_interval);
  if (!alert_interval_ms || *alert_interval_ms < 100) {
    return Fatal("--alert-interval takes a duration of at least 100ms, such as 2s");
  }
  if (!lease_ms || !heartbeat_ms || !grace_ms || !lost_grace_ms || *heartbeat_ms <= 0 ||
      *lease_ms <= *heartbeat_ms || *lost_grace_ms < 0) {
    return Fatal(
        "--lease, --heartbeat, --stop-grace and --node-lost-grace take durations such as 10s, "
        "and the lease must be longer than the heartbeat");
  }

  berth::store::TelemetryOptions telemetry_options;
  {
    auto minutes = berth::ParseDurationMs(telemetry_minutes);
    if (!minutes || *minutes < 3'600'000) {
      return Fatal(
          fmt::format("--telemetry-minute-retention '{}': use a duration of at least 1h, e.g. 7d",
                      telemetry_minutes));
    }
    auto hours = berth::ParseDurationMs(telemetry_hours);
    if (!hours || *hours < *minutes) {
      return Fatal(
          fmt::format("--telemetry-hour-retention '{}': use a duration at least as long as "
                      "--telemetry-minute-retention ({}), e.g. 400d",
                      telemetry_hours, telemetry_minutes));
    }
    if (idle_threshold < 0 || idle_threshold > 100) {
      return Fatal(fmt::format("--idle-threshold {}: use a percentage from 0 to 100, e.g. 5",
                               idle_threshold));
    }
    telemetry_options.minute_retention_ms = *minutes;
    telemetry_options.hour_retention_ms = *hours;
    telemetry_options.idle_util_pct = static_cast<std::uint32_t>(idle_threshold);
  }

  std::int64_t telemetry_interval_ms = 0;
  if (telemetry_interval != "0") {
    auto ms = berth::ParseDurationMs(telemetry_interval);
    if (!ms || *ms < 100) {
      return Fatal(fmt::format(
          "--telemetry-interval '{}': give a duration of at least 100ms such as 10s, or 0 for "
          "none",
          telemetry_interval));
    }
    telemetry_interval_ms = *ms;
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

  if (auto st = berth::server::SecureDataDir(data_dir, all_in_one); !st) {
    return Fatal(st.error().message);
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
  options.agent_fence_grace_ms = *agent_fence_grace_ms;
  options.log_limit_bytes = *log_limit_bytes;
  // The audit trail shares berth.db on a connection of its own.
  auto audit = berth::store::AuditLog::Open(data_dir);
  if (!audit) return Fatal(audit.error().message);
  // So do metering's prices and budgets.
  auto meter_store = berth::store::MeterStore::Open(data_dir);
  if (!meter_store) return Fatal(meter_store.error().message);
  berth::server::Meter meter(**meter_store, **store);
  // And GPU telemetry history (docs/metering.md, "Telemetry").
  auto telemetry = berth::store::TelemetryStore::Open(data_dir, telemetry_options);
  if (!telemetry) return Fatal(telemetry.error().message);
  {
    auto window = berth::ParseDurationMs(idle_window);
    if (!window || *window <= 0) {
      return Fatal(fmt::format("--idle-window {}: use a duration such as 30m or 2h", idle_window));
    }
    meter.set_telemetry(telemetry->get(), *window);
  }
  berth::server::Controller controller(**store, scheduler, clock, options);
  controller.set_audit(audit->get());
  controller.set_meter(&meter);
  // Counters and histograms for GET /metrics (docs/metrics.md).
  berth::server::ServerMetrics metrics;
  controller.set_metrics(&metrics);
  // Alert rules, the engine that evaluates them and the webhook outbox.
  if (webhook_secret_dir.empty()) {
    // The default is berthd's own, made like the rest of the data dir: a
    // directory only berthd's user enters (the umask is 077).
    webhook_secret_dir = (std::filesystem::path(data_dir) / "secrets").string();
    std::error_code ec;
    std::filesystem::create_directory(webhook_secret_dir, ec);
    if (ec) return Fatal(fmt::format("cannot create {}: {}", webhook_secret_dir, ec.message()));
  } else if (!std::filesystem::is_directory(webhook_secret_dir)) {
    return Fatal(
        fmt::format("--webhook-secret-dir {} is not a directory; create it (0700) and "
                    "put the sinks' secrets in it",
                    webhook_secret_dir));
  }
  berth::server::AlertRouter alert_router(**store, webhook_secret_dir);
  alert_router.set_metrics(&metrics);
  if (auto loaded = alert_router.Load(); !loaded) return Fatal(loaded.error().message);
  meter.set_alerts(&alert_router);
  controller.set_alerts(&alert_router);
  berth::server::AlertEngine alert_engine(**store, alert_router, clock);
  berth::server::AlertDeliverer::Options delivery_options;
  delivery_options.version = BERTH_VERSION;
  delivery_options.server = fmt::format("{}://{}", plain_http ? "http" : "https", listen);
  berth::server::AlertDeliverer alert_deliverer(**store, alert_router, clock, delivery_options);
  alert_deliverer.set_metrics(&metrics);

  std::optional<TlsSetup> tls;
  if (!plain_http || !plain_agents) {
    auto setup = SetUpTls(data_dir, tls_cert, tls_key, tls_client_ca, tls_sans, !plain_agents,
                          clock.NowMs());
    if (!setup) return Fatal(setup.error().message);
    tls = std::move(*setup);
  }

  berth::server::AgentService agent_service(controller, /*require_peer_cert=*/!plain_agents);
  grpc::ServerBuilder builder;
  int agent_port = 0;
  std::shared_ptr<grpc::ServerCredentials> agent_credentials = grpc::InsecureServerCredentials();
  if (!plain_agents) {
    // Mutual TLS: an agent without a certificate from the client CA never
    // gets as far as AgentService.
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = tls->client_ca_pem;
    ssl.pem_key_cert_pairs.push_back({tls->server.key_pem, tls->server.cert_pem});
    agent_credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(agent_listen, agent_credentials, &agent_port);
  // Agents ping every model::kAgentKeepaliveMs, also while berthd has
  // nothing to send, and fence their runs when the pings go unanswered: a
  // ping must never count against them.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(berth::model::kAgentKeepaliveMs / 2));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.RegisterService(&agent_service);
  std::unique_ptr<grpc::Server> agent_server = builder.BuildAndStart();
  if (!agent_server || agent_port == 0) {
    return Fatal(fmt::format("cannot listen for agents on {} (--agent-listen)", agent_listen));
  }
  // Each run's own credential (job_token.h), its key kept in the data dir.
  auto job_key = berth::server::JobTokenKey::LoadOrCreate(data_dir);
  if (!job_key) return Fatal(job_key.error().message);
  if (api_url.empty()) api_url = DefaultApiUrl(!plain_http, listen_hp->first, listen_hp->second);
  controller.set_job_api({&*job_key, api_url, tls && !plain_http ? tls->ca_pem : std::string()});
  // Agents' samples, once the controller has checked them, into the store.
  controller.set_telemetry_sink(
      [&](std::span<const berth::model::GpuSample> s) { (*telemetry)->Ingest(s); });
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
      ao.telemetry_interval_ms = telemetry_interval_ms;
      // Inside berthd: never cut off from it, and a restarted berthd gives
      // its nodes a fresh lease, so nothing to fence.
      ao.fence_grace_ms = std::nullopt;
      if (!podman_conf.empty()) ao.podman_conf = std::filesystem::absolute(podman_conf);
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
  auto max_header_bytes = berth::ParseBytes(max_header);
  if (!max_header_bytes || *max_header_bytes < 1024 || *max_header_bytes > 1024 * 1024) {
    return Fatal(
        fmt::format("--max-header-bytes '{}': use a size from 1Ki to 1Mi, e.g. 16Ki", max_header));
  }
  if (http_workers < 1 || http_workers > 256) return Fatal("--http-workers must be 1 to 256");
  if (max_connections < 16 || max_source_connections < 1 ||
      max_source_connections > max_connections) {
    return Fatal(
        "--max-connections must be at least 16, and --max-connections-per-source 1 to "
        "--max-connections");
  }
  berth::http::ServerOptions http_options;
  http_options.max_body_bytes = *max_body_bytes;
  http_options.max_header_bytes = *max_header_bytes;
  http_options.request_timeout = std::chrono::milliseconds(*io_timeout_ms);
  http_options.write_timeout = std::chrono::milliseconds(*io_timeout_ms);
  http_options.max_connections = max_connections;
  http_options.max_connections_per_source = max_source_connections;
  http_options.workers = http_workers;
  if (!plain_http) http_options.tls = berth::http::TlsFiles{tls->cert_file, tls->key_file};
  RaiseFileLimit(max_connections);
  berth::http::Server http(http_options);
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
  // A job token is good while its run is in the store and has not exited.
  authorizer.set_job_tokens(
      &*job_key,
      [&](const std::string& run_id) -> Result<std::optional<berth::server::JobRunState>> {
        auto run = (*store)->GetRun(run_id);
        if (!run) return std::unexpected(run.error());
        if (!*run) return std::optional<berth::server::JobRunState>();
        auto tenant = (*store)->JobTenant((*run)->job_id);
        if (!tenant) return std::unexpected(tenant.error());
        return std::optional<berth::server::JobRunState>(
            berth::server::JobRunState{(*run)->state != berth::model::RunState::kExited, *tenant});
      });
  berth::server::Api api(controller, **store, authorizer, clock);
  api.set_audit(audit->get());
  api.set_max_body_bytes(*max_body_bytes);
  api.set_report_max_rows(static_cast<std::size_t>(report_max_rows));
  if (rate_limit > 0) api.set_rate_limiter(&limiter);
  api.set_meter(&meter);
  api.set_alerts(&alert_router);
  api.set_metrics(&metrics);
  api.set_http_stats([&http] { return http.stats(); });
  api.set_telemetry(telemetry->get());
  // The operations report's measured utilization: the records' runs and the
  // fleet over the report's window.
  api.set_ops_utilization(
      [&](berth::TimeMs from, berth::TimeMs to,
          std::span<const std::string> run_ids) -> berth::Result<berth::server::OpsUtilization> {
        berth::server::OpsUtilization out;
        auto runs = (*telemetry)->RunSummaries(run_ids, from, to);
        if (!runs) return std::unexpected(runs.error());
        out.runs = std::move(*runs);
        auto fleet = (*telemetry)->FleetSummary(from, to);
        if (!fleet) return std::unexpected(fleet.error());
        if (fleet->samples > 0) out.fleet = *fleet;
        return out;
      });
  api.Register(http);
  if (auto bound = http.Bind(listen_hp->first, static_cast<std::uint16_t>(listen_hp->second));
      !bound) {
    return Fatal(fmt::format("{} (--listen)", bound.error().message));
  }

  // Signals are taken by a dedicated thread (blocked since the start), so
  // shutdown runs in normal code.
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {}: shutting down (running jobs keep running)", sig);
    http.Stop();
  });

  // Closed telemetry minutes reach berth.db every 5 s, and once more at exit.
  std::mutex flush_mu;
  std::condition_variable flush_cv;
  bool stopping = false;
  std::thread flusher([&] {
    std::unique_lock lock(flush_mu);
    while (!flush_cv.wait_for(lock, std::chrono::seconds(5), [&] { return stopping; })) {
      lock.unlock();
      if (auto st = (*telemetry)->Flush(clock.NowMs()); !st) {
        spdlog::error("telemetry: flush failed (kept in memory, retried): {}", st.error().message);
      }
      lock.lock();
    }
  });

  spdlog::info("berthd serving the API on {}://{} and agents on {} ({}); state in {}",
               plain_http ? "http" : "https", listen, agent_listen,
               plain_agents ? "plain, loopback only" : "mutual TLS", data_dir);
  if (tls) spdlog::info("clients trust {} (berth --ca FILE or BERTH_CA)", tls->ca_file);
  alert_engine.set_idle_source(berth::server::TelemetryIdleSource(**meter_store, **telemetry));
  alert_engine.Start(std::chrono::milliseconds(*alert_interval_ms));
  alert_deliverer.Start(std::chrono::milliseconds(500));
  http.Start();
  http.Wait();
  alert_engine.Stop();
  alert_deliverer.Stop();

  for (auto& a : agents) a->Stop();
  controller.Stop();
  {
    std::lock_guard lock(flush_mu);
    stopping = true;
  }
  flush_cv.notify_all();
  flusher.join();
  // Every minute seen, closed or not: nothing sampled is lost at shutdown.
  if (auto st = (*telemetry)->Flush(clock.NowMs() + 60'000); !st) {
    spdlog::error("telemetry: final flush failed: {}", st.error().message);
  }
  agent_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (waiter.joinable()) {
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
  }
  return 0;
}
