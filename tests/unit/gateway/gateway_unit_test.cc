// The gateway's pure parts: validating routes (every error names its
// field), rendering HAProxy's configuration (and HAProxy accepting it),
// parsing `show stat`, `show berth-held` and `show proc` as captured from
// HAProxy 2.6, and planning runtime-API commands from wanted and live state.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gateway/config.h"
#include "gateway/gateway.h"
#include "gateway/plan.h"
#include "gateway/request_log.h"
#include "gateway/route.h"
#include "gateway/stats.h"

namespace berth::gateway {
namespace {

std::string TestData(const std::string& name) {
  std::ifstream in(std::string(BERTH_GATEWAY_TESTDATA) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Route CoderRoute() {
  Route r;
  r.tenant = "ml";
  r.service = "coder";
  r.hold_timeout_ms = 5000;
  r.max_conn_per_backend = 8;
  r.backends = {{.id = "101", .address = "127.0.0.1", .port = 9001, .weight = 100},
                {.id = "102", .address = "::1", .port = 9002, .weight = 50, .draining = true}};
  return r;
}

GatewayOptions Options() {
  GatewayOptions o;
  o.state_dir = "/var/lib/berth/gateway";
  o.bind_port = 8480;
  return o;
}

// --- validation ---

std::string FieldOf(const std::vector<Route>& routes) {
  auto s = ValidateRoutes(routes);
  return s ? "" : s.error().field;
}

TEST(GatewayRoutes, AValidRouteSetPasses) {
  EXPECT_TRUE(ValidateRoutes({CoderRoute()}));
  EXPECT_TRUE(ValidateRoutes({}));
}

TEST(GatewayRoutes, EveryBadValueIsRefusedWithItsField) {
  auto with = [](auto change) {
    Route r = CoderRoute();
    change(r);
    return std::vector<Route>{CoderRoute(), r};
  };
  // The second route repeats the first unless renamed; rename it first.
  auto renamed = [&](auto change) {
    return with([&](Route& r) {
      r.service = "other";
      change(r);
    });
  };
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.tenant = "ML"; })), "routes[1].tenant");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.tenant = "a b"; })), "routes[1].tenant");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.service = "x\nserver evil 1.2.3.4:80"; })),
            "routes[1].service");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.service = "a:b"; })), "routes[1].service");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.service = std::string(64, 'a'); })),
            "routes[1].service");
  EXPECT_EQ(FieldOf(with([](Route&) {})), "routes[1].service") << "a second route for ml/coder";
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.hold_timeout_ms = -1; })),
            "routes[1].hold_timeout_ms");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.max_conn_per_backend = -3; })),
            "routes[1].max_conn_per_backend");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.backends[1].id = "j/1"; })),
            "routes[1].backends[1].id");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.backends[1].id = "101"; })),
            "routes[1].backends[1].id")
      << "two backends of one route with one id";
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.backends[0].address = "localhost"; })),
            "routes[1].backends[0].address");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.backends[0].address = "127.0.0.1 backup"; })),
            "routes[1].backends[0].address");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.backends[0].port = 0; })),
            "routes[1].backends[0].port");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.backends[0].port = 65536; })),
            "routes[1].backends[0].port");
  EXPECT_EQ(FieldOf(renamed([](Route& r) { r.backends[0].weight = 257; })),
            "routes[1].backends[0].weight");
}

TEST(GatewayRoutes, OptionsAreCheckedToo) {
  auto field = [](auto change) {
    GatewayOptions o = Options();
    change(o);
    auto s = ValidateOptions(o);
    return s ? "" : s.error().field;
  };
  EXPECT_EQ(field([](GatewayOptions&) {}), "");
  EXPECT_EQ(field([](GatewayOptions& o) { o.state_dir = "relative"; }), "state_dir");
  EXPECT_EQ(field([](GatewayOptions& o) { o.state_dir = "/tmp/a b"; }), "state_dir");
  EXPECT_EQ(field([](GatewayOptions& o) { o.bind_address = "0.0.0.0:80"; }), "bind_address");
  EXPECT_EQ(field([](GatewayOptions& o) { o.bind_port = 0; }), "bind_port");
  EXPECT_EQ(field([](GatewayOptions& o) { o.request_timeout_ms = 0; }), "request_timeout_ms");
  EXPECT_EQ(field([](GatewayOptions& o) { o.threads = -1; }), "threads");
}

// --- rendering ---

TEST(GatewayConfig, RendersOneBackendPerRouteWithItsServers) {
  const std::string cfg = RenderConfig(Options(), {CoderRoute()});
  EXPECT_NE(cfg.find("  master-worker\n"), std::string::npos);
  EXPECT_NE(cfg.find("stats socket /var/lib/berth/gateway/admin.sock mode 600 level admin"),
            std::string::npos)
      << "the runtime API is a unix socket in the state dir, never TCP";
  EXPECT_EQ(cfg.find("stats socket ipv4"), std::string::npos);
  EXPECT_NE(cfg.find("  bind 127.0.0.1:8480\n"), std::string::npos);
  EXPECT_EQ(cfg.find("nbthread"), std::string::npos) << "HAProxy's default unless set";
  GatewayOptions one_thread = Options();
  one_thread.threads = 1;
  EXPECT_NE(RenderConfig(one_thread, {}).find("  nbthread 1\n  maxconn 4096\n"), std::string::npos);
  EXPECT_NE(cfg.find("\nbackend ml:coder\n  balance leastconn\n  timeout queue 5000ms\n"
                     "  http-request lua.berth_hold 5000\n"
                     "  http-request set-path %[path,bytes(11)]\n"),
            std::string::npos)
      << cfg;
  EXPECT_NE(cfg.find("  server 101 127.0.0.1:9001 weight 100 maxconn 8\n"), std::string::npos);
  EXPECT_NE(cfg.find("  server 102 [::1]:9002 weight 50 maxconn 8 disabled\n"), std::string::npos)
      << "a draining server is kept, in maintenance";
  EXPECT_EQ(RenderRouteMap({CoderRoute()}), "/s/ml/coder/ ml:coder\n");
  EXPECT_EQ(RoutePrefix(CoderRoute()).size() - 1, 11u) << "'/s/ml/coder' is stripped";
}

TEST(GatewayConfig, EachRequestIsLoggedToTheStateDirsLogSocketInBerthsFormat) {
  const std::string cfg = RenderConfig(Options(), {CoderRoute()});
  const auto defaults = cfg.find("\ndefaults\n");
  const auto frontend = cfg.find("\nfrontend berth\n");
  ASSERT_NE(defaults, std::string::npos);
  ASSERT_NE(frontend, std::string::npos);
  const std::string log_line = "  log /var/lib/berth/gateway/log.sock format raw local0 info\n";
  const auto log_at = cfg.find(log_line);
  ASSERT_NE(log_at, std::string::npos) << cfg;
  EXPECT_GT(log_at, frontend) << "in the frontend: it logs each request";
  EXPECT_EQ(cfg.find("  log "), log_at)
      << "one log target, none in global, defaults or a backend: HAProxy's own messages "
         "about servers and backends go nowhere";
  EXPECT_EQ(cfg.find("  log ", log_at + 1), std::string::npos);
  EXPECT_NE(cfg.find(fmt::format("  log-format \"{}\"\n", kRequestLogFormat)), std::string::npos);
  EXPECT_NE(cfg.find("  option dontlognull\n"), std::string::npos);
  EXPECT_NE(HoldLua().find("txn:set_var(\"txn.berth_held_ms\""), std::string::npos)
      << "a held request's line says how long it was held";
  // The log format is part of the shape: an HAProxy rendered without it
  // (or with an older format) is reloaded by the first Sync.
  EXPECT_NE(ConfigShape(Options(), {}).find(" log=berth1"), std::string::npos);
}

TEST(GatewayConfig, ARouteWithoutHoldHasNoHoldAction) {
  Route r = CoderRoute();
  r.hold_timeout_ms = 0;
  r.balance = Balance::kRoundRobin;
  const std::string cfg = RenderConfig(Options(), {r});
  EXPECT_EQ(cfg.find("lua.berth_hold"), std::string::npos);
  EXPECT_NE(cfg.find("balance roundrobin"), std::string::npos);
}

TEST(GatewayConfig, TheShapeChangesWithRoutesAndSettingsButNotWithServers) {
  const std::string shape = ConfigShape(Options(), {CoderRoute()});
  Route more_servers = CoderRoute();
  more_servers.backends.push_back({.id = "103", .address = "127.0.0.1", .port = 9003});
  more_servers.backends[0].weight = 7;
  EXPECT_EQ(ConfigShape(Options(), {more_servers}), shape);
  Route longer_hold = CoderRoute();
  longer_hold.hold_timeout_ms = 6000;
  EXPECT_NE(ConfigShape(Options(), {longer_hold}), shape);
  Route other = CoderRoute();
  other.service = "chat";
  EXPECT_NE(ConfigShape(Options(), {CoderRoute(), other}), shape);
  GatewayOptions moved = Options();
  moved.bind_port = 8481;
  EXPECT_NE(ConfigShape(moved, {CoderRoute()}), shape);
  // Read back from the rendered file, in any route order.
  EXPECT_EQ(ParseConfigShape(RenderConfig(Options(), {other, CoderRoute()})),
            ConfigShape(Options(), {CoderRoute(), other}));
}

// A route with callers checked: the check is in the frontend, before any
// backend counts the request (so a refused request is in no service's
// figures and never wakes one held at zero); each refusal is answered with
// berthd's status, and the replica gets the caller's name but not the token.
TEST(GatewayConfig, ARouteWithAuthChecksTheCallerBeforeItsBackendAndKeepsTheTokenFromTheReplica) {
  Route r = CoderRoute();
  r.auth_url = "https://localhost:7460/v1/services/ml/coder/access";
  r.auth_address = "127.0.0.1:7460";
  GatewayOptions o = Options();
  o.auth_ca_file = "/var/lib/berth/pki/ca.pem";
  const std::string cfg = RenderConfig(o, {r});
  const auto at = [&](const std::string& line) { return cfg.find(line); };
  const auto strip_user = at("  http-request del-header X-Berth-User\n");
  const auto lookup =
      at("  http-request set-var(txn.berth_check) path,map_beg(/var/lib/berth/gateway/auth.map)\n");
  const auto check = at("  http-request lua.berth_auth if { var(txn.berth_check) -m found }\n");
  const auto refuse = at("  http-request return status 401 ");
  const auto strip_token =
      at("  http-request del-header Authorization if { var(txn.berth_check) -m found }\n");
  const auto name = at("  http-request set-header X-Berth-User %[var(txn.berth_user)] if ");
  const auto route = at("  use_backend ");
  const auto backend = at("\nbackend ml:coder\n");
  const auto hold = at("  http-request lua.berth_hold 5000\n");
  for (auto pos : {strip_user, lookup, check, refuse, strip_token, name, route, backend, hold}) {
    ASSERT_NE(pos, std::string::npos) << cfg;
  }
  EXPECT_LT(strip_user, lookup);
  EXPECT_LT(lookup, check);
  EXPECT_LT(check, refuse);
  EXPECT_LT(refuse, strip_token);
  EXPECT_LT(strip_token, name);
  EXPECT_LT(name, route);
  EXPECT_LT(route, backend);
  EXPECT_LT(backend, hold);
  for (int code : {401, 403, 404, 429, 503}) {
    EXPECT_NE(cfg.find(fmt::format("return status {} content-type text/plain string", code)),
              std::string::npos)
        << code;
    EXPECT_NE(cfg.find(fmt::format("if {{ var(txn.berth_auth) -m str {} }}", code)),
              std::string::npos)
        << code;
  }
  EXPECT_NE(cfg.find("WWW-Authenticate"), std::string::npos);
  EXPECT_NE(cfg.find("  httpclient.ssl.ca-file /var/lib/berth/pki/ca.pem\n"), std::string::npos);
  EXPECT_NE(cfg.find("  httpclient.ssl.verify required\n"), std::string::npos);
  // The route's check target, and none for a public route.
  EXPECT_EQ(RenderAuthMap({r, CoderRoute()}),
            "/s/ml/coder/ https://localhost:7460/v1/services/ml/coder/access|127.0.0.1:7460\n");
  EXPECT_EQ(RenderAuthMap({CoderRoute()}), "");
  // The Lua carries the verdicts' lifetimes from route.h, nothing left to fill.
  const std::string lua = HoldLua();
  EXPECT_NE(lua.find("core.register_action(\"berth_auth\""), std::string::npos);
  EXPECT_NE(
      lua.find(fmt::format("verdict == \"ok\" and {} or {}", kAuthAllowSeconds, kAuthDenySeconds)),
      std::string::npos)
      << lua;
  EXPECT_EQ(lua.find('@'), std::string::npos) << lua;

  // Checking callers, or where, changes the shape: the next Sync reloads.
  EXPECT_NE(ConfigShape(Options(), {r}), ConfigShape(Options(), {CoderRoute()}));
  EXPECT_NE(ConfigShape(o, {r}), ConfigShape(Options(), {r}));
  // Bad URLs, addresses and CA paths are refused with their field.
  for (const char* bad : {"ftp://x/y", "https://", "https://h/a b", "https://h/\"x",
                          "https://h/%[var(x)]", "//h/a", "https://h/a|b"}) {
    Route b = r;
    b.auth_url = bad;
    EXPECT_EQ(FieldOf({b}), "routes[0].auth_url") << bad;
  }
  for (const char* bad : {"", "127.0.0.1", "localhost:7460", "::1:7460", "127.0.0.1:0",
                          "127.0.0.1:70000", "[127.0.0.1]:7460", "127.0.0.1:74x"}) {
    Route b = r;
    b.auth_address = bad;
    EXPECT_EQ(FieldOf({b}), "routes[0].auth_address") << bad;
  }
  Route v6 = r;
  v6.auth_address = "[::1]:7460";
  EXPECT_TRUE(ValidateRoutes({v6}));
  Route moved = r;
  moved.auth_address = "127.0.0.2:7460";
  EXPECT_NE(ConfigShape(Options(), {moved}), ConfigShape(Options(), {r}));
  GatewayOptions relative = Options();
  relative.auth_ca_file = "pki/ca.pem";
  ASSERT_FALSE(ValidateOptions(relative));
  EXPECT_EQ(ValidateOptions(relative).error().field, "auth_ca_file");
}

// HAProxy itself accepts what Berth renders (skipped where it is not installed).
TEST(GatewayConfig, HaproxyAcceptsTheRenderedConfiguration) {
  if (std::system("command -v haproxy >/dev/null 2>&1") != 0) GTEST_SKIP() << "no haproxy";
  char tmpl[] = "/tmp/berth-gw-unit-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  GatewayOptions o = Options();
  o.state_dir = tmpl;
  Route other = CoderRoute();
  other.service = "chat.v2";
  other.hold_timeout_ms = 0;
  other.max_conn_per_backend = 0;
  other.auth_url = "https://localhost:7460/v1/services/ml/chat.v2/access";
  other.auth_address = "[::1]:7460";
  o.auth_ca_file = "/etc/ssl/certs/ca-certificates.crt";
  auto write = [&](const char* name, const std::string& text) {
    std::ofstream(o.state_dir / name) << text;
  };
  write(kConfigFile, RenderConfig(o, {CoderRoute(), other}));
  write(kMapFile, RenderRouteMap({CoderRoute(), other}));
  write(kAuthMapFile, RenderAuthMap({CoderRoute(), other}));
  write(kLuaFile, HoldLua());
  const std::string cmd = "haproxy -c -q -f " + (o.state_dir / kConfigFile).string() + " > " +
                          (o.state_dir / "check.log").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log(o.state_dir / "check.log");
  std::stringstream ss;
  ss << log.rdbuf();
  EXPECT_EQ(rc, 0) << ss.str() << RenderConfig(o, {CoderRoute(), other});
  std::filesystem::remove_all(o.state_dir);
}

// --- stats ---

TEST(GatewayStats, ParsesCapturedShowStat) {
  // Captured from HAProxy 2.6.12: route ten:svc with server 101 ready (3
  // requests answered), 102 drained, 103 added but not enabled (IPv6), and
  // one request that was held and answered 503.
  auto routes = ParseShowStat(TestData("show_stat.csv"));
  ASSERT_TRUE(routes) << routes.error().message;
  ASSERT_EQ(routes->size(), 1u) << "the frontend is not a route";
  const RouteStats& r = routes->front();
  EXPECT_EQ(r.tenant, "ten");
  EXPECT_EQ(r.service, "svc");
  EXPECT_EQ(r.total, 4);
  EXPECT_EQ(r.responses_2xx, 3);
  EXPECT_EQ(r.responses_5xx, 1);
  EXPECT_EQ(r.current, 0);
  EXPECT_EQ(r.avg_response_ms, 3);
  EXPECT_EQ(r.avg_total_ms, 4);
  ASSERT_EQ(r.servers.size(), 3u);
  EXPECT_EQ(r.servers[0].id, "101");
  EXPECT_EQ(r.servers[0].state, ServerState::kReady);
  EXPECT_EQ(r.servers[0].address, "127.0.0.1");
  EXPECT_EQ(r.servers[0].port, 18181);
  EXPECT_EQ(r.servers[0].weight, 100);
  EXPECT_EQ(r.servers[0].total, 3);
  EXPECT_EQ(r.servers[0].max_conn, 8);
  EXPECT_EQ(r.servers[1].state, ServerState::kDrain);
  EXPECT_EQ(r.servers[1].weight, 50);
  EXPECT_EQ(r.servers[2].state, ServerState::kMaint);
  EXPECT_EQ(r.servers[2].address, "::1");
  EXPECT_EQ(r.servers[2].port, 18183);
  EXPECT_EQ(r.servers[2].weight, 100) << "the weight Berth set, not the one shown in MAINT";
  EXPECT_EQ(r.ready_servers(), 1);
}

TEST(GatewayStats, ColumnsAreFoundByNameAndBadNumbersNamed) {
  auto routes = ParseShowStat(
      "# svname,pxname,scur,status,stot,newcolumn\n"
      "BACKEND,a:b,2,UP,9,x\n"
      "s1,a:b,2,no check,9,y\n");
  ASSERT_TRUE(routes) << routes.error().message;
  ASSERT_EQ(routes->size(), 1u);
  EXPECT_EQ(routes->front().current, 2);
  EXPECT_EQ(routes->front().total, 9);
  EXPECT_EQ(routes->front().servers.at(0).id, "s1");

  auto bad = ParseShowStat("# pxname,svname,scur,status\na:b,BACKEND,lots,UP\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "scur");
  EXPECT_FALSE(ParseShowStat("a:b,BACKEND,1,UP\n")) << "no header";
  EXPECT_FALSE(ParseShowStat("# pxname,svname,status\na:b,BACKEND,UP\n")) << "no scur column";
}

TEST(GatewayStats, HeldCountsJoinTheirRoute) {
  auto routes = ParseShowStat(TestData("show_stat.csv"));
  ASSERT_TRUE(routes);
  ASSERT_TRUE(MergeHeld("ten:svc 2 7 1\nother:x 1 1 0\n", *routes));
  EXPECT_EQ(routes->front().held_now, 2);
  EXPECT_EQ(routes->front().held_total, 7);
  EXPECT_EQ(routes->front().held_expired, 1);
  EXPECT_FALSE(MergeHeld("ten:svc 2 7\n", *routes));
  EXPECT_FALSE(MergeHeld("ten:svc 2 x 1\n", *routes));
}

TEST(GatewayStats, ParsesShowProcWithAndWithoutOldWorkers) {
  auto calm = ParseShowProc(TestData("show_proc.txt"));
  ASSERT_TRUE(calm) << calm.error().message;
  EXPECT_EQ(calm->master, 501);
  EXPECT_EQ(calm->reloads, 0);
  EXPECT_EQ(calm->workers, std::vector<pid_t>{502});
  EXPECT_TRUE(calm->old_workers.empty());
  auto reloading = ParseShowProc(TestData("show_proc_reloading.txt"));
  ASSERT_TRUE(reloading) << reloading.error().message;
  EXPECT_EQ(reloading->master, 30344);
  EXPECT_EQ(reloading->reloads, 4);
  EXPECT_EQ(reloading->failed_reloads, 0);
  EXPECT_EQ(reloading->workers, std::vector<pid_t>{31032});
  EXPECT_EQ(reloading->old_workers, std::vector<pid_t>{31018});
  EXPECT_FALSE(ParseShowProc("# workers\n"));
}

// --- planning ---

RouteStats LiveCoder(std::vector<ServerStats> servers) {
  RouteStats r;
  r.tenant = "ml";
  r.service = "coder";
  r.servers = std::move(servers);
  return r;
}

ServerStats Live(std::string id, int port, ServerState state, std::int64_t current = 0) {
  ServerStats s;
  s.id = std::move(id);
  s.state = state;
  s.address = "127.0.0.1";
  s.port = port;
  s.weight = 100;
  s.current = current;
  return s;
}

TEST(GatewayPlan, ANewServerJoinsEnabled) {
  Route r = CoderRoute();
  r.backends.pop_back();
  auto plan = PlanServers({r}, {LiveCoder({})}, false);
  EXPECT_EQ(plan.commands,
            (std::vector<std::string>{"add server ml:coder/101 127.0.0.1:9001 weight 100 maxconn 8",
                                      "enable server ml:coder/101"}));
  EXPECT_EQ(plan.report.added, std::vector<std::string>{"ml/coder/101"});
}

TEST(GatewayPlan, NothingChangesWhenLiveMatches) {
  Route r = CoderRoute();
  r.backends.pop_back();
  auto plan = PlanServers({r}, {LiveCoder({Live("101", 9001, ServerState::kReady)})}, false);
  EXPECT_TRUE(plan.commands.empty());
}

TEST(GatewayPlan, AServerLeavesByDrainAndIsDeletedOnlyOnceIdle) {
  Route r = CoderRoute();
  r.backends.resize(1);
  // 102 is no longer wanted: first drained...
  auto first = PlanServers({r},
                           {LiveCoder({Live("101", 9001, ServerState::kReady),
                                       Live("102", 9002, ServerState::kReady, 3)})},
                           false);
  EXPECT_EQ(first.commands, std::vector<std::string>{"set server ml:coder/102 state drain"});
  EXPECT_EQ(first.report.drained, std::vector<std::string>{"ml/coder/102"});
  // ...kept while requests are in flight on it...
  auto busy = PlanServers({r},
                          {LiveCoder({Live("101", 9001, ServerState::kReady),
                                      Live("102", 9002, ServerState::kDrain, 3)})},
                          false);
  EXPECT_TRUE(busy.commands.empty());
  EXPECT_EQ(busy.report.draining, std::vector<std::string>{"ml/coder/102"});
  // ...and while an old worker may still serve through it...
  auto reloading = PlanServers(
      {r},
      {LiveCoder({Live("101", 9001, ServerState::kReady), Live("102", 9002, ServerState::kDrain)})},
      true);
  EXPECT_TRUE(reloading.commands.empty());
  // ...then deleted.
  auto idle = PlanServers(
      {r},
      {LiveCoder({Live("101", 9001, ServerState::kReady), Live("102", 9002, ServerState::kDrain)})},
      false);
  EXPECT_EQ(idle.commands, (std::vector<std::string>{"set server ml:coder/102 state maint",
                                                     "del server ml:coder/102"}));
  EXPECT_EQ(idle.report.removed, std::vector<std::string>{"ml/coder/102"});
}

TEST(GatewayPlan, DrainFlagWeightAndAddressChangesUseTheRuntimeApi) {
  Route r = CoderRoute();
  r.backends[0].weight = 40;
  r.backends[1].address = "127.0.0.1";
  r.backends[1].port = 9102;
  r.backends[1].draining = false;
  ServerStats drained = Live("102", 9002, ServerState::kDrain);
  drained.weight = 50;
  auto plan =
      PlanServers({r}, {LiveCoder({Live("101", 9001, ServerState::kReady), drained})}, false);
  EXPECT_EQ(plan.commands,
            (std::vector<std::string>{"set server ml:coder/101 weight 40",
                                      "set server ml:coder/102 addr 127.0.0.1 port 9102",
                                      "set server ml:coder/102 state ready"}));
  EXPECT_EQ(plan.report.enabled, std::vector<std::string>{"ml/coder/102"});
  r.backends[1].draining = true;
  ServerStats ready = Live("102", 9102, ServerState::kReady);
  ready.weight = 50;
  auto drain =
      PlanServers({r}, {LiveCoder({Live("101", 9001, ServerState::kReady), ready})}, false);
  EXPECT_EQ(drain.commands, (std::vector<std::string>{"set server ml:coder/101 weight 40",
                                                      "set server ml:coder/102 state drain"}));
}

TEST(GatewayPlan, ARouteNotYetLiveIsLeftToTheReload) {
  EXPECT_TRUE(PlanServers({CoderRoute()}, {}, false).commands.empty());
}

}  // namespace
}  // namespace berth::gateway
