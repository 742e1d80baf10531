#include "server/berthd_flags.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "api/api.h"
#include "common/self_path.h"
#include "common/units.h"
#include "model/fencing.h"

namespace berth::server {
namespace {

std::filesystem::path DefaultDataDir() {
  if (::geteuid() == 0) return "/var/lib/berth";
  const char* home = std::getenv("HOME");  // NOLINT(concurrency-mt-unsafe): before threads start
  return std::filesystem::path(home != nullptr ? home : ".") / ".local/share/berth";
}

std::filesystem::path SiblingBinary(const char* name) {
  auto dir = ExecutableDir();
  return dir ? *dir / name : std::filesystem::path(name);
}

// The data dir, listeners, timings, embedded agents and logs.
void AddCoreFlags(CLI::App& app, BerthdFlags& f) {
  app.add_flag("--all-in-one", f.all_in_one,
               "Also run an agent for this host inside berthd: NVML GPUs where the driver has "
               "any, else --simulate FILE, else the default simulated node (8x H100-80GB)");
  app.add_option("--data-dir", f.data_dir,
                 "Directory for the state database, job logs and embedded agents' run state")
      ->capture_default_str();
  app.add_option(
      "--store", f.store,
      "Where the state lives: left out, SQLite in --data-dir; postgresql://HOST[:PORT]/DB "
      "(or libpq's key=value form) for a PostgreSQL database that several berthd may "
      "share. No password here: put it in a pgpass file (passfile=... or PGPASSFILE)");
  app.add_option("--leader-ttl", f.leader_ttl,
                 "With --store postgresql://: several berthd share the database and one leads; "
                 "a standby takes over this long after the leader's last renewal (renewed "
                 "every quarter of it)")
      ->capture_default_str();
  app.add_option("--listen", f.listen, "HOST:PORT of the REST API (loopback by default)")
      ->capture_default_str();
  app.add_option("--agent-listen", f.agent_listen, "HOST:PORT where berth-agents connect (gRPC)")
      ->capture_default_str();
  app.add_option("--simulate", f.simulate,
                 "Cluster YAML file describing a simulated GPU inventory (docs/inventory.md); "
                 "with --all-in-one, one embedded agent runs per node in the file");
  app.add_option("--lease", f.lease, "A node is NotReady this long after its last heartbeat")
      ->capture_default_str();
  app.add_option("--heartbeat", f.heartbeat, "How often agents heartbeat")->capture_default_str();
  app.add_option("--stop-grace", f.grace, "SIGTERM to SIGKILL grace for cancel and max runtime")
      ->capture_default_str();
  app.add_option("--telemetry-interval", f.telemetry_interval,
                 "With --all-in-one: how often the embedded agents sample every GPU and stream "
                 "the readings; 0: never (berth-agent has the same flag)")
      ->capture_default_str();
  app.add_option("--alert-interval", f.alert_interval,
                 "How often alert rules are evaluated (docs/operations.md, \"Alerts\")")
      ->capture_default_str();
  app.add_option("--service-interval", f.service_interval,
                 "How often each inference service's replicas are reconciled with its spec "
                 "(docs/services.md, \"Replicas\"); a change to a service is acted on at once")
      ->capture_default_str();
  app.add_option("--gateway-listen", f.gateway_listen,
                 "Where inference services are reached (HOST:PORT; each at /s/TENANT/SERVICE/): "
                 "berthd runs HAProxy there as the service gateway (docs/services.md, "
                 "\"Gateway\"). Default 127.0.0.1:8480 with --all-in-one, else off; 'off': none. "
                 "Callers show a Berth token of the service's tenant unless its spec says access: "
                 "public; a routable address publishes the public ones to that network");
  app.add_option("--haproxy", f.haproxy, "The HAProxy (2.6 or later) the gateway runs")
      ->capture_default_str();
  app.add_option("--forecast-interval", f.forecast_interval,
                 "How often berthd forecasts when the waiting jobs start, by running its "
                 "scheduler forward over the declared and predicted ends of what runs (shown by "
                 "`berth why`); 0: never")
      ->capture_default_str();
  app.add_option("--node-lost-grace", f.lost_grace,
                 "After a node's lease lapses, how long its runs may stay unaccounted for before "
                 "they are declared lost and their jobs follow their retry policies; never "
                 "before the node's agent has stopped them itself (--agent-fence-grace)")
      ->capture_default_str();
  app.add_option("--agent-fence-grace", f.agent_fence_grace,
                 "The longest berth-agent --fence-grace in the cluster: a silent node's runs are "
                 "presumed lost only after the lease, this, two stop graces and a margin "
                 "(docs/operations.md, \"Fencing\")")
      ->capture_default_str();
  app.add_option("--podman-conf", f.podman_conf,
                 "With --all-in-one: a containers.conf for the podman of container runs, given "
                 "to it as CONTAINERS_CONF (deploy/podman/containers.conf)")
      ->check(CLI::ExistingFile);
  app.add_option("--shim", f.shim, "Path to berth-shim, the per-job supervisor")
      ->capture_default_str();
  app.add_option("--ui-dir", f.ui_dir,
                 "Directory of the built web console, served at /ui/ (npm run build in "
                 "console/; scripts/start.sh puts it beside berthd)")
      ->capture_default_str();
  app.add_flag("--reset-admin-token", f.reset_admin_token,
               "Give the platform admin 'admin' a new token in <data-dir>/bootstrap-token "
               "(recovery: re-enables it and makes it platform admin)");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn or error")
      ->capture_default_str();
  app.add_option("--log-limit", f.log_limit,
                 "Per-run log size kept (e.g. 64Mi); a longer log keeps its first quarter and its "
                 "latest output, with a marker where bytes were dropped; 0: unlimited")
      ->capture_default_str();
  app.add_option("--webhook-secret-dir", f.webhook_secret_dir,
                 "The only directory alert sinks' secret_file may name a file in (default: "
                 "<data-dir>/secrets, created 0700); a file elsewhere, a .. or a link out of it "
                 "is refused when the rules are applied");
  app.add_option("--shared-gpus", f.shared_gpus,
                 "All-in-one: the embedded agents' GPUs in sharing mode, taking slices of jobs "
                 "with resources.gpu_share: all, or indices such as 0,1 (default: none; with "
                 "--simulate, the file's shared_gpus)");
}

// The REST API's limits (docs/operations.md).
void AddHttpFlags(CLI::App& app, BerthdFlags& f) {
  app.add_option("--max-body", f.max_body,
                 "Largest request body the API reads (e.g. 2Mi); larger ones get 413")
      ->capture_default_str();
  app.add_option("--events-recheck", f.events_recheck,
                 "How often an open GET /v1/events stream checks its caller's token, session and "
                 "memberships again (docs/api.md, Live changes)")
      ->capture_default_str();
  app.add_option("--report-max-rows", f.report_max_rows,
                 "Most stored rows one operations report or usage request reads; a window "
                 "holding more is refused with 400 (docs/operations.md, Read limits)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100'000'000}))
      ->capture_default_str();
  app.add_option("--max-services-per-tenant", f.max_services_per_tenant,
                 "Most inference services one tenant may have; applying one more is refused "
                 "(docs/services.md)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100'000}))
      ->capture_default_str();
  app.add_option("--rate-limit", f.rate_limit,
                 "API requests per second per caller (bearer token id, else source address); "
                 "0: no limit")
      ->capture_default_str();
  app.add_option("--rate-burst", f.rate_burst,
                 "API requests a caller may make at once before --rate-limit applies")
      ->capture_default_str();
  app.add_option("--http-timeout", f.io_timeout,
                 "How long a request may take to arrive whole (and an idle kept-alive "
                 "connection may stay), and how long the API waits on a client that reads "
                 "nothing of an answer")
      ->capture_default_str();
  app.add_option("--max-header-bytes", f.max_header,
                 "Largest request header (request line and fields) the API reads; larger ones "
                 "get 431")
      ->capture_default_str();
  app.add_option("--max-connections", f.max_connections,
                 "Open API connections in all; more are closed as they arrive")
      ->capture_default_str();
  app.add_option("--max-connections-per-source", f.max_source_connections,
                 "Open API connections from one source address; more are closed as they arrive")
      ->capture_default_str();
  app.add_option("--http-workers", f.http_workers,
                 "Threads that run API handlers (reading and writing, and streams waiting "
                 "for data, take none)")
      ->capture_default_str();
}

void AddTlsFlags(CLI::App& app, BerthdFlags& f) {
  app.add_option("--tls-cert", f.tls_cert,
                 "PEM certificate (chain) of the REST API and agent listener (default: "
                 "<data-dir>/tls/server.pem, issued by the data dir's CA at first start)");
  app.add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", f.tls_client_ca,
                 "PEM CA that agents' client certificates must chain to (default: "
                 "<data-dir>/tls/ca.pem)");
  app.add_option("--tls-san", f.tls_sans,
                 "Extra host name or IP address for the generated server certificate, e.g. the "
                 "name agents and users reach berthd by (repeatable)");
  app.add_option("--api-url", f.api_url,
                 "The URL jobs reach the REST API at, given to each run as BERTH_API_URL with "
                 "its job token (default: from --listen, a wildcard address as this host's "
                 "name)");
  app.add_option("--node-cert-ttl", f.node_cert_ttl,
                 "How long node certificates live, from 10s to 366d: what agents renew over "
                 "their stream at 2/3 of it (docs/operations.md, \"TLS and node credentials\")")
      ->capture_default_str();
  app.add_flag("--plain-http", f.plain_http,
               "Serve the REST API over plain HTTP; only with a loopback --listen (dev, tests)");
  app.add_flag("--plain-agents", f.plain_agents,
               "Accept agents without TLS client certificates; only with a loopback "
               "--agent-listen (dev, tests)");
}

void AddTelemetryFlags(CLI::App& app, BerthdFlags& f) {
  app.add_option("--telemetry-minute-retention", f.telemetry_minutes,
                 "How long GPU telemetry is kept in minute buckets before it is rolled up into "
                 "hour buckets (at least 1h)")
      ->capture_default_str();
  app.add_option("--telemetry-hour-retention", f.telemetry_hours,
                 "How long hour buckets of GPU telemetry are kept (at least the minute retention)")
      ->capture_default_str();
  app.add_option("--idle-threshold", f.idle_threshold,
                 "A GPU sample under this utilization (percent, 0-100) counts as idle, for the "
                 "idle share and idle-allocation flags")
      ->capture_default_str();
  app.add_option("--idle-window", f.idle_window,
                 "A usage record is flagged an idle allocation when its GPUs stayed under the idle "
                 "threshold this long (docs/metering.md)")
      ->capture_default_str();
}

}  // namespace

CLI::App* AddBerthdFlags(CLI::App& app, BerthdFlags& f) {
  f.data_dir = DefaultDataDir().string();
  f.agent_fence_grace = FormatDurationMs(model::kDefaultFenceGraceMs);
  f.shim = SiblingBinary("berth-shim").string();
  f.ui_dir = SiblingBinary("ui").string();
  f.report_max_rows = static_cast<std::int64_t>(kDefaultReportMaxRows);
  f.max_services_per_tenant = static_cast<std::int64_t>(kDefaultMaxServicesPerTenant);
  AddCoreFlags(app, f);
  AddHttpFlags(app, f);
  AddTlsFlags(app, f);
  AddTelemetryFlags(app, f);
  auto* cert_cmd = app.add_subcommand("cert", "Issue certificates from the data dir's CA");
  cert_cmd->require_subcommand(1);
  auto* node_cmd = cert_cmd->add_subcommand(
      "node",
      "Write DIR/ca.pem, DIR/NODE.pem and DIR/NODE-key.pem (0600): what berth-agent's "
      "--tls-ca, --tls-cert and --tls-key need to connect as node NODE");
  node_cmd->add_option("NODE", f.cert_node, "the node name the agent registers as")->required();
  node_cmd->add_option("--out", f.cert_out, "directory to write the three files to")->required();
  node_cmd->add_option("--data-dir", f.data_dir, "berthd's data dir, whose tls/ca-key.pem signs")
      ->capture_default_str();
  node_cmd
      ->add_option("--node-cert-ttl", f.node_cert_ttl,
                   "How long the certificate lives (the agent renews it over its stream)")
      ->capture_default_str();
  return node_cmd;
}

CLI::App* AddMigrateCommand(CLI::App& app, BerthdFlags& f) {
  auto* cmd = app.add_subcommand(
      "migrate",
      "Move an installation's state from SQLite to a fresh PostgreSQL database (stop berthd "
      "first), then start berthd with --store pointing there");
  cmd->add_option("--from", f.migrate_from, "sqlite:DIR: the data dir whose berth.db to copy")
      ->required();
  cmd->add_option("--to", f.migrate_to,
                  "postgresql://HOST[:PORT]/DB (no password: a pgpass file, as for --store)")
      ->required();
  return cmd;
}

}  // namespace berth::server
