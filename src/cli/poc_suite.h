// `berth poc`: an acceptance suite as data (docs/poc.md). A suite is YAML:
// the tenants, queues and identities it sets up, and groups of cases, each
// with its capability, perspective, weight, risk, preconditions, re-test
// text and steps from a small vocabulary the runner (poc_run.h) interprets.
// ParseSuite checks everything it can before anything is sent: a bad suite
// is refused with the field's path (`groups[1].cases[0].steps[2].wait.within`)
// and the fix, and nothing runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace berth::cli::poc {

// What failing a case means for the launch (the three lists).
enum class Risk { kHigh, kMedium, kLow };
std::string_view RiskName(Risk risk);  // "high", "medium", "low"
// "must-fix", "limited-launch", "later-optimization".
std::string_view RiskConclusion(Risk risk);

// The capabilities and perspectives a case is scored under, in report order.
inline constexpr std::string_view kPocCapabilities[] = {
    "resource-management",  "queues-and-quota",         "orchestration",
    "inference-elasticity", "observation-and-metering", "permissions-and-audit"};
inline constexpr std::string_view kPocPerspectives[] = {"business", "platform", "operations",
                                                        "finance"};

// A tenant the suite sets up: a top-level queue of the policy named
// "<run>-<name>", with `body` (YAML: quota, over_quota, children, ...)
// beside its name.
struct TenantSetup {
  std::string name;
  std::string body;  // a YAML mapping without `name`
};

// An identity the suite creates ("<run>-<name>") with a role per tenant
// (the suite's short tenant names) and a token of its own.
struct IdentitySetup {
  std::string name;
  std::map<std::string, std::string> roles;  // tenant -> viewer|member|tenant-admin
};

// What the API must be able to show for a case to run; an unmet one makes
// the case skipped, never passed, and the skip names what was missing.
struct Preconditions {
  std::optional<std::int64_t> nodes;  // Ready nodes, at least
  std::optional<std::int64_t> gpus;   // healthy GPUs, at least
  std::optional<std::string> gpu_model;
  // At least one Ready node reports container_runtime podman (GET /v1/nodes);
  // the scheduler places a job with an image only there.
  bool podman = false;
  // GET /v1/services shows the gateway, up (its `gateway` object).
  bool gateway = false;
  // The runner's server list (--server A,B) holds the berthd that leads
  // (GET /healthz role leader) and at least one standby of the same leader
  // and term.
  bool standby = false;
  // An alert rule of this kind (budget, queue_wait, ...) is enabled in the
  // rules in force (GET /v1/alert-rules) and routed to at least one sink.
  std::string alert_sink;
};

// One condition of a request's `bind: {where: ...}`: the item's `field`
// (printed as text: a number as its digits) equals `value`, or with
// `prefix` starts with it. `value` may hold placeholders.
struct BindWhere {
  std::string field;
  std::string value;
  bool prefix = false;
};

enum class StepKind {
  kSubmit,
  kWait,
  kExpect,
  kCancel,
  kRequest,
  kAudit,
  kFailover,
  kMetered,
  kHttp,
  kBurst,
  kExpectBurst,
  kHttpLoad
};
std::string_view StepKindName(StepKind kind);

// One tenant's part of a burst: `count` jobs (times the run's --scale) of
// `spec` submitted as `as` from a thread of its own, all tenants at once.
struct BurstTenant {
  std::string tenant;  // a tenant of setup.tenants
  std::string as;      // an identity of the setup, or "admin"; one per tenant
  std::int64_t count = 0;
  // The burst's job template with this tenant's shape over it, tenant and
  // queue set; ${burst.index} (1 to count) is expanded per job.
  std::string spec;
};

// What a burst must show once submitted (docs/poc.md "Concurrent load").
// Durations are for --scale 1 and grow with it: N times the jobs on the
// same GPUs queue N times as long.
struct BurstExpectation {
  std::vector<std::string> states;  // every job ends in one of these
  std::int64_t within_ms = 0;       // all of them, from the burst's first submit
  std::optional<std::int64_t> p50_wait_ms;
  std::optional<std::int64_t> p95_wait_ms;
  // No tenant starves: each tenant's longest wait at most this.
  std::optional<std::int64_t> tenant_max_wait_ms;
  // Tenant -> its least share (parts per million) of the burst's
  // GPU-seconds while every tenant still had work waiting or running.
  std::map<std::string, std::int64_t> min_share_ppm;
  // Every job seen waiting carried a reason, and one that waited over 5s
  // a reason other than Queued.
  bool explained = true;
};

// One step. Strings may hold ${run}, ${tenant.NAME}, ${job.NAME} (a job
// bound by an earlier submit of the same case), ${ref.NAME} (the `id`, or
// `bind_field`, of an answer an earlier request of the same case bound),
// ${gpus} (the healthy GPUs GET /v1/gpus showed when the run began),
// ${gateway} (the gateway's URL as GET /v1/services shows it) and
// ${model_server} (the runner's --model-server: the model server command
// every node has), expanded when it runs.
struct Step {
  StepKind kind = StepKind::kRequest;
  std::string field;  // "groups[0].cases[1].steps[2]", for messages
  std::string as;     // an identity of the setup, or "admin" (the runner)
  // submit: binds `bind` to the new job; with `status`, expects a refusal.
  // request: binds `bind` to the answer's `bind_field` (default `id`, a
  // dotted path; ${ref.NAME}); with `bind_from` (bind: {name, from, where,
  // field}), to `bind_field` of the first item of the answer's list
  // `bind_from` (a dotted path) that meets every `bind_where`; a request
  // with `within` polls until one does.
  std::string bind;
  std::string bind_from;
  std::vector<BindWhere> bind_where;
  std::string bind_field = "id";
  std::string spec;  // YAML
  // wait, expect, cancel: the bound job.
  std::string job;
  std::vector<std::string> states;  // wait: any of these (and reason_code, if given)
  // wait; request: polls until it matches (0: once); failover: a
  // different berthd leads at a higher term within this
  std::int64_t within_ms = 0;
  // expect
  std::string state;
  std::string failure_class;
  std::string reason_code;  // wait, expect
  std::optional<std::int64_t> failures;
  // expect: the job's runs (the run ids of its placement) are the ones it
  // had when an earlier wait of the case last saw it in a wanted state: it
  // was not restarted since.
  bool same_run = false;
  // request, http
  std::string method;  // GET or POST
  std::string path;    // request: an API path; http: ${gateway}/s/...
  std::string body;
  std::optional<int> status;  // submit, request
  std::vector<std::string> contains;
  std::vector<std::string> not_contains;
  // http: `within` is the cold-start target (the call is held while the
  // service scales from zero), which the step's expectation says.
  bool cold_start = false;
  // http_load: `load_concurrency` calls of the http step kept in flight at
  // once for `load_duration_ms`, each expected as an http step's answer
  // (poc_load.h).
  std::int64_t load_concurrency = 0;
  std::int64_t load_duration_ms = 0;
  // metered: the bound job's GPU time is in its tenant's usage records,
  // whole, for this many GPUs, and priced at the price table's rate
  // (poc_meter.h).
  std::int64_t metered_gpus = 0;
  // audit: a record with this action and object (and actor) exists
  std::string action;
  std::string object;
  std::string actor;  // an identity of the setup, or "" for anyone
  // burst (named by `bind`): the tenants' parts, submitted concurrently
  std::vector<BurstTenant> burst;
  // expect_burst (the burst `job` names)
  BurstExpectation burst_expect;
};

struct Case {
  std::string id;
  std::string group;  // the group's id
  std::string title;
  std::string capability;
  std::string perspective;
  std::int64_t weight = 1;
  Risk risk = Risk::kMedium;
  Preconditions preconditions;
  std::string retest;
  std::vector<Step> steps;
};

struct Group {
  std::string id;
  std::string title;
};

struct Suite {
  std::string name;
  std::string version;
  std::vector<TenantSetup> tenants;
  std::vector<IdentitySetup> identities;
  // Policy-wide settings the run's policy version sets for its duration
  // (YAML mapping: reclaim_grace, min_runtime, ...; never queues or
  // tenants), rolled back with the rest.
  std::string policy;
  std::vector<Group> groups;
  std::vector<Case> cases;  // every group's, in order
  std::string sha256;       // of the suite's text, hex
};

// Parses and checks a suite. Errors are InvalidArgument with `field` the
// path of the offending value.
Result<Suite> ParseSuite(std::string_view text);

// The default suite (deploy/poc/default-suite.yaml, compiled in).
std::string_view DefaultSuiteText();

// The suite cut to the cases `ids` names (in the suite's order) and the
// groups that hold them; an id the suite does not have is InvalidArgument
// (field `case`) listing the ids it has.
Result<Suite> SelectCases(const Suite& suite, const std::vector<std::string>& ids);

// Lower-case hex SHA-256 of `text`.
std::string Sha256Hex(std::string_view text);

// "${run}", "${tenant.a}" and "${job.train}" replaced; an unknown tenant or
// job is an error naming the placeholder. "${ref.x}" is looked up in `jobs`
// as "ref.x", "${gpus}" as "gpus".
Result<std::string> ExpandPlaceholders(std::string_view text, std::string_view run,
                                       const std::map<std::string, std::string>& tenants,
                                       const std::map<std::string, std::string>& jobs);

}  // namespace berth::cli::poc
