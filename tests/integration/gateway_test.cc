// Berth's service gateway on a real HAProxy 2.6 in front of real
// berth-model-server replicas over loopback: routing by path prefix to the
// right service and no other, servers joining and draining through the
// runtime API with no reload and no lost request, a route at zero holding
// a request until a server joins, a new Gateway adopting the HAProxy an
// earlier one started, and bad names refused with their field. Latency:
// every request's line reaching the gateway's log socket, percentiles in
// the band the replica's known latency sets, a 503 counted once, and
// counting going on after a new Gateway adopts the HAProxy.
#include "gateway/gateway.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using gateway::Gateway;
using gateway::GatewayOptions;
using gateway::Route;
using gateway::RouteBackend;
using gateway::RouteStats;

// Alive and not a zombie: a daemonized HAProxy is reaped by init, late.
bool GatewayMasterRunning(pid_t pid) {
  if (!ProcessAlive(pid)) return false;
  const std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

constexpr const char* kGatewayCompletion = R"({"prompt":"hello","max_tokens":4})";

class GatewayTest : public IntegrationTest {
 protected:
  void SetUp() override {
    if (std::system("command -v haproxy >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "haproxy is not installed (scripts/install-deps.sh installs it)";
    }
    options_.state_dir = dir_ / "gw";
    options_.bind_port = FreePort();
    options_.drain_timeout_ms = 20'000;
  }

  void TearDown() override {
    if (gw_) (void)gw_->Stop(std::chrono::seconds(2));
    IntegrationTest::TearDown();
  }

  std::unique_ptr<Gateway> StartGateway() {
    auto gw = Gateway::Start(options_);
    EXPECT_TRUE(gw) << gw.error().message << "\n" << ReadFile(options_.state_dir / "haproxy.log");
    return gw ? std::move(*gw) : nullptr;
  }

  // A ready berth-model-server answering with `version`; its port.
  int StartReplica(const std::string& version, std::vector<std::string> args = {}) {
    const int port = FreePort();
    if (std::find(args.begin(), args.end(), "--ttft-ms") == args.end()) {
      args.insert(args.end(), {"--ttft-ms", "2"});
    }
    args.insert(args.end(),
                {"--port", std::to_string(port), "--model-version", version, "--itl-ms", "1"});
    replicas_.push_back(std::make_unique<Process>(BinDir() / "berth-model-server", args,
                                                  dir_ / (version + ".log")));
    Http http(port);
    EXPECT_TRUE(WaitFor([&] { return http.Get("/health").status == 200; }, 10s))
        << ReadFile(dir_ / (version + ".log"));
    return port;
  }

  static Route MakeRoute(const std::string& tenant, const std::string& service,
                         const std::vector<std::pair<std::string, int>>& servers) {
    Route r;
    r.tenant = tenant;
    r.service = service;
    r.hold_timeout_ms = 10'000;
    for (const auto& [id, port] : servers) {
      RouteBackend b;
      b.id = id;
      b.address = "127.0.0.1";
      b.port = port;
      r.backends.push_back(b);
    }
    return r;
  }

  Reply Complete(const std::string& tenant, const std::string& service, Ms timeout = 15s) const {
    return Http(options_.bind_port, timeout)
        .Post(fmt::format("/s/{}/{}/v1/completions", tenant, service), kGatewayCompletion,
              "application/json");
  }

  // Waits until the gateway's log reader has counted `n` lines of routes.
  bool WaitLogged(std::int64_t n, Ms timeout = 10s) {
    return WaitFor([&] { return gw_->RequestLogStats().recorded >= n; }, timeout, 5ms);
  }

  static const gateway::RouteLatency* FindLatency(const std::vector<gateway::RouteLatency>& all,
                                                  const std::string& service) {
    for (const auto& r : all) {
      if (r.service == service) return &r;
    }
    return nullptr;
  }

  const RouteStats* Find(const std::vector<RouteStats>& stats, const std::string& service) {
    for (const auto& r : stats) {
      if (r.service == service) return &r;
    }
    return nullptr;
  }

  // A bounded load loop: `clients` threads each sending completions until
  // `stop` is set (or 2,000 requests each); counts answers that are not 200.
  struct Load {
    std::atomic<bool> stop{false};
    std::atomic<int> ok{0};
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    std::vector<std::string> failures;
    std::mutex mu;
    ~Load() {  // a failed assertion leaves no thread running
      stop = true;
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  };
  void RunLoad(Load& load, const std::string& tenant, const std::string& service, int clients) {
    for (int c = 0; c < clients; ++c) {
      load.threads.emplace_back([this, &load, tenant, service] {
        for (int i = 0; i < 2000 && !load.stop; ++i) {
          Reply r = Complete(tenant, service);
          if (r.status == 200) {
            ++load.ok;
          } else {
            ++load.failed;
            std::lock_guard lock(load.mu);
            load.failures.push_back(fmt::format("{}: {}", r.status, r.text));
          }
        }
      });
    }
  }
  static void StopLoad(Load& load) {
    load.stop = true;
    for (auto& t : load.threads) {
      if (t.joinable()) t.join();
    }
  }

  GatewayOptions options_;
  std::unique_ptr<Gateway> gw_;
  std::vector<std::unique_ptr<Process>> replicas_;
};

TEST_F(GatewayTest, ARequestReachesItsOwnServiceAndNoOther) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  const int coder = StartReplica("coder-v1");
  const int chat = StartReplica("chat-v1");
  const int other_tenant = StartReplica("vision-coder-v1");
  auto report =
      gw_->Sync({MakeRoute("ml", "coder", {{"11", coder}}), MakeRoute("ml", "chat", {{"12", chat}}),
                 MakeRoute("vision", "coder", {{"13", other_tenant}})});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_TRUE(report->reloaded);
  EXPECT_EQ(report->routes_added.size(), 3u);

  for (int i = 0; i < 3; ++i) {
    auto a = Complete("ml", "coder");
    ASSERT_EQ(a.status, 200) << a.text;
    EXPECT_EQ(a.body.at("version"), "coder-v1");
    auto b = Complete("ml", "chat");
    ASSERT_EQ(b.status, 200) << b.text;
    EXPECT_EQ(b.body.at("version"), "chat-v1");
    auto c = Complete("vision", "coder");
    ASSERT_EQ(c.status, 200) << c.text;
    EXPECT_EQ(c.body.at("version"), "vision-coder-v1") << "same service name, other tenant";
  }
  Http http(options_.bind_port);
  // The prefix is stripped: the replica sees /health.
  EXPECT_EQ(http.Get("/s/ml/coder/health").status, 200);
  EXPECT_EQ(http.Get("/s/ml/nothing/health").status, 404);
  EXPECT_EQ(http.Get("/s/ml/coder").status, 404) << "the prefix ends with '/'";
  EXPECT_EQ(http.Get("/v1/completions").status, 404);
  EXPECT_EQ(http.Get("/s/ml/coderx/health").status, 404);

  auto stats = gw_->Stats();
  ASSERT_TRUE(stats) << stats.error().message;
  const RouteStats* s = Find(*stats, "chat");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->tenant, "ml");
  EXPECT_EQ(s->responses_2xx, 3);
  ASSERT_EQ(s->servers.size(), 1u);
  EXPECT_EQ(s->servers[0].id, "12");
  EXPECT_EQ(s->servers[0].state, gateway::ServerState::kReady);
}

TEST_F(GatewayTest, ASecondServerSpreadsLoadWithoutAReload) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  const int a = StartReplica("a");
  const int b = StartReplica("b");
  Route route = MakeRoute("ml", "coder", {{"21", a}});
  route.balance = gateway::Balance::kRoundRobin;
  ASSERT_TRUE(gw_->Sync({route}));
  auto before = gw_->Processes();
  ASSERT_TRUE(before);
  ASSERT_EQ(before->workers.size(), 1u);

  route.backends.push_back(MakeRoute("ml", "coder", {{"22", b}}).backends[0]);
  auto report = gw_->Sync({route});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_FALSE(report->reloaded);
  EXPECT_EQ(report->added, std::vector<std::string>{"ml/coder/22"});
  EXPECT_EQ(report->commands.size(), 2u) << "add server, enable server";

  std::map<std::string, int> by_version;
  for (int i = 0; i < 20; ++i) {
    auto r = Complete("ml", "coder");
    ASSERT_EQ(r.status, 200) << r.text;
    ++by_version[r.body.at("version").get<std::string>()];
  }
  EXPECT_GE(by_version["a"], 5);
  EXPECT_GE(by_version["b"], 5);

  auto after = gw_->Processes();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->master, before->master);
  EXPECT_EQ(after->workers, before->workers) << "the same worker: no reload";
  EXPECT_EQ(after->reloads, before->reloads);

  // The same routes again change nothing.
  auto again = gw_->Sync({route});
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->reloaded);
  EXPECT_TRUE(again->commands.empty());
}

TEST_F(GatewayTest, DrainingAServerUnderLoadLosesNoRequest) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  // Each request takes ~40 ms at the replica, so some are always in flight.
  const int a = StartReplica("a", {"--ttft-ms", "20"});
  const int b = StartReplica("b", {"--ttft-ms", "20"});
  Route both = MakeRoute("ml", "coder", {{"31", a}, {"32", b}});
  ASSERT_TRUE(gw_->Sync({both}));

  Load load;
  RunLoad(load, "ml", "coder", 4);
  ASSERT_TRUE(WaitFor([&] { return load.ok >= 40; }, 10s));

  Route only_a = MakeRoute("ml", "coder", {{"31", a}});
  auto drain = gw_->Sync({only_a});
  ASSERT_TRUE(drain) << drain.error().message;
  EXPECT_EQ(drain->drained, std::vector<std::string>{"ml/coder/32"});
  EXPECT_FALSE(drain->reloaded);
  // Later Syncs delete it once it has no request in flight.
  bool removed = false;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = gw_->Sync({only_a});
        removed = r && r->removed == std::vector<std::string>{"ml/coder/32"};
        return removed;
      },
      10s, 20ms));
  // Only now is it safe to stop the replica; the load goes on without it.
  replicas_[1]->Kill(SIGTERM);
  const int ok_at_removal = load.ok;
  ASSERT_TRUE(WaitFor([&] { return load.ok >= ok_at_removal + 40; }, 10s));
  StopLoad(load);
  EXPECT_EQ(load.failed, 0) << (load.failures.empty() ? "" : load.failures.front());
  EXPECT_GE(load.ok, 80);

  auto stats = gw_->Stats();
  ASSERT_TRUE(stats);
  const RouteStats* s = Find(*stats, "coder");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->servers.size(), 1u);
  EXPECT_EQ(s->servers[0].id, "31");
  EXPECT_EQ(s->responses_5xx, 0);
}

TEST_F(GatewayTest, ChangingTheSetOfRoutesReloadsWithoutLosingARequest) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  const int a = StartReplica("a", {"--ttft-ms", "20"});
  const int b = StartReplica("b");
  Route coder = MakeRoute("ml", "coder", {{"41", a}});
  ASSERT_TRUE(gw_->Sync({coder}));
  auto before = gw_->Processes();
  ASSERT_TRUE(before);

  Load load;
  RunLoad(load, "ml", "coder", 4);
  ASSERT_TRUE(WaitFor([&] { return load.ok >= 20; }, 10s));
  auto report = gw_->Sync({coder, MakeRoute("ml", "chat", {{"42", b}})});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_TRUE(report->reloaded);
  EXPECT_EQ(report->routes_added, std::vector<std::string>{"ml/chat"});
  const int ok_at_reload = load.ok;
  ASSERT_TRUE(WaitFor([&] { return load.ok >= ok_at_reload + 40; }, 10s));
  StopLoad(load);
  EXPECT_EQ(load.failed, 0) << (load.failures.empty() ? "" : load.failures.front());
  EXPECT_EQ(Complete("ml", "chat").status, 200);

  auto after = gw_->Processes();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->master, before->master) << "a reload, not a restart";
  EXPECT_NE(after->workers, before->workers);
  EXPECT_EQ(after->reloads, before->reloads + 1);
  // The server added at run time is in the new configuration too.
  auto stats = gw_->Stats();
  ASSERT_TRUE(stats);
  const RouteStats* s = Find(*stats, "coder");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->servers.size(), 1u);
  EXPECT_EQ(s->servers[0].state, gateway::ServerState::kReady);

  // Removing a route reloads as well and it answers 404.
  auto removal = gw_->Sync({coder});
  ASSERT_TRUE(removal);
  EXPECT_EQ(removal->routes_removed, std::vector<std::string>{"ml/chat"});
  EXPECT_EQ(Complete("ml", "chat").status, 404);
}

TEST_F(GatewayTest, ARouteAtZeroHoldsARequestUntilAServerJoins) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  // The hold is long, so that a loaded machine cannot turn a late join into
  // a 503 at the hold timeout: a 200 from the replica is the proof it joined.
  Route empty = MakeRoute("ml", "coder", {});
  empty.hold_timeout_ms = 60'000;
  ASSERT_TRUE(gw_->Sync({empty}));
  // The replica is up before the request, outside the route: what the test
  // times is the gateway's hold and join, not a process starting.
  const int port = StartReplica("cold");

  const auto sent = std::chrono::steady_clock::now();
  auto pending = std::async(std::launch::async, [&] { return Complete("ml", "coder", 90s); });
  // berthd sees the held request (what starts a replica from zero).
  ASSERT_TRUE(WaitFor(
      [&] {
        auto stats = gw_->Stats();
        const RouteStats* s = stats ? Find(*stats, "coder") : nullptr;
        return s && s->held_now == 1;
      },
      30s))
      << ReadFile(options_.state_dir / "haproxy.log");
  // A cold start takes seconds (a model loads): past HAProxy's default
  // 4 s bound on a Lua action, the request is still held.
  std::this_thread::sleep_for(4500ms);
  EXPECT_EQ(pending.wait_for(0s), std::future_status::timeout) << "answered before any server";
  Route joined = MakeRoute("ml", "coder", {{"51", port}});
  joined.hold_timeout_ms = empty.hold_timeout_ms;
  ASSERT_TRUE(gw_->Sync({joined}));
  const auto synced = std::chrono::steady_clock::now();
  Reply reply = pending.get();
  const auto now = std::chrono::steady_clock::now();
  EXPECT_EQ(reply.status, 200) << reply.text << "\n"
                               << ReadFile(options_.state_dir / "haproxy.log");
  EXPECT_EQ(reply.body.value("version", ""), "cold");
  EXPECT_GE(now - sent, 4500ms);
  EXPECT_LT(now - synced, 30s) << "answered once the server joined, not at the hold timeout";

  auto stats = gw_->Stats();
  ASSERT_TRUE(stats);
  const RouteStats* s = Find(*stats, "coder");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->held_now, 0);
  EXPECT_EQ(s->held_total, 1);
  EXPECT_EQ(s->held_expired, 0);
  EXPECT_EQ(s->responses_2xx, 1);
}

TEST_F(GatewayTest, AHeldRequestIsAnswered503AtItsHoldTimeout) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  Route empty = MakeRoute("ml", "coder", {});
  empty.hold_timeout_ms = 600;
  ASSERT_TRUE(gw_->Sync({empty}));
  const auto sent = std::chrono::steady_clock::now();
  Reply reply = Complete("ml", "coder");
  const auto waited = std::chrono::steady_clock::now() - sent;
  EXPECT_EQ(reply.status, 503);
  EXPECT_GE(waited, 550ms);
  EXPECT_LT(waited, 5s);
  auto stats = gw_->Stats();
  ASSERT_TRUE(stats);
  const RouteStats* s = Find(*stats, "coder");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->held_total, 1);
  EXPECT_EQ(s->held_expired, 1);
  EXPECT_EQ(s->responses_5xx, 1);
}

TEST_F(GatewayTest, ANewGatewayAdoptsTheRunningHaproxy) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  EXPECT_FALSE(gw_->adopted());
  const pid_t master = gw_->master_pid();
  const int a = StartReplica("a");
  const int b = StartReplica("b");
  Route route = MakeRoute("ml", "coder", {{"61", a}});
  ASSERT_TRUE(gw_->Sync({route}));
  auto workers = gw_->Processes();
  ASSERT_TRUE(workers);

  // berthd goes away: its Gateway object with it, HAProxy stays.
  gw_.reset();
  EXPECT_TRUE(ProcessAlive(master));
  EXPECT_EQ(Complete("ml", "coder").status, 200) << "serving while berthd is down";

  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  EXPECT_TRUE(gw_->adopted());
  EXPECT_EQ(gw_->master_pid(), master);
  auto same = gw_->Sync({route});
  ASSERT_TRUE(same) << same.error().message;
  EXPECT_FALSE(same->reloaded) << "the adopted configuration already serves these routes";
  EXPECT_TRUE(same->commands.empty());
  route.backends.push_back(MakeRoute("ml", "coder", {{"62", b}}).backends[0]);
  auto grown = gw_->Sync({route});
  ASSERT_TRUE(grown);
  EXPECT_EQ(grown->added, std::vector<std::string>{"ml/coder/62"});
  auto now = gw_->Processes();
  ASSERT_TRUE(now);
  EXPECT_EQ(now->workers, workers->workers) << "adopted without a restart or reload";
  EXPECT_EQ(Complete("ml", "coder").status, 200);

  // Stop ends it for good; a later Start starts a fresh one.
  ASSERT_TRUE(gw_->Stop(std::chrono::seconds(5)));
  EXPECT_FALSE(GatewayMasterRunning(master));
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  EXPECT_FALSE(gw_->adopted());
  const pid_t second = gw_->master_pid();
  EXPECT_NE(second, master);

  // An HAProxy that died (kill -9) leaves a stale pid file and sockets: the
  // next Start starts a fresh one on the same port rather than failing.
  ASSERT_TRUE(gw_->Sync({route}));
  gw_.reset();
  ASSERT_EQ(::kill(second, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return !GatewayMasterRunning(second); }, 5s));
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  EXPECT_FALSE(gw_->adopted());
  EXPECT_NE(gw_->master_pid(), second);
  ASSERT_TRUE(gw_->Sync({route}));
  EXPECT_EQ(Complete("ml", "coder").status, 200);

  // HAProxy killed under a running Gateway: the next Sync starts it again
  // with the wanted routes and servers.
  const pid_t third = gw_->master_pid();
  ASSERT_EQ(::kill(third, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return !GatewayMasterRunning(third); }, 5s));
  auto restarted = gw_->Sync({route});
  ASSERT_TRUE(restarted) << restarted.error().message;
  EXPECT_TRUE(restarted->restarted);
  EXPECT_EQ(restarted->added, (std::vector<std::string>{"ml/coder/61", "ml/coder/62"}));
  EXPECT_NE(gw_->master_pid(), third);
  EXPECT_EQ(Complete("ml", "coder").status, 200);
  auto calm = gw_->Sync({route});
  ASSERT_TRUE(calm);
  EXPECT_FALSE(calm->restarted);
  EXPECT_TRUE(calm->commands.empty());
}

TEST_F(GatewayTest, ABadNameIsRefusedWithItsFieldAndChangesNothing) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  const int a = StartReplica("a");
  ASSERT_TRUE(gw_->Sync({MakeRoute("ml", "coder", {{"71", a}})}));
  auto before = gw_->Processes();
  ASSERT_TRUE(before);

  auto bad_tenant = gw_->Sync({MakeRoute("ML Team", "coder", {{"71", a}})});
  ASSERT_FALSE(bad_tenant);
  EXPECT_EQ(bad_tenant.error().code, Code::kInvalidArgument);
  EXPECT_EQ(bad_tenant.error().field, "routes[0].tenant");
  Route injected = MakeRoute("ml", "coder", {{"71", a}});
  injected.backends[0].id = "71 backup\nserver x 10.0.0.1:80";
  auto bad_id = gw_->Sync({injected});
  ASSERT_FALSE(bad_id);
  EXPECT_EQ(bad_id.error().field, "routes[0].backends[0].id");
  injected = MakeRoute("ml", "coder", {{"71", a}});
  injected.backends[0].address = "example.com";
  auto bad_address = gw_->Sync({injected});
  ASSERT_FALSE(bad_address);
  EXPECT_EQ(bad_address.error().field, "routes[0].backends[0].address");

  auto after = gw_->Processes();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->reloads, before->reloads);
  EXPECT_EQ(Complete("ml", "coder").status, 200);

  // A state directory that is not ours is refused too.
  GatewayOptions elsewhere = options_;
  elsewhere.state_dir = dir_ / "has space";
  auto refused = Gateway::Start(elsewhere);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().field, "state_dir");
}

TEST_F(GatewayTest, TheStateDirectoryAndSocketsAreOwnerOnly) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  namespace fs = std::filesystem;
  auto mode = [](const fs::path& p) { return fs::status(p).permissions() & fs::perms::all; };
  EXPECT_EQ(mode(options_.state_dir), fs::perms::owner_all);
  EXPECT_EQ(mode(options_.state_dir / "admin.sock"),
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(mode(options_.state_dir / "master.sock"),
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(mode(options_.state_dir / "log.sock"), fs::perms::owner_read | fs::perms::owner_write)
      << "a line written there is a latency the autoscaler believes";
  // Nothing but the frontend listens on TCP: the admin API is not reachable there.
  auto info = gw_->AdminCommand("show info");
  ASSERT_TRUE(info);
  EXPECT_NE(info->find("Name: HAProxy"), std::string::npos);
}

TEST_F(GatewayTest, EachRequestsLatencyIsLoggedForItsRoute) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  // The replica takes 50 ms to the first token, then 1 ms a token (4):
  // about 54 ms a request, alone.
  const int slow = StartReplica("slow", {"--ttft-ms", "50"});
  const int fast = StartReplica("fast");
  ASSERT_TRUE(gw_->Sync(
      {MakeRoute("ml", "coder", {{"81", slow}}), MakeRoute("ml", "chat", {{"82", fast}})}));
  ASSERT_TRUE(gw_->TakeLatency());  // a fresh window

  constexpr int kRequests = 40;
  std::vector<double> client_ms;
  for (int i = 0; i < kRequests; ++i) {
    const auto start = std::chrono::steady_clock::now();
    Reply r = Complete("ml", "coder");
    client_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    ASSERT_EQ(r.status, 200) << r.text;
  }
  for (int i = 0; i < 10; ++i) ASSERT_EQ(Complete("ml", "chat").status, 200);
  Http http(options_.bind_port);
  EXPECT_EQ(http.Get("/s/ml/nothing/x").status, 404);  // the frontend's: no route's
  ASSERT_TRUE(WaitLogged(kRequests + 10)) << gw_->RequestLogStats().recorded;
  // The frontend's 404 comes in its own line; let it arrive before counting.
  ASSERT_TRUE(WaitFor([&] { return gw_->RequestLogStats().no_route >= 1; }, 5s, 5ms));

  auto latency = gw_->TakeLatency();
  ASSERT_TRUE(latency) << latency.error().message;
  const gateway::RouteLatency* coder = FindLatency(*latency, "coder");
  ASSERT_NE(coder, nullptr);
  EXPECT_EQ(coder->tenant, "ml");
  EXPECT_EQ(coder->requests, kRequests);
  EXPECT_EQ(coder->responses_2xx, kRequests);
  EXPECT_EQ(coder->responses_4xx + coder->responses_5xx, 0);
  EXPECT_EQ(coder->held, 0);
  // The band: at least the replica's 50 ms (less the histogram's 4.5%), at
  // most what the client saw (the gateway's time is inside it).
  std::sort(client_ms.begin(), client_ms.end());
  const double client_p50 = client_ms[kRequests / 2 - 1];
  const double client_max = client_ms.back();
  EXPECT_GE(coder->p50_ms, 50 * 0.955);
  EXPECT_LE(coder->p50_ms, client_p50 * 1.045 + 1) << "client p50 " << client_p50;
  EXPECT_GE(coder->p95_ms, coder->p50_ms);
  EXPECT_LE(coder->p95_ms, client_max * 1.045 + 1) << "client max " << client_max;
  EXPECT_LE(coder->p99_ms, client_max * 1.045 + 1);
  const gateway::RouteLatency* chat = FindLatency(*latency, "chat");
  ASSERT_NE(chat, nullptr);
  EXPECT_EQ(chat->requests, 10);
  EXPECT_LT(chat->p50_ms, coder->p50_ms);

  auto counters = gw_->RequestLogStats();
  EXPECT_EQ(counters.unparsed, 0) << counters.last_error;
  EXPECT_EQ(counters.recorded, kRequests + 10);
  auto dropped = gw_->DroppedRequestLogs();
  ASSERT_TRUE(dropped) << dropped.error().message;
  EXPECT_EQ(*dropped, 0);

  // The next window starts empty; the cumulative histogram keeps them all.
  auto next = gw_->TakeLatency();
  ASSERT_TRUE(next);
  ASSERT_NE(FindLatency(*next, "coder"), nullptr);
  EXPECT_EQ(FindLatency(*next, "coder")->requests, 0);
  auto histograms = gw_->LatencyHistograms();
  ASSERT_TRUE(histograms);
  const gateway::RouteLatencyHistogram* h = nullptr;
  for (const auto& x : *histograms) {
    if (x.service == "coder") h = &x;
  }
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->count, kRequests);
  EXPECT_EQ(h->responses_2xx, kRequests);
  ASSERT_EQ(h->buckets.size(), 22u);
  EXPECT_EQ(h->buckets[5].le_ms, 32);
  EXPECT_EQ(h->buckets[5].count, 0) << "none under the replica's 50 ms";
  EXPECT_EQ(h->buckets.back().count, kRequests);

  // A route that leaves the gateway is forgotten.
  ASSERT_TRUE(gw_->Sync({MakeRoute("ml", "chat", {{"82", fast}})}));
  auto after_removal = gw_->TakeLatency();
  ASSERT_TRUE(after_removal);
  EXPECT_EQ(FindLatency(*after_removal, "coder"), nullptr);
}

TEST_F(GatewayTest, AHeldRequestAnswered503IsCountedOnceWithItsHold) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  Route empty = MakeRoute("ml", "coder", {});
  empty.hold_timeout_ms = 300;
  ASSERT_TRUE(gw_->Sync({empty}));
  EXPECT_EQ(Complete("ml", "coder").status, 503);
  ASSERT_TRUE(WaitLogged(1));
  auto latency = gw_->TakeLatency();
  ASSERT_TRUE(latency) << latency.error().message;
  const gateway::RouteLatency* coder = FindLatency(*latency, "coder");
  ASSERT_NE(coder, nullptr);
  EXPECT_EQ(coder->requests, 1);
  EXPECT_EQ(coder->responses_5xx, 1);
  EXPECT_EQ(coder->responses_2xx, 0);
  EXPECT_EQ(coder->held, 1);
  EXPECT_GE(coder->p50_ms, 300 * 0.955) << "the hold is part of the request's latency";
  EXPECT_LT(coder->p50_ms, 5000);
  EXPECT_EQ(gw_->RequestLogStats().recorded, 1);
}

TEST_F(GatewayTest, AGatewayAdoptingHaproxyGoesOnCountingRequests) {
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  const int a = StartReplica("a");
  Route route = MakeRoute("ml", "coder", {{"91", a}});
  ASSERT_TRUE(gw_->Sync({route}));
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Complete("ml", "coder").status, 200);
  ASSERT_TRUE(WaitLogged(5));
  auto workers = gw_->Processes();
  ASSERT_TRUE(workers);

  // berthd goes away; requests go on being served, their lines reach no one.
  gw_.reset();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Complete("ml", "coder").status, 200);
  // HAProxy sends a request's line as the request ends, which may be just
  // after its client has the answer: let the last one go (and be lost)
  // before the path is bound again.
  std::this_thread::sleep_for(300ms);

  // A new Gateway binds log.sock again before adopting: HAProxy sends each
  // line to the path, so the next requests reach the new reader.
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  ASSERT_TRUE(gw_->adopted());
  constexpr int kAfter = 7;
  for (int i = 0; i < kAfter; ++i) ASSERT_EQ(Complete("ml", "coder").status, 200);
  ASSERT_TRUE(WaitLogged(kAfter)) << gw_->RequestLogStats().recorded;
  auto now = gw_->Processes();
  ASSERT_TRUE(now);
  EXPECT_EQ(now->workers, workers->workers) << "the same worker: no reload, no restart";
  auto latency = gw_->TakeLatency();
  ASSERT_TRUE(latency) << latency.error().message;
  const gateway::RouteLatency* coder = FindLatency(*latency, "coder");
  ASSERT_NE(coder, nullptr);
  EXPECT_EQ(coder->requests, kAfter) << "counted from the adoption on; lines sent while no one "
                                        "was bound are lost";
  EXPECT_EQ(coder->responses_2xx, kAfter);
  EXPECT_EQ(gw_->RequestLogStats().unparsed, 0);
}

TEST_F(GatewayTest, AnotherUserCannotWriteToTheLogSocket) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a probe as another user";
  gw_ = StartGateway();
  ASSERT_TRUE(gw_);
  const std::string path = (options_.state_dir / "log.sock").string();
  const std::string fake = "berth1 ml:coder 1 200 0 0 0 1 1 1 1 1 -- -";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // A job runs as its tenant's identity: here, nobody (65534). The child
  // only makes system calls (the parent has threads).
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    const auto n =
        sendto(fd, fake.data(), fake.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    _exit(n < 0 && errno == EACCES ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "another user's datagram was not refused";
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(gw_->RequestLogStats().datagrams, 0);
}

}  // namespace
}  // namespace berth::it
