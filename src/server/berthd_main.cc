// berthd: the Berth control plane. The composition root: every part is
// constructed and wired here and nowhere else.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/host.h"
#include "agent/nvml_provider.h"
#include "agent/sim_cluster.h"
#include "agent/sim_provider.h"
#include "api/api.h"
#include "api/auth.h"
#include "api/bootstrap.h"
#include "api/render.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/units.h"
#include "control/agent_service.h"
#include "control/controller.h"
#include "control/job_token.h"
#include "control/pki.h"
#include "control/service_controller.h"
#include "gateway/gateway.h"
#include "http/static_files.h"
#include "meter/alerting.h"
#include "model/fencing.h"
#include "sched/core_scheduler.h"
#include "server/berthd_flags.h"
#include "server/data_dir.h"
#include "store/audit_log.h"
#include "store/identity_store.h"
#include "store/meter_store.h"
#include "store/migrate.h"
#include "store/pg_leadership.h"
#include "store/sqlite_store.h"
#include "store/telemetry_store.h"
#include "store/traffic_store.h"

namespace {

using berth::Result;

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

// berthd's API as the gateway on this host reaches it: an IP address to
// connect to (the gateway resolves no names; a wildcard listener is reached
// on loopback), and a URL whose host is a name berthd's certificate holds,
// which the gateway checks the certificate against: "localhost" for the
// data dir's CA's certificate (always among its names), else the host of
// --api-url or of the default API URL.
berth::server::GatewayApi GatewayApiOf(bool https, bool own_cert, const std::string& api_url,
                                       const std::string& host, int port) {
  std::string ip = host;
  if (ip.empty() || ip == "0.0.0.0") {
    ip = "127.0.0.1";
  } else if (ip == "::" || ip == "[::]") {
    ip = "::1";
  } else if (ip.front() == '[' && ip.back() == ']') {
    ip = ip.substr(1, ip.size() - 2);
  } else if (!berth::gateway::IsIpLiteral(ip)) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    std::string resolved;
    if (::getaddrinfo(ip.c_str(), nullptr, &hints, &found) == 0 && found != nullptr) {
      std::array<char, INET6_ADDRSTRLEN> text{};
      const void* addr =
          found->ai_family == AF_INET6
              ? static_cast<const void*>(
                    &reinterpret_cast<const sockaddr_in6*>(found->ai_addr)->sin6_addr)
              : static_cast<const void*>(
                    &reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr);
      if (::inet_ntop(found->ai_family, addr, text.data(), text.size()) != nullptr) {
        resolved = text.data();
      }
      ::freeaddrinfo(found);
    }
    ip = berth::gateway::IsIpLiteral(resolved) ? resolved : "127.0.0.1";
  }
  berth::server::GatewayApi api;
  api.address = berth::gateway::HostPort(ip, port);
  std::string name = "localhost";
  if (own_cert) {
    // The host of "https://NAME:PORT/...".
    std::string url = api_url.empty() ? DefaultApiUrl(https, host, port) : api_url;
    if (auto scheme = url.find("://"); scheme != std::string::npos) url = url.substr(scheme + 3);
    url = url.substr(0, url.find('/'));
    if (!url.empty() && url.front() == '[') {
      url = url.substr(0, url.find(']') + 1);
    } else {
      url = url.substr(0, url.find(':'));
    }
    if (!url.empty()) name = url;
  }
  api.url = fmt::format("{}://{}:{}", https ? "https" : "http", name, port);
  return api;
}

// --node-cert-ttl, in ms.
Result<std::int64_t> NodeCertTtlMs(const std::string& text) {
  namespace pki = berth::server::pki;
  auto ttl = berth::ParseDurationMs(text, pki::kMaxNodeCertTtlMs);
  if (!ttl) {
    return berth::InvalidField("--node-cert-ttl",
                               fmt::format("--node-cert-ttl '{}': {}", text, ttl.error().message));
  }
  if (*ttl < pki::kMinNodeCertTtlMs) {
    return berth::InvalidField(
        "--node-cert-ttl",
        fmt::format("--node-cert-ttl '{}' is too short: at least 10s, so an agent can renew it "
                    "(days in production)",
                    text));
  }
  return ttl;
}

// `berthd cert node NODE --out DIR`: credentials for one berth-agent.
int IssueNodeCredentials(const std::string& data_dir, const std::string& node,
                         const std::string& out, const std::string& ttl_text, std::int64_t now_ms) {
  auto ttl = NodeCertTtlMs(ttl_text);
  if (!ttl) {
    fmt::print(stderr, "berthd cert node: {}\n", ttl.error().message);
    return 2;
  }
  auto st = berth::server::pki::WriteNodeCredentials(data_dir, node, out, now_ms, *ttl);
  if (!st) {
    fmt::print(stderr, "berthd cert node: {}\n", st.error().message);
    return 1;
  }
  std::filesystem::path dir(out);
  fmt::print(
      "wrote {ca}, {cert} and {key} (mode 0600); the certificate is valid for {ttl}, and the "
      "agent renews it over its stream\n"
      "start the agent on {node} with:\n"
      "  berth-agent --node-name {node} --tls-ca {ca} --tls-cert {cert} --tls-key {key} "
      "--server HOST:7461\n",
      fmt::arg("ca", (dir / "ca.pem").string()), fmt::arg("cert", (dir / (node + ".pem")).string()),
      fmt::arg("key", (dir / (node + "-key.pem")).string()), fmt::arg("node", node),
      fmt::arg("ttl", berth::FormatDurationMs(*ttl)));
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

using berth::server::BerthdFlags;

// A flag's or a setup step's error, printed as is by Fatal.
berth::Error Invalid(std::string message) {
  berth::Error error;
  error.code = berth::Code::kInvalidArgument;
  error.message = std::move(message);
  return error;
}

// What the flags mean, checked before anything is opened or started.
struct Settings {
  // Where every store keeps its state (--store, --data-dir).
  berth::store::StoreLocation state{std::filesystem::path()};
  // With a PostgreSQL store: the leadership lease's timings (--leader-ttl).
  berth::store::LeadershipOptions leadership;
  std::pair<std::string, int> listen;
  std::pair<std::string, int> agent_listen;
  std::int64_t lease_ms = 0;
  std::int64_t heartbeat_ms = 0;
  std::int64_t grace_ms = 0;
  std::int64_t lost_grace_ms = 0;
  std::int64_t forecast_interval_ms = 0;
  std::int64_t agent_fence_grace_ms = 0;
  std::int64_t alert_interval_ms = 0;
  std::int64_t service_interval_ms = 0;
  berth::store::TelemetryOptions telemetry;
  std::int64_t telemetry_interval_ms = 0;
  std::int64_t events_recheck_ms = 0;
  std::uint64_t log_limit_bytes = 0;
  std::int64_t idle_window_ms = 0;
  std::int64_t node_cert_ttl_ms = 0;
  berth::http::ServerOptions http;
  std::vector<berth::model::NodeInfo> sim_nodes;
  // The service gateway's frontend; nullopt: no gateway.
  std::optional<std::pair<std::string, int>> gateway_listen;
};

// The listeners, and what may serve them without TLS.
berth::Status CheckListeners(const BerthdFlags& f, Settings& s) {
  auto listen_hp = SplitHostPort("--listen", f.listen);
  if (!listen_hp) return std::unexpected(listen_hp.error());
  auto agent_hp = SplitHostPort("--agent-listen", f.agent_listen);
  if (!agent_hp) return std::unexpected(agent_hp.error());
  if (f.plain_http && !IsLoopback(listen_hp->first)) {
    return std::unexpected(Invalid(fmt::format(
        "--plain-http is allowed only with a loopback --listen (127.0.0.1, ::1 or localhost), "
        "not '{}': anyone on the network could read tokens and job specs. Drop --plain-http to "
        "serve HTTPS",
        f.listen)));
  }
  if (f.plain_agents && !IsLoopback(agent_hp->first)) {
    return std::unexpected(Invalid(fmt::format(
        "--plain-agents is allowed only with a loopback --agent-listen (127.0.0.1, ::1 or "
        "localhost), not '{}'. Drop --plain-agents and give each agent a certificate from "
        "`berthd cert node NODE --out DIR`",
        f.agent_listen)));
  }
  s.listen = std::move(*listen_hp);
  s.agent_listen = std::move(*agent_hp);
  std::string gateway = f.gateway_listen;
  if (gateway.empty()) gateway = f.all_in_one ? "127.0.0.1:8480" : "off";
  if (gateway != "off") {
    auto gateway_hp = SplitHostPort("--gateway-listen", gateway);
    if (!gateway_hp || gateway_hp->second == 0) {
      return std::unexpected(Invalid(fmt::format(
          "--gateway-listen '{}': give HOST:PORT with a port from 1 to 65535 (HAProxy cannot "
          "report a port it picked), e.g. 127.0.0.1:8480, or 'off'",
          gateway)));
    }
    if (gateway_hp->first == "localhost") gateway_hp->first = "127.0.0.1";
    s.gateway_listen = std::move(*gateway_hp);
  }
  return {};
}

// Leases, heartbeats, graces and the alert interval.
berth::Status CheckTimings(const BerthdFlags& f, Settings& s) {
  auto lease_ms = berth::ParseDurationMs(f.lease);
  auto heartbeat_ms = berth::ParseDurationMs(f.heartbeat);
  auto grace_ms = berth::ParseDurationMs(f.grace);
  auto lost_grace_ms = berth::ParseDurationMs(f.lost_grace);
  auto agent_fence_grace_ms = berth::ParseDurationMs(f.agent_fence_grace);
  if (!agent_fence_grace_ms || *agent_fence_grace_ms < 0) {
    return std::unexpected(Invalid(fmt::format(
        "--agent-fence-grace '{}': give a duration such as 30s, at least the agents' --fence-grace",
        f.agent_fence_grace)));
  }
  auto alert_interval_ms = berth::ParseDurationMs(f.alert_interval);
  if (!alert_interval_ms || *alert_interval_ms < 100) {
    return std::unexpected(
        Invalid("--alert-interval takes a duration of at least 100ms, such as 2s"));
  }
  auto service_interval_ms = berth::ParseDurationMs(f.service_interval);
  if (!service_interval_ms || *service_interval_ms < 100) {
    return std::unexpected(
        Invalid("--service-interval takes a duration of at least 100ms, such as 2s"));
  }
  if (!lease_ms || !heartbeat_ms || !grace_ms || !lost_grace_ms || *heartbeat_ms <= 0 ||
      *lease_ms <= *heartbeat_ms || *lost_grace_ms < 0) {
    return std::unexpected(
        Invalid("--lease, --heartbeat, --stop-grace and --node-lost-grace take durations such as "
                "10s, and the lease must be longer than the heartbeat"));
  }
  auto forecast_interval_ms = berth::ParseDurationMs(f.forecast_interval);
  if (f.forecast_interval == "0") forecast_interval_ms = 0;
  if (!forecast_interval_ms || *forecast_interval_ms < 0 ||
      (*forecast_interval_ms > 0 && *forecast_interval_ms < 1000)) {
    return std::unexpected(Invalid(fmt::format(
        "--forecast-interval '{}': give a duration of at least 1s, such as 60s, or 0 for never",
        f.forecast_interval)));
  }
  s.forecast_interval_ms = *forecast_interval_ms;
  s.lease_ms = *lease_ms;
  s.heartbeat_ms = *heartbeat_ms;
  s.grace_ms = *grace_ms;
  s.lost_grace_ms = *lost_grace_ms;
  s.agent_fence_grace_ms = *agent_fence_grace_ms;
  s.alert_interval_ms = *alert_interval_ms;
  s.service_interval_ms = *service_interval_ms;
  return {};
}

// Telemetry retention, the idle threshold and the sampling interval.
berth::Status CheckTelemetry(const BerthdFlags& f, Settings& s) {
  auto minutes = berth::ParseDurationMs(f.telemetry_minutes);
  if (!minutes || *minutes < 3'600'000) {
    return std::unexpected(Invalid(
        fmt::format("--telemetry-minute-retention '{}': use a duration of at least 1h, e.g. 7d",
                    f.telemetry_minutes)));
  }
  auto hours = berth::ParseDurationMs(f.telemetry_hours);
  if (!hours || *hours < *minutes) {
    return std::unexpected(
        Invalid(fmt::format("--telemetry-hour-retention '{}': use a duration at least as long as "
                            "--telemetry-minute-retention ({}), e.g. 400d",
                            f.telemetry_hours, f.telemetry_minutes)));
  }
  if (f.idle_threshold < 0 || f.idle_threshold > 100) {
    return std::unexpected(Invalid(fmt::format(
        "--idle-threshold {}: use a percentage from 0 to 100, e.g. 5", f.idle_threshold)));
  }
  s.telemetry.minute_retention_ms = *minutes;
  s.telemetry.hour_retention_ms = *hours;
  s.telemetry.idle_util_pct = static_cast<std::uint32_t>(f.idle_threshold);
  if (f.telemetry_interval != "0") {
    auto ms = berth::ParseDurationMs(f.telemetry_interval);
    if (!ms || *ms < 100) {
      return std::unexpected(Invalid(fmt::format(
          "--telemetry-interval '{}': give a duration of at least 100ms such as 10s, or 0 for "
          "none",
          f.telemetry_interval)));
    }
    s.telemetry_interval_ms = *ms;
  }
  auto recheck = berth::ParseDurationMs(f.events_recheck);
  if (!recheck || *recheck < 100 || *recheck > 3'600'000) {
    return std::unexpected(Invalid(fmt::format(
        "--events-recheck '{}': give a duration from 100ms to 1h such as 30s", f.events_recheck)));
  }
  s.events_recheck_ms = *recheck;
  return {};
}

// The API's limits.
Result<berth::http::ServerOptions> CheckHttpFlags(const BerthdFlags& f) {
  auto max_body_bytes = berth::ParseBytes(f.max_body);
  if (!max_body_bytes || *max_body_bytes < 1024) {
    return std::unexpected(
        Invalid(fmt::format("--max-body '{}': use a size of at least 1Ki, e.g. 2Mi", f.max_body)));
  }
  if (f.rate_limit < 0 || f.rate_burst < 1 || f.rate_limit > 1'000'000 ||
      f.rate_burst > 1'000'000) {
    return std::unexpected(
        Invalid("--rate-limit must be 0 (none) to 1000000 and --rate-burst 1 to 1000000"));
  }
  auto io_timeout_ms = berth::ParseDurationMs(f.io_timeout);
  if (!io_timeout_ms || *io_timeout_ms < 100) {
    return std::unexpected(Invalid(fmt::format(
        "--http-timeout '{}': use a duration of at least 100ms, e.g. 10s", f.io_timeout)));
  }
  auto max_header_bytes = berth::ParseBytes(f.max_header);
  if (!max_header_bytes || *max_header_bytes < 1024 || *max_header_bytes > 1024 * 1024) {
    return std::unexpected(Invalid(fmt::format(
        "--max-header-bytes '{}': use a size from 1Ki to 1Mi, e.g. 16Ki", f.max_header)));
  }
  if (f.http_workers < 1 || f.http_workers > 256) {
    return std::unexpected(Invalid("--http-workers must be 1 to 256"));
  }
  if (f.max_connections < 16 || f.max_source_connections < 1 ||
      f.max_source_connections > f.max_connections) {
    return std::unexpected(
        Invalid("--max-connections must be at least 16, and --max-connections-per-source 1 to "
                "--max-connections"));
  }
  berth::http::ServerOptions options;
  options.max_body_bytes = *max_body_bytes;
  options.max_header_bytes = *max_header_bytes;
  options.request_timeout = std::chrono::milliseconds(*io_timeout_ms);
  options.write_timeout = std::chrono::milliseconds(*io_timeout_ms);
  options.max_connections = f.max_connections;
  options.max_connections_per_source = f.max_source_connections;
  options.workers = f.http_workers;
  return options;
}

// Every flag, checked before the data dir is touched: a refused start
// leaves nothing behind.
Result<Settings> CheckFlags(const BerthdFlags& f) {
  Settings s;
  auto state = berth::store::ParseStoreLocation(f.store, f.data_dir);
  if (!state) {
    return berth::Fail(berth::Code::kInvalidArgument,
                       fmt::format("--store: {}", state.error().message), "store");
  }
  s.state = std::move(*state);
  if (s.state.postgres()) {
    auto ttl = berth::ParseDurationMs(f.leader_ttl);
    if (!ttl || *ttl < 3000 || *ttl > 600'000) {
      return std::unexpected(Invalid(fmt::format(
          "--leader-ttl '{}': use a duration from 3s to 10m, such as 4s (a standby takes over "
          "this long after the leader's last renewal)",
          f.leader_ttl)));
    }
    s.leadership.ttl = std::chrono::milliseconds(*ttl);
    s.leadership.renew_every = std::chrono::milliseconds(*ttl / 4);
    s.leadership.retry_every = std::chrono::milliseconds(std::min<std::int64_t>(200, *ttl / 10));
  }
  if (auto st = CheckListeners(f, s); !st) return std::unexpected(st.error());
  if (auto st = CheckTimings(f, s); !st) return std::unexpected(st.error());
  if (auto st = CheckTelemetry(f, s); !st) return std::unexpected(st.error());
  auto node_cert_ttl = NodeCertTtlMs(f.node_cert_ttl);
  if (!node_cert_ttl) return std::unexpected(node_cert_ttl.error());
  s.node_cert_ttl_ms = *node_cert_ttl;
  auto log_limit_bytes = berth::ParseBytes(f.log_limit);
  if (!log_limit_bytes || (*log_limit_bytes > 0 && *log_limit_bytes < 4096)) {
    return std::unexpected(Invalid(fmt::format(
        "--log-limit '{}': write a size of at least 4Ki, such as 64Mi, or 0", f.log_limit)));
  }
  s.log_limit_bytes = *log_limit_bytes;
  auto window = berth::ParseDurationMs(f.idle_window);
  if (!window || *window <= 0) {
    return std::unexpected(
        Invalid(fmt::format("--idle-window {}: use a duration such as 30m or 2h", f.idle_window)));
  }
  s.idle_window_ms = *window;
  auto http = CheckHttpFlags(f);
  if (!http) return std::unexpected(http.error());
  s.http = std::move(*http);
  if (!f.webhook_secret_dir.empty() && !std::filesystem::is_directory(f.webhook_secret_dir)) {
    return std::unexpected(
        Invalid(fmt::format("--webhook-secret-dir {} is not a directory; create it (0700) and "
                            "put the sinks' secrets in it",
                            f.webhook_secret_dir)));
  }
  // Simulated inventory (validated before anything is started).
  if (!f.simulate.empty()) {
    auto nodes = berth::agent::LoadSimulatedCluster(f.simulate);
    if (!nodes) {
      return std::unexpected(
          Invalid(fmt::format("--simulate {}: {}", f.simulate, nodes.error().message)));
    }
    s.sim_nodes = std::move(*nodes);
  }
  return s;
}

// Every long-lived part of a running berthd, declared in the order they are
// built, so they are destroyed in the reverse order.
struct Daemon {
  berth::SystemClock clock;
  // With a PostgreSQL store: this berthd's part in the leadership. Last to
  // go, so its renewals go on until everything else has stopped.
  std::unique_ptr<berth::store::Leadership> leadership;
  // What GET /v1/events tells watchers (the console); outlives the store
  // that publishes to it.
  std::unique_ptr<berth::store::ChangeFeed> changes;
  std::unique_ptr<berth::store::SqliteStore> store;
  berth::sched::CoreScheduler scheduler;
  std::unique_ptr<berth::store::AuditLog> audit;
  std::unique_ptr<berth::store::MeterStore> meter_store;
  std::optional<berth::server::Meter> meter;
  std::unique_ptr<berth::store::TelemetryStore> telemetry;
  // Before `services`, which writes its last counts into it as it stops.
  std::unique_ptr<berth::store::ServiceTrafficStore> traffic;
  std::optional<berth::server::Controller> controller;
  // Before `services`, whose thread drives it, so that it outlives that
  // thread. Destroying it leaves HAProxy serving (a restart adopts it).
  std::unique_ptr<berth::gateway::Gateway> gateway;
  std::optional<berth::server::ServiceController> services;
  berth::server::ServerMetrics metrics;
  std::optional<berth::server::AlertRouter> alert_router;
  std::optional<berth::server::AlertEngine> alert_engine;
  std::optional<berth::server::AlertDeliverer> alert_deliverer;
  std::optional<TlsSetup> tls;
  std::optional<berth::server::AgentService> agent_service;
  std::unique_ptr<grpc::Server> agent_server;
  std::optional<berth::server::JobTokenKey> job_key;
  std::vector<std::unique_ptr<berth::agent::Agent>> agents;
  // Before the server whose routes read it, so it outlives them.
  std::optional<berth::http::StaticSite> console;
  std::optional<berth::http::Server> http;
  std::optional<berth::server::RateLimiter> limiter;
  std::unique_ptr<berth::store::IdentityStore> identities;
  std::optional<berth::server::Authorizer> authorizer;
  std::optional<berth::server::Api> api;
};

// A standby's answers while it waits for the lease: /healthz says who
// leads; /readyz and every other request get 503, so that load balancers
// and clients with every control-plane address move to the leader.
// Standbys serve no reads: they hold no state until they lead, and the
// leader's answers are the only ones that are up to date.
// What /healthz says of the lease as this berthd last saw it: who holds
// it, its term, how old this view is (`lease_age_ms`, since the last read
// or renewal that got through: a standby's lag; null before the first),
// when the lease lapses unless renewed, and why the database did not
// answer last, if it did not.
nlohmann::json LeaseJson(const berth::store::Leadership& lead, berth::TimeMs now) {
  const berth::store::LeaseState lease = lead.last_seen();
  const berth::TimeMs seen_at = lead.lease_seen_at();
  nlohmann::json body{{"leader", lease.holder},
                      {"term", lease.term},
                      {"lease_age_ms", seen_at > 0 ? nlohmann::json(now - seen_at) : nullptr},
                      {"lease_expires_in_ms", lease.expires_at_ms - now}};
  if (std::string error = lead.last_error(); !error.empty()) body["database_error"] = error;
  return body;
}

void AnswerAsStandby(const berth::store::Leadership& lead, berth::TimeMs now,
                     const berth::http::Request& req, berth::http::Response& res) {
  const berth::store::LeaseState lease = lead.last_seen();
  nlohmann::json body = LeaseJson(lead, now);
  body["role"] = "standby";
  body["version"] = BERTH_VERSION;
  if (req.path == "/healthz") {
    body["status"] = "ok";
    res.status = 200;
  } else {
    const std::string leader =
        lease.holder.empty() ? std::string("no berthd leads yet") : lease.holder + " leads";
    body.update(berth::server::ErrorJson(berth::Error{
        berth::Code::kUnavailable,
        fmt::format("this berthd is a standby ({}, term {}): send requests to the leader; "
                    "clients given every control-plane address move on by themselves",
                    leader, lease.term),
        ""}));
    body["status"] = "standby";
    res.status = 503;
    res.set_header("Retry-After", "1");
  }
  res.set_content(body.dump(), "application/json");
}

// Several berthd on one PostgreSQL database: waits, as a standby, until
// this one takes the leadership lease, and returns its term. Meanwhile a
// standby server on --listen answers probes and turns requests away. A
// SIGINT or SIGTERM ends the wait: nullopt.
berth::Result<std::optional<std::int64_t>> StandBy(const BerthdFlags& f, const Settings& s,
                                                   sigset_t& signals, Daemon& d) {
  const std::string api_url =
      f.api_url.empty() ? DefaultApiUrl(!f.plain_http, s.listen.first, s.listen.second) : f.api_url;
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  auto leadership = berth::store::Leadership::Open(
      s.state.conninfo, fmt::format("{} (pid {} on {})", api_url, getpid(), host.data()), d.clock,
      s.leadership);
  if (!leadership) return std::unexpected(leadership.error());
  d.leadership = std::move(*leadership);
  berth::store::Leadership& lead = *d.leadership;

  berth::http::ServerOptions options = s.http;
  if (!f.plain_http) options.tls = berth::http::TlsFiles{d.tls->cert_file, d.tls->key_file};
  berth::http::Server standby(options);
  standby.set_inline_paths({"/healthz", "/readyz"});
  standby.set_pre_routing([&lead, &d](const berth::http::Request& req, berth::http::Response& res) {
    AnswerAsStandby(lead, d.clock.NowMs(), req, res);
    return true;
  });
  if (auto bound = standby.Bind(s.listen.first, static_cast<std::uint16_t>(s.listen.second));
      !bound) {
    return std::unexpected(Invalid(fmt::format("{} (--listen)", bound.error().message)));
  }
  standby.Start();
  // Signals end the wait; the loop ends with it (sigtimedwait, so that
  // no signal is left for a waiter that is gone).
  std::atomic<bool> waiting{true};
  std::atomic<bool> signalled{false};
  std::thread waiter([&] {
    const timespec tick{0, 100'000'000};
    while (waiting.load()) {
      if (sigtimedwait(&signals, nullptr, &tick) > 0) {
        spdlog::info("signal while standing by: shutting down");
        signalled.store(true);
        lead.Stop();
        return;
      }
    }
  });
  auto term = lead.Acquire();
  waiting.store(false);
  waiter.join();
  standby.Stop();
  if (signalled.load()) return std::nullopt;
  if (!term) return std::unexpected(term.error());
  return *term;
}

// The data dir's stores, metering, and the controller on them.
berth::Status OpenStores(const BerthdFlags& f, const Settings& s, Daemon& d) {
  auto store = berth::store::SqliteStore::Open(s.state, d.clock.NowMs());
  if (!store) return std::unexpected(store.error());
  d.store = std::move(*store);
  // Its epoch is this start, so a watcher's position from before a
  // restart or a failover is recognised as another feed's.
  d.changes = std::make_unique<berth::store::ChangeFeed>(std::to_string(d.clock.NowMs()));
  d.store->set_change_feed(d.changes.get());
  berth::server::ControllerOptions options;
  options.log_dir = std::filesystem::path(f.data_dir) / "logs";
  options.lease_ms = s.lease_ms;
  options.heartbeat_interval_ms = s.heartbeat_ms;
  options.stop_grace_ms = s.grace_ms;
  options.node_lost_grace_ms = s.lost_grace_ms;
  options.forecast.interval_ms = s.forecast_interval_ms;
  options.agent_fence_grace_ms = s.agent_fence_grace_ms;
  options.log_limit_bytes = s.log_limit_bytes;
  // The audit trail shares berth.db on a connection of its own.
  auto audit = berth::store::AuditLog::Open(s.state);
  if (!audit) return std::unexpected(audit.error());
  d.audit = std::move(*audit);
  // So do metering's prices and budgets.
  auto meter_store = berth::store::MeterStore::Open(s.state);
  if (!meter_store) return std::unexpected(meter_store.error());
  d.meter_store = std::move(*meter_store);
  d.meter.emplace(*d.meter_store, *d.store);
  // And GPU telemetry history (docs/metering.md, "Telemetry").
  auto telemetry = berth::store::TelemetryStore::Open(s.state, s.telemetry);
  if (!telemetry) return std::unexpected(telemetry.error());
  d.telemetry = std::move(*telemetry);
  d.meter->set_telemetry(d.telemetry.get(), s.idle_window_ms);
  // And services' requests by hour, kept as long as GPU telemetry's hours.
  auto traffic = berth::store::ServiceTrafficStore::Open(s.state, s.telemetry.hour_retention_ms);
  if (!traffic) return std::unexpected(traffic.error());
  d.traffic = std::move(*traffic);
  d.controller.emplace(*d.store, d.scheduler, d.clock, options);
  d.controller->set_meter(&*d.meter);
  d.services.emplace(*d.store, *d.controller, d.clock);
  // Sessions are judged idle on their GPUs' readings too.
  d.services->SetTelemetry([telemetry = d.telemetry.get()] { return telemetry->Latest(); });
  d.services->SetTrafficStore(d.traffic.get());
  // A replica's readiness changed: the next round of its service at once.
  d.controller->SetRunHealthListener([services = &*d.services] { services->Wake(); });
  // Counters and histograms for GET /metrics (docs/metrics.md).
  d.controller->set_metrics(&d.metrics);
  return {};
}

// The service gateway (docs/services.md, "Gateway"): HAProxy in
// <data-dir>/gateway, adopted when one from an earlier berthd still serves.
berth::Status StartGateway(const BerthdFlags& f, const Settings& s, Daemon& d) {
  if (!s.gateway_listen) return {};
  berth::gateway::GatewayOptions options;
  options.state_dir = std::filesystem::path(f.data_dir) / "gateway";
  options.bind_address = s.gateway_listen->first;
  options.bind_port = s.gateway_listen->second;
  options.haproxy_binary = f.haproxy;
  // Callers of a service are checked at berthd's API, over its TLS: trust
  // the data dir's CA when it issued berthd's certificate, else the
  // system's CAs (a --tls-cert from a CA the host trusts).
  if (d.tls && !f.plain_http && !d.tls->ca_pem.empty()) {
    options.auth_ca_file = berth::server::pki::FilesIn(f.data_dir).ca_cert;
  }
  auto gateway = berth::gateway::Gateway::Start(options);
  if (!gateway) {
    return std::unexpected(Invalid(fmt::format(
        "the service gateway did not start on {}:{}: {}. Install HAProxy "
        "(scripts/install-deps.sh), free the port or choose another with --gateway-listen "
        "HOST:PORT, or run without it: --gateway-listen off",
        options.bind_address, options.bind_port, gateway.error().message)));
  }
  d.gateway = std::move(*gateway);
  const std::string host = options.bind_address.find(':') != std::string::npos
                               ? "[" + options.bind_address + "]"
                               : options.bind_address;
  d.services->SetGateway(d.gateway.get(), fmt::format("http://{}:{}", host, options.bind_port),
                         GatewayApiOf(!f.plain_http, d.tls && d.tls->ca_pem.empty(), f.api_url,
                                      s.listen.first, s.listen.second));
  spdlog::info("gateway: HAProxy {} (pid {}) serves services on http://{}:{}/s/TENANT/SERVICE/",
               d.gateway->adopted() ? "adopted" : "started", d.gateway->master_pid(), host,
               options.bind_port);
  return {};
}

// Alert rules, the engine that evaluates them and the webhook outbox.
berth::Status SetUpAlerts(const BerthdFlags& f, Daemon& d) {
  std::string secret_dir = f.webhook_secret_dir;
  if (secret_dir.empty()) {
    // The default is berthd's own, made like the rest of the data dir: a
    // directory only berthd's user enters (the umask is 077).
    secret_dir = (std::filesystem::path(f.data_dir) / "secrets").string();
    std::error_code ec;
    std::filesystem::create_directory(secret_dir, ec);
    if (ec) {
      return std::unexpected(
          Invalid(fmt::format("cannot create {}: {}", secret_dir, ec.message())));
    }
  }
  d.alert_router.emplace(*d.store, secret_dir);
  d.alert_router->set_metrics(&d.metrics);
  if (auto loaded = d.alert_router->Load(); !loaded) return loaded;
  d.meter->set_alerts(&*d.alert_router);
  d.controller->set_alerts(&*d.alert_router);
  d.alert_engine.emplace(*d.store, *d.alert_router, d.clock);
  berth::server::AlertDeliverer::Options delivery_options;
  delivery_options.version = BERTH_VERSION;
  delivery_options.server = fmt::format("{}://{}", f.plain_http ? "http" : "https", f.listen);
  d.alert_deliverer.emplace(*d.store, *d.alert_router, d.clock, delivery_options);
  d.alert_deliverer->set_metrics(&d.metrics);
  return {};
}

// The gRPC listener agents connect to; then each run's credentials, and
// the controller started.
berth::Status StartAgentService(const BerthdFlags& f, const Settings& s, Daemon& d) {
  d.agent_service.emplace(*d.controller, /*require_peer_cert=*/!f.plain_agents);
  if (!f.plain_agents && f.tls_client_ca.empty()) {
    // Agents' certificates come from the data dir's CA: berthd renews them.
    auto ca = berth::server::pki::LoadCa(f.data_dir);
    if (!ca) return std::unexpected(ca.error());
    d.controller->set_node_cert_signer({std::move(*ca), s.node_cert_ttl_ms});
  }
  grpc::ServerBuilder builder;
  int agent_port = 0;
  std::shared_ptr<grpc::ServerCredentials> agent_credentials = grpc::InsecureServerCredentials();
  if (!f.plain_agents) {
    // Mutual TLS: an agent without a certificate from the client CA never
    // gets as far as AgentService.
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = d.tls->client_ca_pem;
    ssl.pem_key_cert_pairs.push_back({d.tls->server.key_pem, d.tls->server.cert_pem});
    agent_credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(f.agent_listen, agent_credentials, &agent_port);
  // Agents ping every model::kAgentKeepaliveMs, also while berthd has
  // nothing to send, and fence their runs when the pings go unanswered: a
  // ping must never count against them.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(berth::model::kAgentKeepaliveMs / 2));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.RegisterService(&*d.agent_service);
  d.agent_server = builder.BuildAndStart();
  if (!d.agent_server || agent_port == 0) {
    return std::unexpected(
        Invalid(fmt::format("cannot listen for agents on {} (--agent-listen)", f.agent_listen)));
  }
  // Each run's own credential (job_token.h), its key kept in the data dir.
  auto job_key = berth::server::JobTokenKey::LoadOrCreate(f.data_dir);
  if (!job_key) return std::unexpected(job_key.error());
  d.job_key.emplace(std::move(*job_key));
  std::string api_url = f.api_url;
  if (api_url.empty()) api_url = DefaultApiUrl(!f.plain_http, s.listen.first, s.listen.second);
  d.controller->set_job_api(
      {&*d.job_key, api_url, d.tls && !f.plain_http ? d.tls->ca_pem : std::string()});
  // Agents' samples, once the controller has checked them, into the store.
  d.controller->set_telemetry_sink(
      [&d](std::span<const berth::model::GpuSample> samples) { d.telemetry->Ingest(samples); });
  return d.controller->Start();
}

// All-in-one: agents for this host, in process, over an in-process channel.
void StartEmbeddedAgents(const BerthdFlags& f, const Settings& s,
                         const berth::agent::SharedGpus& shared, Daemon& d) {
  std::vector<std::pair<berth::model::NodeInfo, std::unique_ptr<berth::agent::GpuProvider>>> plan;
  if (!s.sim_nodes.empty()) {
    for (const auto& n : s.sim_nodes) {
      plan.emplace_back(
          n, std::make_unique<berth::agent::SimulatedProvider>(n, SimFaults(f.data_dir, n.name)));
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
                                  node, SimFaults(f.data_dir, node.name)));
    }
  }
  for (auto& [node, provider] : plan) {
    berth::agent::AgentOptions ao;
    ao.data_dir = std::filesystem::path(f.data_dir) / "agents" / node.name;
    ao.shim_path = f.shim;
    ao.shared_gpus = shared;
    ao.telemetry_interval_ms = s.telemetry_interval_ms;
    // Inside berthd: never cut off from it, and a restarted berthd gives
    // its nodes a fresh lease, so nothing to fence.
    ao.fence_grace_ms = std::nullopt;
    if (!f.podman_conf.empty()) ao.podman_conf = std::filesystem::absolute(f.podman_conf);
    auto channel = d.agent_server->InProcessChannel(grpc::ChannelArguments());
    d.agents.push_back(
        std::make_unique<berth::agent::Agent>(ao, node, std::move(provider), channel, d.clock));
    d.agents.back()->Start();
  }
}

// Identities and tokens; the first start makes the bootstrap admin. Then
// the authorizer, which also takes each run's job token.
berth::Status SetUpAuth(const BerthdFlags& f, const Settings& s, Daemon& d) {
  auto identities = berth::store::IdentityStore::Open(s.state);
  if (!identities) return std::unexpected(identities.error());
  d.identities = std::move(*identities);
  const auto token_file = std::filesystem::path(f.data_dir) / "bootstrap-token";
  auto bootstrapped = berth::server::BootstrapAdmin(*d.identities, token_file, d.clock.NowMs(),
                                                    f.reset_admin_token);
  if (!bootstrapped) return std::unexpected(bootstrapped.error());
  if (*bootstrapped) {
    spdlog::info(
        "created the platform admin '{}'; its token is in {} (readable by this user "
        "only): berth login --token-file {}",
        berth::server::kBootstrapAdmin, token_file.string(), token_file.string());
  }
  d.authorizer.emplace(*d.identities, d.clock);
  // A job token is good while its run is in the store and has not exited.
  d.authorizer->set_job_tokens(
      &*d.job_key,
      [&d](const std::string& run_id) -> Result<std::optional<berth::server::JobRunState>> {
        auto run = d.store->GetRun(run_id);
        if (!run) return std::unexpected(run.error());
        if (!*run) return std::optional<berth::server::JobRunState>();
        auto tenant = d.store->JobTenant((*run)->job_id);
        if (!tenant) return std::unexpected(tenant.error());
        return std::optional<berth::server::JobRunState>(
            berth::server::JobRunState{(*run)->state != berth::model::RunState::kExited, *tenant});
      });
  return {};
}

// The web console's files at /ui/ (no API route is under it); no
// sign-in (they hold no data), GET and HEAD only.
void ServeConsole(const BerthdFlags& f, Daemon& d) {
  d.console.emplace("/ui/", f.ui_dir);
  if (d.console->available()) {
    spdlog::info("web console: /ui/ from {}", f.ui_dir);
  } else {
    spdlog::info("web console: not built ({} has no index.html); /ui/ answers 404", f.ui_dir);
  }
  auto serve = [&d](const berth::http::Request& req, berth::http::Response& res) {
    d.console->Serve(req, res);
  };
  auto to_slash = [](const berth::http::Request&, berth::http::Response& res) {
    berth::http::SetConsoleSecurityHeaders(res);
    res.status = 308;
    res.set_header("Location", "/ui/");
    res.set_content("the console is at /ui/\n", "text/plain; charset=utf-8");
  };
  d.http->Get("/ui", to_slash);
  d.http->Head("/ui", to_slash);
  d.http->Get("/ui/.*", serve);
  d.http->Head("/ui/.*", serve);
}

// The REST API: its HTTP server, rate limiter, authorization and routes,
// bound to --listen.
berth::Status StartApi(const BerthdFlags& f, const Settings& s, Daemon& d) {
  berth::http::ServerOptions http_options = s.http;
  if (!f.plain_http) http_options.tls = berth::http::TlsFiles{d.tls->cert_file, d.tls->key_file};
  const std::size_t max_body_bytes = http_options.max_body_bytes;
  RaiseFileLimit(f.max_connections);
  d.http.emplace(http_options);
  d.limiter.emplace(berth::server::RateLimitConfig{f.rate_limit, f.rate_burst, 10000}, d.clock);
  if (auto st = SetUpAuth(f, s, d); !st) return st;
  d.api.emplace(*d.controller, *d.store, *d.authorizer, d.clock);
  berth::server::Api& api = *d.api;
  api.set_audit(d.audit.get());
  api.set_max_body_bytes(max_body_bytes);
  api.set_report_max_rows(static_cast<std::size_t>(f.report_max_rows));
  api.set_events_recheck_ms(s.events_recheck_ms);
  api.set_version(BERTH_VERSION);
  api.set_max_services_per_tenant(static_cast<std::size_t>(f.max_services_per_tenant));
  if (f.rate_limit > 0) api.set_rate_limiter(&*d.limiter);
  api.set_meter(&*d.meter);
  api.set_alerts(&*d.alert_router);
  api.set_metrics(&d.metrics);
  api.set_http_stats([&d] { return d.http->stats(); });
  if (d.leadership) {
    api.set_leadership([lead = d.leadership.get(), &clock = d.clock] {
      nlohmann::json body = LeaseJson(*lead, clock.NowMs());
      body["role"] = "leader";
      body["leader"] = lead->holder();
      body["term"] = lead->term();
      body["leading_since"] = lead->leading_since();
      return body;
    });
  }
  api.set_telemetry(d.telemetry.get());
  api.set_traffic(d.traffic.get());
  api.set_services(&*d.services);
  // The operations report's measured utilization: the records' runs and the
  // fleet over the report's window.
  api.set_ops_utilization(
      [&d](berth::TimeMs from, berth::TimeMs to,
           std::span<const std::string> run_ids) -> berth::Result<berth::server::OpsUtilization> {
        berth::server::OpsUtilization out;
        auto runs = d.telemetry->RunSummaries(run_ids, from, to);
        if (!runs) return std::unexpected(runs.error());
        out.runs = std::move(*runs);
        auto fleet = d.telemetry->FleetSummary(from, to);
        if (!fleet) return std::unexpected(fleet.error());
        if (fleet->samples > 0) out.fleet = *fleet;
        return out;
      });
  api.Register(*d.http);
  ServeConsole(f, d);
  if (auto bound = d.http->Bind(s.listen.first, static_cast<std::uint16_t>(s.listen.second));
      !bound) {
    return std::unexpected(Invalid(fmt::format("{} (--listen)", bound.error().message)));
  }
  return {};
}

// Serves until SIGINT or SIGTERM, then stops everything in order; running
// jobs keep running.
int Serve(const BerthdFlags& f, const Settings& s, sigset_t& signals, Daemon& d) {
  // Signals are taken by a dedicated thread (blocked since the start), so
  // shutdown runs in normal code.
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {}: shutting down (running jobs keep running)", sig);
    d.http->Stop();
  });

  // Closed telemetry minutes reach berth.db every 5 s, and once more at exit.
  std::mutex flush_mu;
  std::condition_variable flush_cv;
  bool stopping = false;
  std::thread flusher([&] {
    std::unique_lock lock(flush_mu);
    while (!flush_cv.wait_for(lock, std::chrono::seconds(5), [&] { return stopping; })) {
      lock.unlock();
      if (auto st = d.telemetry->Flush(d.clock.NowMs()); !st) {
        spdlog::error("telemetry: flush failed (kept in memory, retried): {}", st.error().message);
      }
      lock.lock();
    }
  });

  spdlog::info("berthd serving the API on {}://{} and agents on {} ({}); state in {}",
               f.plain_http ? "http" : "https", f.listen, f.agent_listen,
               f.plain_agents ? "plain, loopback only" : "mutual TLS",
               s.state.postgres() ? "PostgreSQL (--store)" : f.data_dir);
  if (d.tls) spdlog::info("clients trust {} (berth --ca FILE or BERTH_CA)", d.tls->ca_file);
  d.alert_engine->set_idle_source(berth::server::TelemetryIdleSource(*d.meter_store, *d.telemetry));
  // service_slo rules read the service controller's windows of the gateway's log.
  d.alert_engine->set_slo_source(
      [services = &*d.services](berth::TimeMs now, std::int64_t window_ms) {
        return berth::Result<std::vector<berth::server::ServiceSloFigures>>(
            services->SloFigures(now, window_ms));
      });
  d.alert_engine->Start(std::chrono::milliseconds(s.alert_interval_ms));
  d.alert_deliverer->Start(std::chrono::milliseconds(500));
  d.services->Start(std::chrono::milliseconds(s.service_interval_ms));
  d.http->Start();
  d.http->Wait();
  d.alert_engine->Stop();
  d.alert_deliverer->Stop();
  d.services->Stop();

  for (auto& a : d.agents) a->Stop();
  d.controller->Stop();
  {
    std::lock_guard lock(flush_mu);
    stopping = true;
  }
  flush_cv.notify_all();
  flusher.join();
  // Every minute seen, closed or not: nothing sampled is lost at shutdown.
  if (auto st = d.telemetry->Flush(d.clock.NowMs() + 60'000); !st) {
    spdlog::error("telemetry: final flush failed: {}", st.error().message);
  }
  d.agent_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (waiter.joinable()) {
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
  }
  // Everything of this term has stopped writing: a standby may lead now.
  if (d.leadership) d.leadership->Release();
  return 0;
}

// `berthd migrate --from sqlite:DIR --to postgresql://...`.
int Migrate(const BerthdFlags& f) {
  if (!f.migrate_from.starts_with("sqlite:")) {
    return Fatal(fmt::format("--from '{}': name the data dir as sqlite:DIR", f.migrate_from));
  }
  const std::filesystem::path from = f.migrate_from.substr(std::string_view("sqlite:").size());
  auto to = berth::store::ParseStoreLocation(f.migrate_to, from);
  if (!to) return Fatal(fmt::format("--to: {}", to.error().message));
  if (!to->postgres()) {
    return Fatal("--to: give the PostgreSQL database to move the state into (postgresql://...)");
  }
  berth::SystemClock clock;
  auto report = berth::store::MigrateSqliteToPostgres(from, *to, clock.NowMs(),
                                                      berth::store::TelemetryOptions{});
  if (!report) {
    const std::string& field = report.error().field;
    return Fatal(
        fmt::format("migrate{}: {}", field.empty() ? "" : " --" + field, report.error().message));
  }
  for (const auto& [table, rows] : report->tables) fmt::print("{:<24} {:>10} rows\n", table, rows);
  fmt::print(
      "moved {} rows from {} into PostgreSQL; start berthd with --store and the same "
      "address (keep the data dir: TLS, the job-token key and job logs stay there)\n",
      report->rows, (from / "berth.db").string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "berthd: the Berth control plane.\n\n"
      "Serves the REST API (with its OpenAPI document at /v1/openapi.json), accepts\n"
      "berth-agent streams, keeps state in SQLite under --data-dir and schedules jobs."};
  BerthdFlags flags;
  CLI::App* cert_node_cmd = berth::server::AddBerthdFlags(app, flags);
  CLI::App* migrate_cmd = berth::server::AddMigrateCommand(app, flags);
  CLI11_PARSE(app, argc, argv);
  if (*migrate_cmd) return Migrate(flags);
  if (*cert_node_cmd) {
    berth::SystemClock cert_clock;
    return IssueNodeCredentials(flags.data_dir, flags.cert_node, flags.cert_out,
                                flags.node_cert_ttl, cert_clock.NowMs());
  }
  // SIGINT and SIGTERM are blocked before any thread starts, so every
  // thread inherits the mask and the waiter in Serve takes them: otherwise
  // the kernel may deliver one to a controller or gRPC thread and end
  // berthd without its shutdown (and the final telemetry flush).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto shared = berth::agent::ParseSharedGpus(flags.shared_gpus);
  if (!shared) {
    return Fatal(fmt::format("--shared-gpus '{}': {}", flags.shared_gpus, shared.error().message));
  }
  spdlog::set_level(spdlog::level::from_str(flags.log_level));

  auto settings = CheckFlags(flags);
  if (!settings) return Fatal(settings.error().message);
  Daemon d;
  if (auto st = berth::server::SecureDataDir(flags.data_dir, flags.all_in_one); !st) {
    return Fatal(st.error().message);
  }
  // Certificates before the stores: a --tls-cert that does not load leaves
  // no berth.db behind.
  if (!flags.plain_http || !flags.plain_agents) {
    auto setup = SetUpTls(flags.data_dir, flags.tls_cert, flags.tls_key, flags.tls_client_ca,
                          flags.tls_sans, !flags.plain_agents, d.clock.NowMs());
    if (!setup) return Fatal(setup.error().message);
    d.tls = std::move(*setup);
  }
  // The fault trials' broken control plane (common/failpoint.h): no fence in
  // the database, no stepping down. Never set outside a trial.
  const bool fence_off = berth::FailpointArmed("fence.off");
  if (settings->state.postgres()) {
    auto term = StandBy(flags, *settings, signals, d);
    if (!term) return Fatal(term.error().message);
    if (!*term) return 0;  // a signal while standing by
    // Every connection the stores open writes for this term, and the
    // database's fence refuses them once another berthd takes over.
    if (!fence_off) settings->state.fence_term = **term;
    // With the fence off another berthd may write the jobs at once: each
    // scheduling pass then reads the pending queue whole.
    settings->state.sole_writer = !fence_off;
    settings->state.fence_idle_ms = settings->leadership.ttl.count();
    // A store session that drops (PostgreSQL restarted, a link cut and
    // reset) may leave a transaction in doubt and takes its prepared
    // statements with it: rather than mend each store, this berthd ends
    // its term and comes back as a standby with a fresh view.
    settings->state.on_session_lost = [](const std::string& why) {
      spdlog::critical(
          "the database session was lost ({}): exiting so that this berthd restarts as a standby",
          why);
      spdlog::shutdown();
      std::_Exit(75);
    };
  }
  if (auto st = OpenStores(flags, *settings, d); !st) return Fatal(st.error().message);
  if (d.leadership && fence_off) {
    spdlog::critical(
        "BERTH_FAILPOINTS=fence.off: this berthd installs no write fence and does not step down "
        "when it loses the lease; two of them can both act as leader (a fault trial's broken "
        "control plane, never a deployment)");
    d.leadership->KeepRenewing([](const std::string& why) {
      spdlog::critical("leadership lost ({}): carrying on as leader (fence.off)", why);
    });
  } else if (d.leadership) {
    if (auto st = d.leadership->InstallWriteFence(); !st) return Fatal(st.error().message);
    d.leadership->KeepRenewing([](const std::string& why) {
      // Nothing of this term may go on: not a dispatch, not a reply. The
      // fence already refuses its writes; exiting ends its reads and its
      // streams, and the supervisor starts it again as a standby.
      spdlog::critical("leadership lost ({}): exiting so that this berthd restarts as a standby",
                       why);
      spdlog::shutdown();
      std::_Exit(75);
    });
  }
  if (auto st = SetUpAlerts(flags, d); !st) return Fatal(st.error().message);
  if (auto st = StartGateway(flags, *settings, d); !st) return Fatal(st.error().message);
  if (auto st = StartAgentService(flags, *settings, d); !st) return Fatal(st.error().message);
  if (flags.all_in_one) StartEmbeddedAgents(flags, *settings, *shared, d);
  if (auto st = StartApi(flags, *settings, d); !st) {
    return Fatal(st.error().message);
  }
  return Serve(flags, *settings, signals, d);
}
