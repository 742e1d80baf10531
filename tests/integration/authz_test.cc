// The authorization matrix against a real berthd over TLS: every API endpoint (the
// OpenAPI document's list, checked against this file's) x every caller
// (platform-admin; tenant-admin, member and viewer of each of two tenants;
// no token, a malformed, an expired and a revoked token; a metrics-reader; a
// running job's own token, read from inside the job) x the caller's own
// tenant and the other tenant. Each case is asserted allowed, or denied with
// exactly the status docs/security.md promises: 401 without a valid token,
// 403 for a role that is too weak (and for every route a scoped credential
// may not call), 404 for another tenant's object (and another job than a
// job token's own).
#include <fmt/format.h>

#include <set>
#include <thread>

#include "integration/fixture.h"
#include "integration/tenants.h"

namespace berth::it {
namespace {

using nlohmann::json;

// What a route needs (api/auth.h Rule), as the test expects it.
enum class Kind {
  kPublic,          // no token needed
  kAny,             // any valid token
  kAdmin,           // platform-admin
  kObjectRead,      // an object of the tenant: any role there (else 404)
  kObjectWrite,     // member or tenant-admin there (viewer 403; other tenant 404)
  kTenantManage,    // tenant-admin there (member, viewer 403; other tenant 404)
  kSubmit,          // the body names the tenant: member or tenant-admin, else 403
  kAuditRead,       // ?tenant=: tenant-admin of it, else 403
  kIdentityList,    // platform-admin or any tenant-admin, else 403
  kIdentityCreate,  // with a role in the tenant: tenant-admin of it, else 403
  kTokenOfService,  // a service account's token: tenant-admin of its tenant, else 404
  kTenantFile,      // the body names the tenant: tenant-admin of it, else 403
  kTenantPolicy,    // a policy changing queues below the tenant: its tenant-admin, else 403
  kMetrics,         // platform-admin or a metrics-reader, else 403
  kOwnJobRead,      // kObjectRead, and a job token for its own job (another job: 404)
  kOwnJobWrite,     // kObjectWrite, and a job token for its own job (another job: 404)
};

enum class Rel { kOwn, kOther };

// A service of `tenant` in its inference queue.
std::string ServiceSpecJson(const std::string& tenant, const std::string& name) {
  return json{{"name", name},
              {"tenant", tenant},
              {"queue", "serve"},
              {"command", {"serve"}},
              {"replicas", {{"min", 1}, {"max", 2}}}}
      .dump();
}

struct CallerId {
  std::string label;   // "platform", "red/member", "no token", ...
  std::string tenant;  // "" for the platform admin and the bad tokens
  std::string role;    // "platform", "tenant-admin", "member", "viewer", "bad", "metrics", "job"
  std::string token;
};

struct World {
  std::map<std::string, std::int64_t> job;    // tenant -> a running job
  std::map<std::string, std::int64_t> quota;  // tenant -> a quota request
  std::map<std::string, std::int64_t> array;  // tenant -> a job array's id
  std::string node;
  std::string gpu_uuid;  // a GPU of `node`
  std::string admin_token;
};

std::string Other(const std::string& tenant) {
  return tenant == "red" ? "blue" : "red";
}

struct Route {
  std::string method;
  std::string templ;  // as in the OpenAPI document
  Kind kind;
  // The concrete path for a caller's own or other tenant.
  std::function<std::string(const World&, const std::string& tenant)> path;
  std::function<std::string(const World&, const std::string& tenant, int n)> body = {};
  // Put the object back before the case (a member to remove, a token to revoke).
  std::function<void(const Http& admin, const World&, const std::string& tenant)> prepare = {};
};

// The expected status class: 0 for allowed, else the exact denial status.
int Expected(Kind kind, const CallerId& c, Rel rel) {
  if (kind == Kind::kPublic) return 0;
  if (c.role == "bad") return 401;
  // Scoped credentials: the routes that admit them, else 403 before any
  // object is looked up.
  if (c.role == "metrics") return kind == Kind::kMetrics ? 0 : 403;
  if (c.role == "job") {
    if (kind != Kind::kOwnJobRead && kind != Kind::kOwnJobWrite) return 403;
    return rel == Rel::kOwn ? 0 : 404;
  }
  if (c.role == "platform") return 0;
  const bool own = rel == Rel::kOwn;
  const bool writer = c.role == "member" || c.role == "tenant-admin";
  const bool manager = c.role == "tenant-admin";
  switch (kind) {
    case Kind::kPublic:
    case Kind::kAny:
      return 0;
    case Kind::kAdmin:
    case Kind::kMetrics:
      return 403;
    case Kind::kObjectRead:
    case Kind::kOwnJobRead:
      return own ? 0 : 404;
    case Kind::kObjectWrite:
    case Kind::kOwnJobWrite:
      return !own ? 404 : writer ? 0 : 403;
    case Kind::kTenantManage:
      return !own ? 404 : manager ? 0 : 403;
    case Kind::kSubmit:
      return own && writer ? 0 : 403;
    case Kind::kAuditRead:
    case Kind::kIdentityCreate:
    case Kind::kTenantFile:
    case Kind::kTenantPolicy:
      return own && manager ? 0 : 403;
    case Kind::kIdentityList:
      return manager ? 0 : 403;
    case Kind::kTokenOfService:
      return own && manager ? 0 : 404;
  }
  return -1;
}

std::vector<Route> Routes() {
  auto fixed = [](std::string p) { return [p](const World&, const std::string&) { return p; }; };
  auto job = [](std::string suffix) {
    return [suffix](const World& w, const std::string& t) {
      return "/v1/jobs/" + std::to_string(w.job.at(t)) + suffix;
    };
  };
  auto array = [](std::string suffix) {
    return [suffix](const World& w, const std::string& t) {
      return "/v1/arrays/" + std::to_string(w.array.at(t)) + suffix;
    };
  };
  std::vector<Route> r;
  r.push_back({"GET", "/healthz", Kind::kPublic, fixed("/healthz")});
  r.push_back({"GET", "/readyz", Kind::kPublic, fixed("/readyz")});
  r.push_back({"POST", "/v1/arrays/{id}/cancel", Kind::kObjectWrite, array("/cancel")});
  r.push_back({"GET", "/v1/openapi.json", Kind::kPublic, fixed("/v1/openapi.json")});
  r.push_back({"POST", "/v1/jobs", Kind::kSubmit, fixed("/v1/jobs"),
               [](const World&, const std::string& t, int n) {
                 return JobSpecJson("m" + std::to_string(n), {"true"}, 0,
                                    {{"tenant", t}, {"queue", "main"}});
               }});
  r.push_back({"GET", "/v1/jobs", Kind::kAny, fixed("/v1/jobs")});
  // An unknown topic: past the guard, the handler answers 400 (field
  // topics) rather than opening a stream the test would wait on.
  r.push_back({"GET", "/v1/events", Kind::kAny, fixed("/v1/events?topics=none")});
  // With a bearer token there is no console session: signing in makes one,
  // reading answers console: null, signing out ends nothing.
  r.push_back({"POST", "/v1/console/session", Kind::kAny, fixed("/v1/console/session")});
  r.push_back({"GET", "/v1/console/session", Kind::kAny, fixed("/v1/console/session")});
  r.push_back({"DELETE", "/v1/console/session", Kind::kAny, fixed("/v1/console/session")});
  r.push_back({"GET", "/v1/jobs/{id}", Kind::kOwnJobRead, job("")});
  r.push_back({"POST", "/v1/jobs/{id}/cancel", Kind::kObjectWrite, job("/cancel")});
  r.push_back({"POST", "/v1/jobs/{id}/checkpoint", Kind::kOwnJobWrite, job("/checkpoint")});
  r.push_back({"GET", "/v1/jobs/{id}/logs", Kind::kObjectRead, job("/logs")});
  r.push_back({"GET", "/v1/jobs/{id}/why", Kind::kOwnJobRead, job("/why")});
  r.push_back({"GET", "/v1/jobs/{id}/outputs", Kind::kObjectRead, job("/outputs")});
  // No path: past the guard, the handler answers 400 (field path).
  r.push_back({"GET", "/v1/jobs/{id}/outputs/content", Kind::kObjectRead, job("/outputs/content")});
  r.push_back({"GET", "/v1/jobs/{id}/telemetry", Kind::kObjectRead, job("/telemetry")});
  r.push_back({"GET", "/v1/nodes", Kind::kAny, fixed("/v1/nodes")});
  r.push_back({"GET", "/v1/nodes/{node}", Kind::kAny,
               [](const World& w, const std::string&) { return "/v1/nodes/" + w.node; }});
  r.push_back(
      {"POST", "/v1/nodes/{node}/{action}", Kind::kAdmin,
       [](const World& w, const std::string&) { return "/v1/nodes/" + w.node + "/uncordon"; }});
  // The node runs the job token's job all along: past the guard, a platform
  // admin is refused 409 (active runs), and the node stays for the others.
  r.push_back({"DELETE", "/v1/nodes/{node}", Kind::kAdmin,
               [](const World& w, const std::string&) { return "/v1/nodes/" + w.node; }});
  r.push_back({"POST", "/v1/nodes/{node}/gpus/{index}/{action}", Kind::kAdmin,
               [](const World& w, const std::string&) {
                 return "/v1/nodes/" + w.node + "/gpus/7/uncordon";
               }});
  r.push_back({"GET", "/v1/gpus", Kind::kAny, fixed("/v1/gpus")});
  r.push_back(
      {"GET", "/v1/gpus/{uuid}/telemetry", Kind::kAny,
       [](const World& w, const std::string&) { return "/v1/gpus/" + w.gpu_uuid + "/telemetry"; }});
  r.push_back({"GET", "/v1/alerts", Kind::kAdmin, fixed("/v1/alerts")});
  // Alert 0 cannot exist: past the guard, the handler answers 400 (field id).
  r.push_back({"POST", "/v1/alerts/{id}/resolve", Kind::kAdmin, fixed("/v1/alerts/0/resolve")});
  r.push_back({"GET", "/v1/alert-rules", Kind::kAdmin, fixed("/v1/alert-rules")});
  r.push_back({"POST", "/v1/alert-rules", Kind::kAdmin, fixed("/v1/alert-rules"),
               [](const World&, const std::string&, int) {
                 return std::string(
                     "rules: [{name: gpus, kind: gpu_health, severity: critical}]\n");
               }});
  r.push_back({"GET", "/v1/alert-deliveries", Kind::kAdmin, fixed("/v1/alert-deliveries")});
  r.push_back({"GET", "/v1/policy", Kind::kAny, fixed("/v1/policy")});
  // A tenant-admin may change the queues below its tenant (dry runs here).
  r.push_back({"POST", "/v1/policy", Kind::kTenantPolicy, fixed("/v1/policy?dry_run=true"),
               [](const World&, const std::string& t, int) {
                 std::string policy = kRedBlueServe;
                 const std::string anchor = "  - name: " + t + "\n    children:\n";
                 policy.insert(policy.find(anchor) + anchor.size(), "      - name: extra\n");
                 return policy;
               }});
  r.push_back({"GET", "/v1/policy/versions", Kind::kAny, fixed("/v1/policy/versions")});
  r.push_back({"GET", "/v1/policy/versions/{version}", Kind::kAny, fixed("/v1/policy/versions/1")});
  r.push_back({"POST", "/v1/policy/rollback", Kind::kAdmin, fixed("/v1/policy/rollback")});
  r.push_back({"GET", "/v1/policy/diff", Kind::kAny, fixed("/v1/policy/diff")});
  r.push_back({"POST", "/v1/policy/preview", Kind::kAdmin, fixed("/v1/policy/preview?window=1h"),
               [](const World&, const std::string&, int) { return std::string(kRedBlue); }});
  r.push_back({"GET", "/v1/history", Kind::kAdmin, fixed("/v1/history")});
  r.push_back({"GET", "/metrics", Kind::kMetrics, fixed("/metrics")});
  r.push_back({"GET", "/v1/audit", Kind::kAuditRead,
               [](const World&, const std::string& t) { return "/v1/audit?tenant=" + t; }});
  r.push_back({"GET", "/v1/audit/verify", Kind::kAdmin, fixed("/v1/audit/verify")});
  r.push_back({"GET", "/v1/whoami", Kind::kAny, fixed("/v1/whoami")});
  r.push_back({"POST", "/v1/login", Kind::kAny, fixed("/v1/login")});
  r.push_back({"GET", "/v1/identities", Kind::kIdentityList, fixed("/v1/identities")});
  r.push_back(
      {"POST", "/v1/identities", Kind::kIdentityCreate, fixed("/v1/identities"),
       [](const World&, const std::string& t, int n) {
         return json{{"name", "made-" + std::to_string(n)}, {"tenants", {{t, "member"}}}}.dump();
       }});
  r.push_back({"POST", "/v1/identities/{name}/{action}", Kind::kAdmin,
               fixed("/v1/identities/red-svc/enable")});
  r.push_back({"GET", "/v1/tenants/{tenant}/members", Kind::kObjectRead,
               [](const World&, const std::string& t) { return "/v1/tenants/" + t + "/members"; }});
  r.push_back({"POST", "/v1/tenants/{tenant}/members", Kind::kTenantManage,
               [](const World&, const std::string& t) { return "/v1/tenants/" + t + "/members"; },
               [](const World&, const std::string& t, int) {
                 return json{{"identity", t + "-svc"}, {"role", "member"}}.dump();
               }});
  r.push_back({"POST",
               "/v1/tenants/{tenant}/members/{identity}/remove",
               Kind::kTenantManage,
               [](const World&, const std::string& t) {
                 return "/v1/tenants/" + t + "/members/" + t + "-spare/remove";
               },
               {},
               [](const Http& admin, const World&, const std::string& t) {
                 admin.Post("/v1/tenants/" + t + "/members",
                            json{{"identity", t + "-spare"}, {"role", "viewer"}}.dump(),
                            "application/json");
               }});
  r.push_back({"GET", "/v1/tokens", Kind::kAny, fixed("/v1/tokens")});
  r.push_back({"POST", "/v1/tokens", Kind::kAny, fixed("/v1/tokens"),
               [](const World&, const std::string&, int) {
                 return json{{"ttl", "1h"}, {"description", "matrix"}}.dump();
               }});
  // Quota requests: World::quota holds one pending request per tenant.
  r.push_back({"POST", "/v1/quota-requests", Kind::kTenantFile, fixed("/v1/quota-requests"),
               [](const World&, const std::string& t, int n) {
                 return json{{"queue", t + "/main"},
                             {"resource", "gpus"},
                             {"guaranteed", 1 + n % 7},
                             {"reason", "matrix"}}
                     .dump();
               }});
  r.push_back({"GET", "/v1/quota-requests", Kind::kAny, fixed("/v1/quota-requests")});
  r.push_back({"GET", "/v1/quota-requests/{id}", Kind::kObjectRead,
               [](const World& w, const std::string& t) {
                 return "/v1/quota-requests/" + std::to_string(w.quota.at(t));
               }});
  for (const std::string action : {"approve", "reject"}) {
    r.push_back({"POST", "/v1/quota-requests/{id}/" + action, Kind::kAdmin,
                 [action](const World& w, const std::string& t) {
                   return "/v1/quota-requests/" + std::to_string(w.quota.at(t)) + "/" + action +
                          "?comment=matrix";
                 }});
  }
  r.push_back({"POST", "/v1/quota-requests/{id}/withdraw", Kind::kTenantManage,
               [](const World& w, const std::string& t) {
                 return "/v1/quota-requests/" + std::to_string(w.quota.at(t)) + "/withdraw";
               }});
  // Metering: prices are public, usage and budgets filtered to the caller's
  // tenants, changes are platform-admin.
  r.push_back({"GET", "/v1/prices", Kind::kAny, fixed("/v1/prices")});
  r.push_back({"POST", "/v1/prices", Kind::kAdmin, fixed("/v1/prices"),
               [](const World&, const std::string&, int) {
                 return std::string("prices: [{model: H100-80GB, per_gpu_hour: 2.5}]\n");
               }});
  r.push_back({"GET", "/v1/usage", Kind::kAny, fixed("/v1/usage?by=tenant,queue")});
  r.push_back({"GET", "/v1/usage/records", Kind::kAny, fixed("/v1/usage/records")});
  r.push_back({"GET", "/v1/budgets", Kind::kAny, fixed("/v1/budgets")});
  r.push_back({"GET", "/v1/queues", Kind::kAny, fixed("/v1/queues")});
  r.push_back({"GET", "/v1/reports/ops", Kind::kAny, fixed("/v1/reports/ops")});
  r.push_back({"POST", "/v1/budgets/{tenant}", Kind::kAdmin,
               [](const World&, const std::string& t) { return "/v1/budgets/" + t; },
               [](const World&, const std::string&, int) {
                 return json{{"gpu_hours", "1000"}}.dump();
               }});
  r.push_back(
      {"DELETE",
       "/v1/budgets/{tenant}",
       Kind::kAdmin,
       [](const World&, const std::string& t) { return "/v1/budgets/" + t; },
       {},
       [](const Http& admin, const World&, const std::string& t) {
         admin.Post("/v1/budgets/" + t, json{{"gpu_hours", "1000"}}.dump(), "application/json");
       }});
  // Services: each tenant has a service `web` (put back before a delete).
  auto svc = [](std::string suffix) {
    return [suffix](const World&, const std::string& t) {
      return "/v1/services/" + t + "/web" + suffix;
    };
  };
  r.push_back({"POST", "/v1/services", Kind::kSubmit, fixed("/v1/services"),
               [](const World&, const std::string& t, int n) {
                 return ServiceSpecJson(t, "m" + std::to_string(n));
               }});
  r.push_back({"GET", "/v1/services", Kind::kAny, fixed("/v1/services")});
  r.push_back({"GET", "/v1/services/{tenant}/{name}", Kind::kObjectRead, svc("")});
  // What the gateway asks before a caller reaches a replica: members only.
  r.push_back({"GET", "/v1/services/{tenant}/{name}/access", Kind::kObjectWrite, svc("/access")});
  r.push_back(
      {"POST", "/v1/services/{tenant}/{name}/scale", Kind::kObjectWrite, svc("/scale?max=3")});
  // Past the guard, a first rollback may answer 409 (no earlier revision).
  r.push_back(
      {"POST", "/v1/services/{tenant}/{name}/rollback", Kind::kObjectWrite, svc("/rollback")});
  // Past the guard: 409 (no canary steps to resume).
  r.push_back({"POST", "/v1/services/{tenant}/{name}/rollout/resume", Kind::kObjectWrite,
               svc("/rollout/resume")});
  r.push_back({"DELETE",
               "/v1/services/{tenant}/{name}",
               Kind::kObjectWrite,
               svc(""),
               {},
               [](const Http& admin, const World&, const std::string& t) {
                 admin.Post("/v1/services", ServiceSpecJson(t, "web"), "application/json");
               }});
  // The token to revoke is made fresh for each case; its id goes in the path.
  r.push_back({"POST", "/v1/tokens/{id}/revoke", Kind::kTokenOfService, {}});
  return r;
}

class AuthzTest : public IntegrationTest {
 protected:
  // A token made by the platform admin (for `identity`), "" on failure.
  std::string MakeToken(const Http& admin, const std::string& identity, const std::string& ttl) {
    auto r = admin.Post("/v1/tokens", json{{"identity", identity}, {"ttl", ttl}}.dump(),
                        "application/json");
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body.value("token", "");
  }
  // A client for a new identity with `role` in tenant red.
  Http RedCaller(const Berthd& berthd, const std::string& name, const std::string& role) {
    Http http(berthd.api_port());
    http.set_token(MemberToken(berthd.http(), name, "red", role, "1d"));
    return http;
  }
};

BerthdOptions OverTls() {
  BerthdOptions o = AllInOne();
  o.tls = true;
  return o;
}

TEST_F(AuthzTest, EveryEndpointRoleAndTenantIsAllowedOrDeniedAsDocumented) {
  Berthd& berthd = NewBerthd(OverTls());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();
  ASSERT_EQ(admin.Post("/v1/policy", kRedBlueServe).status, 201);

  World w;
  w.node = berthd.Nodes().at(0).at("name");
  w.gpu_uuid = admin.Get("/v1/gpus").body.at("gpus").at(0).at("uuid");
  w.admin_token = admin.token();
  // A red job that keeps its own token where the test can read it. It is
  // the job token's own job; the other callers act on w.job (and cancel it).
  const auto token_dir = dir_ / "red-job";
  OwnedByTenant(token_dir, "red");
  World wj;
  wj.job["red"] = berthd.Submit(JobSpecJson(
      "red-token-job",
      Sh("printf %s \"$BERTH_JOB_TOKEN\" > " + (token_dir / "token").string() + "; exec sleep 300"),
      1, {{"tenant", "red"}, {"queue", "main"}}));
  ASSERT_GT(wj.job["red"], 0);
  ASSERT_TRUE(berthd.WaitForState(wj.job["red"], "Running", 20s));
  for (const std::string t : {"red", "blue"}) {
    w.job[t] = berthd.Submit(
        JobSpecJson(t + "-job", {"sleep", "300"}, 1, {{"tenant", t}, {"queue", "main"}}));
    ASSERT_GT(w.job[t], 0);
    // Running, so that its outputs (an empty directory) are on the node.
    ASSERT_TRUE(berthd.WaitForState(w.job[t], "Running", 20s)) << berthd.Job(w.job[t]).dump(2);
    // Two elements that wait (the node's other GPUs are fewer than 8).
    w.array[t] = berthd.Submit(JobSpecJson(t + "-array", {"sleep", "300"}, 8,
                                           {{"tenant", t}, {"queue", "main"}, {"array", 2}}));
    ASSERT_GT(w.array[t], 0);
    auto q = admin.Post(
        "/v1/quota-requests",
        json{{"queue", t + "/main"}, {"resource", "gpus"}, {"guaranteed", 2}, {"reason", "matrix"}}
            .dump(),
        "application/json");
    ASSERT_EQ(q.status, 201) << q.text;
    w.quota[t] = q.body.at("id");
    auto web = admin.Post("/v1/services", ServiceSpecJson(t, "web"), "application/json");
    ASSERT_EQ(web.status, 201) << web.text;
  }

  {
    const std::int64_t token_job = wj.job["red"];
    wj = w;
    wj.job["red"] = token_job;
  }
  // Callers: each role in each tenant, a service account and a spare
  // identity per tenant (objects for the member and token routes).
  std::vector<CallerId> callers{{"platform", "", "platform", w.admin_token}};
  for (const std::string t : {"red", "blue"}) {
    for (const std::string role : {"tenant-admin", "member", "viewer"}) {
      const std::string token = MemberToken(admin, t + "-" + role, t, role, "1d");
      ASSERT_FALSE(token.empty());
      callers.push_back({t + "/" + role, t, role, token});
    }
    for (const std::string& extra : {t + "-svc", t + "-spare"}) {
      auto r = admin.Post(
          "/v1/identities",
          json{{"name", extra}, {"kind", "service"}, {"tenants", {{t, "member"}}}}.dump(),
          "application/json");
      ASSERT_EQ(r.status, 201) << r.text;
    }
  }
  const std::string revoked = MakeToken(admin, "red-member", "1d");
  {
    auto id = revoked.substr(6, 12);
    ASSERT_EQ(admin.Post("/v1/tokens/" + id + "/revoke", "", "application/json").status, 200);
  }
  {
    auto r = admin.Post(
        "/v1/identities",
        json{{"name", "prometheus"}, {"kind", "service"}, {"metrics_reader", true}}.dump(),
        "application/json");
    ASSERT_EQ(r.status, 201) << r.text;
    callers.push_back({"metrics-reader", "", "metrics", MakeToken(admin, "prometheus", "1d")});
  }
  ASSERT_TRUE(WaitFor([&] { return !ReadFile(token_dir / "token").empty(); }, 10s));
  callers.push_back({"red job's token", "red", "job", ReadFile(token_dir / "token")});
  const std::string expired = MakeToken(admin, "red-member", "1s");
  callers.push_back({"no token", "", "bad", ""});
  callers.push_back({"malformed token", "", "bad", "berth_not-a-token"});
  callers.push_back({"revoked token", "", "bad", revoked});
  std::this_thread::sleep_for(1100ms);
  callers.push_back({"expired token", "", "bad", expired});

  // Every route of the OpenAPI document is in the matrix, and no other.
  const auto routes = Routes();
  std::set<std::string> documented;
  auto doc = admin.Get("/v1/openapi.json");
  ASSERT_EQ(doc.status, 200);
  for (const auto& [path, ops] : doc.body.at("paths").items()) {
    for (const auto& [method, op] : ops.items()) {
      std::string m = method;
      for (auto& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      documented.insert(m + " " + path);
    }
  }
  std::set<std::string> covered;
  for (const auto& r : routes) covered.insert(r.method + " " + r.templ);
  EXPECT_EQ(covered, documented);

  int cases = 0;
  int allowed = 0;
  int n = 0;
  std::map<int, int> denied;
  for (const auto& route : routes) {
    for (const auto& caller : callers) {
      for (Rel rel : {Rel::kOwn, Rel::kOther}) {
        const std::string tenant = caller.tenant.empty()
                                       ? (rel == Rel::kOwn ? "red" : "blue")
                                       : (rel == Rel::kOwn ? caller.tenant : Other(caller.tenant));
        ++n;
        std::string path;
        if (route.templ == "/v1/tokens/{id}/revoke") {
          const std::string token = MakeToken(admin, tenant + "-svc", "1h");
          path = "/v1/tokens/" + token.substr(6, 12) + "/revoke";
        } else {
          path = route.path(caller.role == "job" ? wj : w, tenant);
        }
        if (route.prepare) route.prepare(admin, w, tenant);
        Http http(berthd.api_port(), 10s, berthd.ca_file());
        http.set_token(caller.token);
        const std::string body = route.body ? route.body(w, tenant, n) : "";
        Reply reply = route.method == "GET"      ? http.Get(path)
                      : route.method == "DELETE" ? http.Delete(path)
                                                 : http.Post(path, body, "application/json");
        const int want = Expected(route.kind, caller, rel);
        ++cases;
        SCOPED_TRACE(fmt::format("{} {} as {} ({} tenant {}): {} {}", route.method, path,
                                 caller.label, rel == Rel::kOwn ? "own" : "other", tenant,
                                 reply.status, reply.text.substr(0, 300)));
        ASSERT_NE(reply.status, 0);
        if (want == 0) {
          ++allowed;
          EXPECT_TRUE(reply.status != 401 && reply.status != 403 && reply.status != 404);
          EXPECT_LT(reply.status, 500);
        } else {
          ++denied[want];
          EXPECT_EQ(reply.status, want);
          // A denial says nothing of the object beyond what a miss would.
          EXPECT_EQ(reply.text.find("sleep"), std::string::npos);
        }
      }
    }
  }
  std::cout << fmt::format(
      "authorization matrix: {} routes x {} callers x 2 tenants = {} cases; {} allowed, "
      "{} denied 401, {} denied 403, {} denied 404\n",
      routes.size(), callers.size(), cases, allowed, denied[401], denied[403], denied[404]);

  // The list's paging parameters move where a page starts, never whose
  // jobs it holds: every caller, page after page, from the first page and
  // from cursors forged next to each tenant's job ids.
  for (const auto& caller : callers) {
    if (caller.role == "bad") continue;
    if (caller.role == "metrics" || caller.role == "job") {
      // Neither may list jobs at all, cursor or not.
      Http http(berthd.api_port(), 10s, berthd.ca_file());
      http.set_token(caller.token);
      auto page = http.Get(fmt::format("/v1/jobs?limit=2&after=j{}", w.job.at("red") + 1));
      EXPECT_EQ(page.status, 403) << caller.label << ": " << page.text;
      continue;
    }
    Http http(berthd.api_port(), 10s, berthd.ca_file());
    http.set_token(caller.token);
    std::vector<std::string> starts{""};
    for (const std::string t : {"red", "blue"}) {
      starts.push_back(fmt::format("j{}", w.job.at(t) + 1));
      starts.push_back(fmt::format("j{}", w.array.at(t) + 1));
    }
    for (const auto& start : starts) {
      std::string after = start;
      int pages = 0;
      for (;;) {
        auto page = http.Get("/v1/jobs?limit=2&full=true" +
                             (after.empty() ? std::string() : "&after=" + after));
        ASSERT_EQ(page.status, 200) << caller.label << ": " << page.text;
        ++pages;
        for (const auto& j : page.body.at("jobs")) {
          if (caller.role == "platform") continue;
          EXPECT_EQ(j.at("tenant"), caller.tenant) << caller.label << " from " << start;
          EXPECT_EQ(j.at("spec").at("tenant"), caller.tenant) << caller.label;
        }
        if (!page.body.contains("next")) break;
        after = page.body.at("next").get<std::string>();
        ASSERT_LT(pages, 100) << "paging does not end";
      }
    }
    // Another list's cursor or made-up text, and a page over the maximum:
    // 400 naming the parameter.
    for (const std::string bad : {"a12", "j-3", "jx", "u1:2.0.0"}) {
      auto r = http.Get("/v1/jobs?after=" + bad);
      EXPECT_EQ(r.status, 400) << r.text;
      EXPECT_EQ(r.body["error"].value("field", ""), "after") << r.text;
    }
    auto r = http.Get("/v1/jobs?limit=5001");
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_EQ(r.body["error"].value("field", ""), "limit") << r.text;
    EXPECT_NE(r.text.find("5000"), std::string::npos) << r.text;
  }

  // The identity and token lists page the same way: a page of one row at a
  // time, from the first page and from forged cursors, holds only what the
  // caller may list (a tenant-admin: identities of its tenants, with their
  // roles there; everyone: its own tokens); no tenant-admin role: 403.
  for (const auto& caller : callers) {
    if (caller.role == "bad") continue;
    Http http(berthd.api_port(), 10s, berthd.ca_file());
    http.set_token(caller.token);
    const bool lists_identities = caller.role == "platform" || caller.role == "tenant-admin";
    const bool lists_tokens = caller.role != "metrics" && caller.role != "job";
    for (const std::string start : {"", "ia", "ired-member", "iblue-spare", "izzz"}) {
      std::string after = start;
      for (int pages = 0;; ++pages) {
        ASSERT_LT(pages, 100) << "paging does not end";
        auto page = http.Get("/v1/identities?limit=1" +
                             (after.empty() ? std::string() : "&after=" + after));
        if (!lists_identities) {
          EXPECT_EQ(page.status, 403) << caller.label << ": " << page.text;
          break;
        }
        ASSERT_EQ(page.status, 200) << caller.label << ": " << page.text;
        EXPECT_LE(page.body.at("identities").size(), 1U);
        for (const auto& id : page.body.at("identities")) {
          if (caller.role == "platform") continue;
          ASSERT_EQ(id.at("tenants").size(), 1U) << caller.label << ": " << id.dump();
          EXPECT_TRUE(id.at("tenants").contains(caller.tenant)) << caller.label << ": " << id;
        }
        if (!page.body.contains("next")) break;
        after = page.body.at("next").get<std::string>();
      }
    }
    for (const std::string start : {"", "t0:0", "t99999999999999:zzz"}) {
      std::string after = start;
      for (int pages = 0;; ++pages) {
        ASSERT_LT(pages, 100) << "paging does not end";
        auto page =
            http.Get("/v1/tokens?limit=1" + (after.empty() ? std::string() : "&after=" + after));
        if (!lists_tokens) {
          EXPECT_EQ(page.status, 403) << caller.label << ": " << page.text;
          break;
        }
        ASSERT_EQ(page.status, 200) << caller.label << ": " << page.text;
        for (const auto& t : page.body.at("tokens")) {
          const std::string me =
              caller.role == "platform" ? std::string("admin") : caller.tenant + "-" + caller.role;
          EXPECT_EQ(t.at("identity"), me) << caller.label;
        }
        if (!page.body.contains("next")) break;
        after = page.body.at("next").get<std::string>();
      }
    }
    if (lists_identities) {
      auto r = http.Get("/v1/identities?limit=5001");
      EXPECT_EQ(r.status, 400) << r.text;
      EXPECT_EQ(r.body["error"].value("field", ""), "limit") << r.text;
    }
    if (lists_tokens) {
      auto r = http.Get("/v1/tokens?limit=5001");
      EXPECT_EQ(r.status, 400) << r.text;
      EXPECT_EQ(r.body["error"].value("field", ""), "limit") << r.text;
    }
  }

  // Denials are in the audit trail with who asked.
  auto audit = GetAllPages(admin, "/v1/audit?action=job.cancel&limit=5000", "records");
  ASSERT_EQ(audit.status, 200);
  int cancel_denials = 0;
  for (const auto& rec : audit.body.at("records")) {
    if (rec.value("outcome", "").starts_with("denied")) ++cancel_denials;
  }
  EXPECT_GE(cancel_denials, 10) << audit.text;
}

TEST_F(AuthzTest, AMemberSeesItsTenantOnlyAndOtherTenantsGpusAsAnotherTenant) {
  Berthd& berthd = NewBerthd(OverTls());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();
  ASSERT_EQ(admin.Post("/v1/policy", kRedBlue).status, 201);

  // Rita logs in with the CLI: the token is kept 0600 in her config file.
  const std::string token = MemberToken(admin, "rita", "red", "member");
  ASSERT_FALSE(token.empty());
  WriteFile(dir_ / "rita.token", token + "\n");
  const auto config = dir_ / "rita" / "config.json";
  ::setenv("BERTH_CONFIG", config.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  const std::string admin_token = admin.token();
  ::unsetenv("BERTH_TOKEN");  // NOLINT(concurrency-mt-unsafe)
  auto r = Cli(berthd, {"login", "--token-file", (dir_ / "rita.token").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("as rita"), std::string::npos) << r.out;
  EXPECT_EQ(std::filesystem::status(config).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  WriteFile(dir_ / "red.json", JobSpecJson("red-secret-name", {"sleep", "300"}, 1,
                                           {{"tenant", "red"}, {"queue", "main"}}));
  r = Cli(berthd, {"submit", (dir_ / "red.json").string(), "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::int64_t red = json::parse(r.out).at("id");
  EXPECT_EQ(json::parse(r.out).at("submitted_by"), "rita");
  const std::int64_t blue = berthd.Submit(JobSpecJson("blue-secret-name", {"sleep", "300"}, 1,
                                                      {{"tenant", "blue"}, {"queue", "main"}}));
  ASSERT_GT(blue, 0);
  ASSERT_TRUE(berthd.WaitForState(red, "Running", 20s));
  ASSERT_TRUE(berthd.WaitForState(blue, "Running", 20s));

  // berth jobs: hers only. berth gpus: the blue job's GPU says "another tenant".
  r = Cli(berthd, {"jobs", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto jobs = json::parse(r.out).at("jobs");
  ASSERT_EQ(jobs.size(), 1u) << r.out;
  EXPECT_EQ(jobs[0].at("id"), red);
  r = Cli(berthd, {"gpus", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("blue-secret-name"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("another tenant"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("red-secret-name"), std::string::npos) << r.out;
  r = Cli(berthd, {"gpus"});
  EXPECT_NE(r.out.find("another tenant"), std::string::npos) << r.out;

  // Another tenant's job does not exist for her; the message is a miss's.
  r = Cli(berthd, {"logs", std::to_string(blue)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("job " + std::to_string(blue) + " not found"), std::string::npos) << r.err;
  r = Cli(berthd, {"cancel", std::to_string(blue)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(berthd.JobState(blue), "Running");
  // She may not submit into blue, and is told why.
  WriteFile(dir_ / "blue.json",
            JobSpecJson("sneaky", {"true"}, 0, {{"tenant", "blue"}, {"queue", "main"}}));
  r = Cli(berthd, {"submit", (dir_ / "blue.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a member of tenant blue"), std::string::npos) << r.err;

  r = Cli(berthd, {"whoami"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("rita (user)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("red:member"), std::string::npos) << r.out;

  // Revoked: the next command is refused at once and says what to do.
  auto tokens = admin.Get("/v1/tokens?identity=rita");
  ASSERT_EQ(tokens.status, 200);
  const std::string id = tokens.body.at("tokens").at(0).at("id");
  ASSERT_EQ(admin.Post("/v1/tokens/" + id + "/revoke", "", "application/json").status, 200);
  r = Cli(berthd, {"jobs"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("revoked"), std::string::npos) << r.err;
  r = Cli(berthd, {"logout"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFile(config).find("berth_"), std::string::npos);

  // The trail: her login and submission, the refused attempts, the revocation.
  auto audit = admin.Get("/v1/audit?actor=rita");
  ASSERT_EQ(audit.status, 200);
  std::set<std::string> seen;
  for (const auto& rec : audit.body.at("records")) {
    seen.insert(rec.value("action", "") + " " + rec.value("outcome", ""));
  }
  EXPECT_TRUE(seen.contains("auth.login ok")) << audit.text;
  EXPECT_TRUE(seen.contains("job.submit ok")) << audit.text;
  EXPECT_TRUE(seen.contains("job.submit denied: PermissionDenied")) << audit.text;
  EXPECT_TRUE(seen.contains("job.cancel denied: NotFound")) << audit.text;
  ::unsetenv("BERTH_CONFIG");                       // NOLINT(concurrency-mt-unsafe)
  ::setenv("BERTH_TOKEN", admin_token.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
}

}  // namespace
}  // namespace berth::it

namespace berth::it {
namespace {

// Red's guarantee reclaims the GPUs blue borrowed: blue's members learn that
// a job of another tenant took them, and of which queue (the policy is
// public), never that job's id; the platform admin sees the id.
constexpr const char* kRedReclaims = R"(reclaim_grace: 0s
queues:
  - name: default
    children:
      - name: default
  - name: red
    quota:
      gpus: {guaranteed: 8}
    children:
      - name: main
        quota:
          gpus: {guaranteed: 8}
  - name: blue
    children:
      - name: main
)";

TEST_F(AuthzTest, AReasonNamesAnotherTenantsJobOnlyAsThat) {
  // The borrower shrugs off SIGTERM, so it stays stopping (and its reason
  // Reclaimed, red's WaitingForEvictions) while the test reads them.
  Berthd& berthd = NewBerthd(AllInOne({"--stop-grace", "60s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();
  ASSERT_EQ(admin.Post("/v1/policy", kRedReclaims).status, 201);

  const std::int64_t blue =
      berthd.Submit(JobSpecJson("blue-borrower", Sh("trap '' TERM; while :; do sleep 0.2; done"), 8,
                                {{"tenant", "blue"}, {"queue", "main"}}));
  ASSERT_GT(blue, 0);
  ASSERT_TRUE(berthd.WaitForState(blue, "Running", 20s)) << berthd.Job(blue).dump(2);
  const std::int64_t red = berthd.Submit(
      JobSpecJson("red-owner", {"sleep", "300"}, 8, {{"tenant", "red"}, {"queue", "main"}}));
  ASSERT_GT(red, 0);
  ASSERT_TRUE(WaitFor([&] { return CountEvents(berthd.Job(blue), "Reclaiming") == 1; }, 20s))
      << berthd.Job(blue).dump(2) << berthd.Job(red).dump(2);

  const std::string red_ref = "job " + std::to_string(red);
  Http bob(berthd.api_port());
  bob.set_token(MemberToken(admin, "bob", "blue", "member", "1d"));
  const std::string blue_path = "/v1/jobs/" + std::to_string(blue);
  for (const std::string& path : {blue_path, std::string("/v1/jobs?full=true"),
                                  std::string("/v1/jobs"), blue_path + "/why"}) {
    auto r = bob.Get(path);
    ASSERT_EQ(r.status, 200) << path << r.text;
    EXPECT_EQ(r.text.find(red_ref), std::string::npos) << path << r.text;
    EXPECT_EQ(r.text.find("\"by_job\""), std::string::npos) << path << r.text;
    EXPECT_NE(r.text.find("job of another tenant"), std::string::npos) << path << r.text;
    EXPECT_NE(r.text.find("\"by_job_other_tenant\":1"), std::string::npos) << path << r.text;
  }
  auto why = bob.Get("/v1/jobs/" + std::to_string(blue) + "/why?lang=zh");
  ASSERT_EQ(why.status, 200) << why.text;
  EXPECT_NE(why.body["reason"]["message"].get<std::string>().find("其他租户的作业"),
            std::string::npos)
      << why.text;
  auto job = bob.Get("/v1/jobs/" + std::to_string(blue));
  EXPECT_EQ(job.body["reason"]["code"], "Reclaimed") << job.text;
  EXPECT_EQ(job.body["reason"]["detail"], "red/main") << job.text;
  ASSERT_TRUE(job.body["failure"].is_object()) << job.text;
  EXPECT_NE(job.body["failure"].value("message", "").find("job of another tenant"),
            std::string::npos)
      << job.text;

  // Red's member reads her job waiting for "a job of another tenant" to stop.
  const std::string blue_ref = "job " + std::to_string(blue);
  Http rita(berthd.api_port());
  rita.set_token(MemberToken(admin, "rita", "red", "member", "1d"));
  auto waiting = rita.Get("/v1/jobs/" + std::to_string(red));
  ASSERT_EQ(waiting.status, 200) << waiting.text;
  EXPECT_EQ(waiting.body["reason"]["code"], "WaitingForEvictions") << waiting.text;
  EXPECT_EQ(waiting.body["reason"]["detail"], "job of another tenant") << waiting.text;
  EXPECT_EQ(waiting.text.find(blue_ref), std::string::npos) << waiting.text;

  // The CLI's berth why, as bob, in both languages.
  const std::string admin_token = admin.token();
  ::setenv("BERTH_TOKEN", bob.token().c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  for (const char* lang : {"en", "zh"}) {
    auto r = Cli(berthd, {"why", std::to_string(blue), "--lang", lang});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find(red_ref), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("作业 " + std::to_string(red)), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("other_tenant"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::string(lang) == "en" ? "job of another tenant" : "其他租户的作业"),
              std::string::npos)
        << r.out;
  }
  ::setenv("BERTH_TOKEN", admin_token.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)

  // The platform admin reads every tenant's jobs, and so the id.
  auto seen = admin.Get("/v1/jobs/" + std::to_string(blue));
  EXPECT_EQ(seen.body["reason"]["counts"]["by_job"], red) << seen.text;
  EXPECT_EQ(seen.body["reason"]["counts"]["by_job_other_tenant"], 1) << seen.text;
  EXPECT_NE(seen.body["reason"]["message"].get<std::string>().find(red_ref), std::string::npos)
      << seen.text;
}

TEST_F(AuthzTest, ATenantAdminChangesQueuesBelowItsTenantAndNothingElse) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const Http& admin = berthd.http();
  constexpr const char* kQuota = R"(queues:
  - name: default
    children:
      - name: default
  - name: red
    quota:
      gpus: {guaranteed: 4}
    children:
      - name: main
  - name: blue
    children:
      - name: main
)";
  ASSERT_EQ(admin.Post("/v1/policy", kQuota).status, 201);
  Http ruth = RedCaller(berthd, "ruth", "tenant-admin");
  Http rick = RedCaller(berthd, "rick", "member");

  // A research queue under red, within red's 4 GPUs: applied, by ruth.
  std::string research = kQuota;
  const std::string anchor = "      - name: main\n  - name: blue";
  research.replace(research.find(anchor), anchor.size(),
                   "      - name: main\n      - name: research\n        quota:\n          gpus: "
                   "{guaranteed: 2}\n  - name: blue");
  auto r = ruth.Post("/v1/policy?comment=research", research);
  ASSERT_EQ(r.status, 201) << r.text;
  auto active = admin.Get("/v1/policy");
  EXPECT_EQ(active.body.value("applied_by", ""), "ruth") << active.text;
  EXPECT_NE(active.text.find("red/research"), std::string::npos);

  // Red's own quota, and anything of blue's, are out of her reach.
  std::string more = research;
  more.replace(more.find("guaranteed: 4"), 13, "guaranteed: 8");
  r = ruth.Post("/v1/policy", more);
  EXPECT_EQ(r.status, 403) << r.text;
  EXPECT_NE(r.text.find("tenant red's own queue"), std::string::npos) << r.text;
  std::string blue = research + "      - name: sneaky\n";
  r = ruth.Post("/v1/policy", blue);
  EXPECT_EQ(r.status, 403) << r.text;
  EXPECT_NE(r.text.find("blue/sneaky"), std::string::npos) << r.text;
  // A member may not apply at all; a guarantee over red's is invalid as for anyone.
  EXPECT_EQ(rick.Post("/v1/policy", research).status, 403);
  std::string over = research;
  over.replace(over.find("{guaranteed: 2}"), 15, "{guaranteed: 9}");
  EXPECT_EQ(ruth.Post("/v1/policy", over).status, 400);
  // Rollback stays with platform admins.
  EXPECT_EQ(ruth.Post("/v1/policy/rollback?to=2", "").status, 403);
  EXPECT_EQ(admin.Get("/v1/policy").body.value("version", 0), 3);
}

TEST_F(AuthzTest, OnlyPlatformAdminsSeeOrChangeWhoATenantsJobsRunAsAndWhatTheyReach) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const Http& admin = berthd.http();
  const std::string kPolicy = std::string(kRedBlue) + R"(tenants:
  red:
    storage: [{path: /data/red-models, access: read-write}]
  blue:
    run_as: {uid: 2000900555, gid: 2000900555}
    storage: [{path: /data/blue-models, access: read-write}]
)";
  ASSERT_EQ(admin.Post("/v1/policy", kPolicy).status, 201);
  Http ruth = RedCaller(berthd, "ruth", "tenant-admin");
  Http rick = RedCaller(berthd, "rick", "member");

  // Red's people see red's entry and nothing of blue's, in every view.
  for (const Http* who : {&ruth, &rick}) {
    for (const std::string path :
         {"/v1/policy", "/v1/policy/versions/2", "/v1/policy/diff?from=1&to=2"}) {
      auto r = who->Get(path);
      ASSERT_EQ(r.status, 200) << path << r.text;
      EXPECT_EQ(r.text.find("blue-models"), std::string::npos) << path << r.text;
      EXPECT_EQ(r.text.find("2000900555"), std::string::npos) << path << r.text;
      if (path != "/v1/policy/diff?from=1&to=2") {
        EXPECT_NE(r.text.find("red-models"), std::string::npos) << path << r.text;
      }
    }
  }
  EXPECT_NE(admin.Get("/v1/policy").text.find("blue-models"), std::string::npos);

  // Ruth edits what she was shown: blue's entry stays as it was.
  std::string shown = ruth.Get("/v1/policy").body.value("yaml", "");
  ASSERT_NE(shown.find("withheld"), std::string::npos) << shown;
  const std::string anchor = "- name: main\n";
  const auto at = shown.find(anchor, shown.find("name: red"));
  ASSERT_NE(at, std::string::npos) << shown;
  std::string research = shown;
  research.insert(at + anchor.size(),
                  shown.substr(shown.rfind('\n', at) + 1, at - shown.rfind('\n', at) - 1) +
                      "- name: research\n");
  auto r = ruth.Post("/v1/policy?dry_run=true", research);
  ASSERT_EQ(r.status, 200) << r.text << research;
  EXPECT_EQ(r.text.find("blue-models"), std::string::npos) << r.text;
  r = ruth.Post("/v1/policy", research);
  ASSERT_EQ(r.status, 201) << r.text << research;
  auto active = admin.Get("/v1/policy");
  EXPECT_NE(active.text.find("red/research"), std::string::npos) << active.text;
  EXPECT_NE(active.text.find("blue-models"), std::string::npos) << active.text;
  EXPECT_NE(active.text.find("2000900555"), std::string::npos) << active.text;

  // Root for her own tenant, another storage grant, another network, or a
  // scheduler setting: a platform admin's, refused naming the change.
  struct Case {
    std::string from;
    std::string to;
    std::string says;
  };
  const std::string current = ruth.Get("/v1/policy").body.value("yaml", "");
  for (const Case& c : std::vector<Case>{
           {"  red:\n", "  red:\n    run_as: {uid: 0, gid: 0, allow_root: true}\n",
            "tenants.red.run_as"},
           {"path: /data/red-models", "path: /", "tenants.red.storage"},
           {"  red:\n", "  red:\n    container_network: host\n", "tenants.red.container_network"},
           {"  red:\n", "  red:\n    limits: {pending_jobs_per_member: 100000000}\n",
            "tenants.red.limits"},
           {"tenants:\n", "limits: {spec_bytes: 64Mi}\ntenants:\n", "the setting limits"},
           // The retry cap policy-wide bounds every tenant's jobs.
           {"tenants:\n", "retry: {max_attempts: 1}\ntenants:\n", "the setting retry"},
       }) {
    std::string changed = current;
    ASSERT_NE(changed.find(c.from), std::string::npos) << c.from << changed;
    changed.replace(changed.find(c.from), c.from.size(), c.to);
    r = ruth.Post("/v1/policy", changed);
    EXPECT_EQ(r.status, 403) << c.says << ": " << r.text << changed;
    EXPECT_NE(r.text.find(c.says), std::string::npos) << r.text;
  }
  std::string no_backfill = current;
  const auto bf = no_backfill.find("backfill: {enabled: true");
  ASSERT_NE(bf, std::string::npos) << current;
  no_backfill.replace(bf, 24, "backfill: {enabled: false");
  r = ruth.Post("/v1/policy", no_backfill);
  EXPECT_EQ(r.status, 403) << r.text;
  EXPECT_NE(r.text.find("the setting backfill"), std::string::npos) << r.text;
  EXPECT_EQ(admin.Get("/v1/policy").body.value("version", 0), 3);

  // The same retry cap on her own queue bounds only red's jobs: hers to set.
  const auto main_at = current.find(anchor, current.find("name: red"));
  ASSERT_NE(main_at, std::string::npos) << current;
  const auto line_at = current.rfind('\n', main_at) + 1;
  std::string own_retry = current;
  own_retry.insert(main_at + anchor.size(),
                   current.substr(line_at, main_at - line_at) + "  retry: {max_attempts: 1}\n");
  r = ruth.Post("/v1/policy", own_retry);
  ASSERT_EQ(r.status, 201) << r.text << own_retry;
  active = admin.Get("/v1/policy");
  EXPECT_EQ(active.body.value("version", 0), 4) << active.text;
  EXPECT_NE(active.body.value("yaml", "").find("retry: {max_attempts: 1}"), std::string::npos)
      << active.text;
}

TEST_F(AuthzTest, AMemberOverItsLimitsIsRefusedWithTheNumbersAndWhoCanRaiseThem) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const Http& admin = berthd.http();
  ASSERT_EQ(admin
                .Post("/v1/policy", std::string(kRedBlue) + R"(tenants:
  red:
    limits: {pending_jobs_per_member: 2, tokens_per_identity: 2, replicas_per_job: 2}
)")
                .status,
            201);
  Http rick = RedCaller(berthd, "rick", "member");
  Http rosa = RedCaller(berthd, "rosa", "member");
  // More GPUs than the node has: the jobs stay pending.
  auto stuck = [](const std::string& name) {
    return JobSpecJson(name, {"true"}, 64, {{"tenant", "red"}, {"queue", "main"}});
  };
  std::vector<std::int64_t> ricks;
  for (const char* name : {"a", "b"}) {
    auto r = rick.Post("/v1/jobs", stuck(name), "application/json");
    ASSERT_EQ(r.status, 201) << r.text;
    ricks.push_back(r.body.value("id", std::int64_t{0}));
  }
  auto r = rick.Post("/v1/jobs", stuck("c"), "application/json");
  EXPECT_EQ(r.status, 429) << r.text;
  const std::string says = r.body.at("error").value("message", "");
  EXPECT_NE(says.find("rick has 2 pending jobs in tenant red and this submission adds 1; the "
                      "limit is 2 per member"),
            std::string::npos)
      << r.text;
  EXPECT_NE(says.find("tenants.red.limits.pending_jobs_per_member in the policy; a platform "
                      "admin can raise it"),
            std::string::npos)
      << r.text;
  // The limit is each member's: rosa still submits; an array counts whole.
  EXPECT_EQ(rosa.Post("/v1/jobs", stuck("d"), "application/json").status, 201);
  r = rosa.Post(
      "/v1/jobs",
      JobSpecJson("sweep", {"true"}, 64, {{"tenant", "red"}, {"queue", "main"}, {"array", "0-1"}}),
      "application/json");
  EXPECT_EQ(r.status, 429) << r.text;
  EXPECT_NE(r.text.find("rosa has 1 pending jobs in tenant red and this submission adds 2"),
            std::string::npos)
      << r.text;
  r = rosa.Post(
      "/v1/jobs",
      JobSpecJson("wide", {"true"}, 0, {{"tenant", "red"}, {"queue", "main"}, {"replicas", 3}}),
      "application/json");
  EXPECT_EQ(r.status, 429) << r.text;
  EXPECT_NE(r.text.find("asks for 3 replicas; tenant red allows at most 2"), std::string::npos)
      << r.text;
  // A cancelled job frees its place.
  EXPECT_EQ(rick.Post(fmt::format("/v1/jobs/{}/cancel", ricks.at(0)), "").status, 200);
  EXPECT_EQ(rick.Post("/v1/jobs", stuck("c"), "application/json").status, 201);

  // Tokens: rick holds one (RedCaller's); a second is made, a third refused.
  auto token = [&](const Http& who) {
    return who.Post("/v1/tokens", json{{"identity", "rick"}, {"ttl", "1h"}}.dump(),
                    "application/json");
  };
  EXPECT_EQ(token(rick).status, 201);
  r = token(admin);
  EXPECT_EQ(r.status, 429) << r.text;
  EXPECT_NE(r.text.find("rick has 2 live tokens and may hold at most 2"), std::string::npos)
      << r.text;
}

}  // namespace
}  // namespace berth::it
