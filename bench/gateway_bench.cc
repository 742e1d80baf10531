// berth-gateway-bench: what Berth's gateway (HAProxy, src/gateway/) adds to
// a request's latency on loopback. It starts one berth-model-server
// answering at once (no token time), a Gateway on a temp dir with one route
// to it, and sends the same small completion request directly to the
// replica and through the gateway, interleaved one by one so that both
// see the same machine. Printed: p50, p90, p99 and max of each, and what
// the gateway adds at each percentile (issue 19's target: <= 1 ms at p99).
// Every request through the gateway is logged to Berth's collector (as in
// production); the gateway's own p50/p99 (HAProxy's Ta, whole ms) and the
// lines HAProxy dropped are printed beside the client's figures.
//
// With --auth the route checks its callers as a service with `access:
// tenant` does (docs/services.md, "Who may call a service"): the gateway asks
// a stand-in for berthd's access route, served on loopback by this program,
// and keeps the verdict, so the figures are the cached check's cost; the
// number of checks the stand-in answered is printed.
//
// Two client modes, both printed unless --mode picks one:
//   keepalive  one persistent connection per path (the usual client)
//   new        a new TCP connection per request
#include <fmt/format.h>
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway/gateway.h"
#include "integration/harness.h"

namespace {

using namespace berth::it;
using SteadyClock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

struct Samples {
  std::vector<double> direct_ms;
  std::vector<double> gateway_ms;
  int errors = 0;
};

constexpr const char* kBody = R"({"prompt":"hi","max_tokens":1})";

// One request; its latency in ms, or a negative number when it failed.
double Timed(httplib::Client& client, const std::string& path) {
  const auto start = SteadyClock::now();
  auto res = client.Post(path, kBody, "application/json");
  const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
  return res && res->status == 200 ? ms : -1;
}

Samples Measure(int replica_port, int gateway_port, int requests, int warmup, bool keepalive,
                const std::function<void()>& after_warmup) {
  Samples s;
  auto make = [&](int port) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
    c->set_bearer_token_auth("bench-token");  // read only where the route checks callers
    c->set_keep_alive(keepalive);
    c->set_tcp_nodelay(true);  // else headers and body wait on delayed ACKs (40 ms)
    c->set_read_timeout(10, 0);
    return c;
  };
  auto direct = make(replica_port);
  auto via = make(gateway_port);
  for (int i = 0; i < warmup + requests; ++i) {
    if (i == warmup) after_warmup();
    if (!keepalive) {
      direct = make(replica_port);
      via = make(gateway_port);
    }
    const double d = Timed(*direct, "/v1/completions");
    const double g = Timed(*via, "/s/bench/echo/v1/completions");
    if (d < 0 || g < 0) {
      ++s.errors;
      continue;
    }
    if (i < warmup) continue;
    s.direct_ms.push_back(d);
    s.gateway_ms.push_back(g);
  }
  return s;
}

void Print(const std::string& mode, const Samples& s) {
  auto row = [](const std::string& name, const std::vector<double>& v) {
    fmt::print("  {:<8} p50 {:7.3f} ms  p90 {:7.3f} ms  p99 {:7.3f} ms  max {:7.3f} ms\n", name,
               Percentile(v, 0.50), Percentile(v, 0.90), Percentile(v, 0.99), Percentile(v, 1.0));
  };
  fmt::print("{} ({} requests each way, {} failed):\n", mode, s.direct_ms.size(), s.errors);
  row("direct", s.direct_ms);
  row("gateway", s.gateway_ms);
  const double add50 = Percentile(s.gateway_ms, 0.50) - Percentile(s.direct_ms, 0.50);
  const double add90 = Percentile(s.gateway_ms, 0.90) - Percentile(s.direct_ms, 0.90);
  const double add99 = Percentile(s.gateway_ms, 0.99) - Percentile(s.direct_ms, 0.99);
  fmt::print(
      "  added    p50 {:+7.3f} ms  p90 {:+7.3f} ms  p99 {:+7.3f} ms  (target p99 <= 1 ms: {})\n",
      add50, add90, add99, add99 <= 1.0 ? "met" : "NOT met");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-gateway-bench: latency added by Berth's HAProxy gateway on loopback"};
  int requests = 5000;
  int warmup = 500;
  std::string mode = "both";
  std::string haproxy = "haproxy";
  int threads = 0;
  bool auth = false;
  app.add_flag("--auth", auth,
               "check callers as access: tenant does, against a loopback stand-in for "
               "berthd's access route (the verdict is kept, as in production)");
  app.add_option("--requests", requests, "measured requests each way")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", warmup, "requests each way before measuring")
      ->check(CLI::Range(0, 100000));
  app.add_option("--mode", mode, "keepalive, new or both")
      ->check(CLI::IsMember({"keepalive", "new", "both"}));
  app.add_option("--haproxy", haproxy, "the haproxy binary");
  app.add_option("--threads", threads, "HAProxy's threads (0: one per CPU)")
      ->check(CLI::Range(0, 64));
  CLI11_PARSE(app, argc, argv);

  TempDir dir("berth-gateway-bench");
  const int replica_port = FreePort();
  Process replica(BinDir() / "berth-model-server",
                  {"--port", std::to_string(replica_port), "--ttft-ms", "0", "--itl-ms", "0",
                   "--max-batch", "64"},
                  dir / "replica.log");
  Http health(replica_port);
  if (!WaitFor([&] { return health.Get("/health").status == 200; }, 10s)) {
    std::cerr << "the model server did not come up:\n" << ReadFile(dir / "replica.log");
    dir.keep();
    return 1;
  }

  berth::gateway::GatewayOptions options;
  options.state_dir = dir / "gw";
  options.bind_port = FreePort();
  options.haproxy_binary = haproxy;
  options.threads = threads;
  auto gw = berth::gateway::Gateway::Start(options);
  if (!gw) {
    std::cerr << "the gateway did not start: " << gw.error().message << "\n";
    dir.keep();
    return 1;
  }
  // The stand-in for berthd's GET /v1/services/{tenant}/{name}/access.
  httplib::Server checker;
  std::atomic<int> checks{0};
  std::thread checker_thread;
  const int checker_port = FreePort();
  if (auth) {
    checker.Get("/access", [&](const httplib::Request& req, httplib::Response& res) {
      ++checks;
      if (req.get_header_value("Authorization") != "Bearer bench-token") {
        res.status = 401;
        return;
      }
      res.set_header("X-Berth-User", "bench");
      res.set_content(R"({"user":"bench"})", "application/json");
    });
    checker_thread = std::thread([&] { checker.listen("127.0.0.1", checker_port); });
    WaitFor([&] { return checker.is_running(); }, 5s);
  }
  berth::gateway::Route route;
  route.tenant = "bench";
  route.service = "echo";
  if (auth) {
    route.auth_url = fmt::format("http://localhost:{}/access", checker_port);
    route.auth_address = fmt::format("127.0.0.1:{}", checker_port);
  }
  route.backends.push_back(
      {.id = "1", .address = "127.0.0.1", .port = replica_port, .weight = 100, .draining = false});
  if (auto r = (*gw)->Sync({route}); !r) {
    std::cerr << "sync failed: " << r.error().message << "\n";
    (void)(*gw)->Stop();
    return 1;
  }

  fmt::print(
      "berth-gateway-bench: one client, small completion (max_tokens 1, no token time),\n"
      "direct to berth-model-server vs through the gateway (HAProxy), interleaved{}\n",
      auth ? ";\ncallers checked (access: tenant), the verdict kept as in production" : "");
  int status = 0;
  std::int64_t logged_before = 0;
  for (const bool keepalive : {true, false}) {
    if (mode == "keepalive" && !keepalive) continue;
    if (mode == "new" && keepalive) continue;
    auto& g = **gw;
    Samples s = Measure(replica_port, options.bind_port, requests, warmup, keepalive,
                        [&] { (void)g.TakeLatency(); });
    Print(keepalive ? "keep-alive connections" : "a new connection per request", s);
    if (s.errors > 0) status = 1;
    // One line per request through the gateway; the last ones arrive a
    // moment after the last answer (or never, if HAProxy dropped them).
    const std::int64_t want = logged_before + warmup + requests;
    WaitFor([&] { return g.RequestLogStats().datagrams >= want; }, 2s, 5ms);
    logged_before = g.RequestLogStats().datagrams;
    auto latency = g.TakeLatency();
    auto dropped = g.DroppedRequestLogs();
    if (latency && !latency->empty()) {
      const auto& l = latency->front();
      fmt::print(
          "  logged   p50 {:7.3f} ms  p95 {:7.3f} ms  p99 {:7.3f} ms  max {:7d} ms  "
          "({} requests in the window; lines dropped by HAProxy so far {}, unparsed {})\n",
          l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms, l.requests, dropped ? *dropped : -1,
          g.RequestLogStats().unparsed);
    }
  }
  if (auth) {
    fmt::print("callers' checks answered by the stand-in for berthd: {}\n", checks.load());
    checker.stop();
    checker_thread.join();
  }
  (void)(*gw)->Stop(std::chrono::seconds(2));
  return status;
}
