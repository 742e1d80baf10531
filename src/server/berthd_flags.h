// berthd's command line: every flag as given, before it is checked
// (berthd_main.cc checks and uses them).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace berth::server {

struct BerthdFlags {
  bool all_in_one = false;
  bool reset_admin_token = false;
  std::string data_dir;
  // Where the state lives: "" is SQLite in data_dir; postgresql://... a
  // PostgreSQL database (store::ParseStoreLocation).
  std::string store;
  // With a PostgreSQL store: how long the leader's lease lasts past its
  // last renewal (store/pg_leadership.h).
  std::string leader_ttl = "3s";
  std::string listen = "127.0.0.1:7460";
  std::string agent_listen = "127.0.0.1:7461";
  std::string simulate;
  std::string lease = "10s";
  std::string heartbeat = "1s";
  std::string grace = "10s";
  std::string lost_grace = "60s";
  // How often waiting jobs' starts are forecast (control/forecaster.h); "0": never.
  std::string forecast_interval = "60s";
  std::string agent_fence_grace;
  std::string telemetry_interval = "10s";
  std::string events_recheck = "30s";
  std::string alert_interval = "2s";
  std::string service_interval = "2s";
  // The service gateway: "" is 127.0.0.1:8480 with --all-in-one and off
  // otherwise; "off" never runs it.
  std::string gateway_listen;
  std::string haproxy = "haproxy";
  std::string shim;
  // The built web console served at /ui/ (console/, docs/console.md).
  std::string ui_dir;
  std::string log_level = "info";
  std::string podman_conf;
  std::string log_limit = "64Mi";
  std::string webhook_secret_dir;
  std::string shared_gpus;
  // The API's limits.
  std::string max_body = "2Mi";
  std::int64_t report_max_rows = 0;
  std::int64_t max_services_per_tenant = 0;
  std::int64_t rate_limit = 50;
  std::int64_t rate_burst = 100;
  std::string io_timeout = "10s";
  std::string max_header = "16Ki";
  std::size_t max_connections = 4096;
  std::size_t max_source_connections = 512;
  int http_workers = 8;
  // TLS.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::vector<std::string> tls_sans;
  std::string api_url;
  bool plain_http = false;
  bool plain_agents = false;
  // How long node certificates live (`berthd cert node` and renewals).
  std::string node_cert_ttl = "7d";
  // Telemetry history and idle allocations.
  std::string telemetry_minutes = "7d";
  std::string telemetry_hours = "400d";
  std::int64_t idle_threshold = 5;
  std::string idle_window = "30m";
  // `berthd migrate --from sqlite:DIR --to postgresql://...`.
  std::string migrate_from;
  std::string migrate_to;
  // `berthd cert node NODE --out DIR`.
  std::string cert_node;
  std::string cert_out;
};

// Declares berthd's flags on `app`, bound to `flags` (which get their
// defaults here), and the `cert node` subcommand, which it returns.
CLI::App* AddBerthdFlags(CLI::App& app, BerthdFlags& flags);
// Declares the `migrate` subcommand, which it returns.
CLI::App* AddMigrateCommand(CLI::App& app, BerthdFlags& flags);

}  // namespace berth::server
