// `berth poc` suites as data: the built-in suite parses and covers the five
// groups; every kind of bad suite is refused with the path of the field at
// fault and a fix; placeholders expand or say what is missing.
#include "cli/poc_suite.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/poc_run.h"

namespace berth::cli::poc {
namespace {

// A small valid suite; tests break one field of it at a time.
std::string PocSmallSuite(const std::string& wait_within = "30s",
                          const std::string& capability = "orchestration",
                          const std::string& risk = "high") {
  return "name: small\n"
         "version: 2\n"
         "setup:\n"
         "  tenants:\n"
         "    - {name: a, children: [{name: batch}]}\n"
         "  identities:\n"
         "    - {name: alice, tenants: {a: member}}\n"
         "groups:\n"
         "  - id: g1\n"
         "    title: First\n"
         "    cases:\n"
         "      - id: one\n"
         "        title: inventory\n"
         "        capability: resource-management\n"
         "        perspective: platform\n"
         "        risk: low\n"
         "        retest: berth gpus\n"
         "        steps:\n"
         "          - request: {get: /v1/gpus, contains: model}\n"
         "  - id: g2\n"
         "    title: Second\n"
         "    cases:\n"
         "      - id: two\n"
         "        title: runs\n"
         "        capability: " +
         capability +
         "\n"
         "        perspective: business\n"
         "        weight: 3\n"
         "        risk: " +
         risk +
         "\n"
         "        preconditions: {gpus: 2, podman: true}\n"
         "        retest: berth submit\n"
         "        steps:\n"
         "          - submit: {as: alice, bind: j, job: {name: x, tenant: '${tenant.a}', "
         "command: ['true']}}\n"
         "          - wait: {job: j, states: [Succeeded], within: " +
         wait_within +
         "}\n"
         "          - expect: {job: j, state: Succeeded}\n"
         "          - request: {as: alice, get: '/v1/jobs/${job.j}/logs', status: 200}\n";
}

TEST(PocSuite, TheBuiltInSuiteParsesAndCoversTheFiveGroupsAndEveryCapability) {
  auto suite = ParseSuite(DefaultSuiteText());
  ASSERT_TRUE(suite.has_value()) << suite.error().field << ": " << suite.error().message;
  std::set<std::string> groups;
  for (const auto& g : suite->groups) groups.insert(g.id);
  EXPECT_EQ(groups, (std::set<std::string>{"resource-profile", "multi-tenant-queues", "training",
                                           "inference", "fault-recovery"}));
  std::set<std::string> capabilities;
  for (const auto& c : suite->cases) capabilities.insert(c.capability);
  EXPECT_EQ(capabilities.size(), std::size(kPocCapabilities));
  EXPECT_GE(suite->cases.size(), 8U);
  EXPECT_LE(suite->cases.size(), 30U);
  // The four acceptance checks and the failure paths each have a case.
  std::set<std::string> ids;
  for (const auto& c : suite->cases) ids.insert(c.id);
  for (const char* id :
       {"priority-preempts-and-explains", "job-telemetry-recorded",
        "quota-request-approved-and-audited", "reclaim-on-guarantee", "cross-tenant-paths-refused",
        "gpu-oom-explained", "gpu-xid-explained", "nccl-failure-explained",
        "control-plane-failover", "alert-reaches-its-sink", "concurrent-multi-tenant-load"}) {
    EXPECT_TRUE(ids.contains(id)) << id;
  }
  EXPECT_NE(suite->policy.find("reclaim_grace"), std::string::npos);
  EXPECT_EQ(suite->sha256, Sha256Hex(DefaultSuiteText()));
}

TEST(PocSuite, ASmallSuiteReadsEveryField) {
  auto suite = ParseSuite(PocSmallSuite());
  ASSERT_TRUE(suite.has_value()) << suite.error().field << ": " << suite.error().message;
  EXPECT_EQ(suite->name, "small");
  EXPECT_EQ(suite->version, "2");
  ASSERT_EQ(suite->tenants.size(), 1U);
  EXPECT_EQ(suite->tenants[0].name, "a");
  EXPECT_NE(suite->tenants[0].body.find("batch"), std::string::npos);
  ASSERT_EQ(suite->identities.size(), 1U);
  EXPECT_EQ(suite->identities[0].roles.at("a"), "member");
  ASSERT_EQ(suite->cases.size(), 2U);
  const Case& two = suite->cases[1];
  EXPECT_EQ(two.group, "g2");
  EXPECT_EQ(two.weight, 3);
  EXPECT_EQ(two.risk, Risk::kHigh);
  EXPECT_EQ(two.preconditions.gpus, 2);
  EXPECT_TRUE(two.preconditions.podman);
  ASSERT_EQ(two.steps.size(), 4U);
  EXPECT_EQ(two.steps[0].kind, StepKind::kSubmit);
  EXPECT_EQ(two.steps[0].as, "alice");
  EXPECT_EQ(two.steps[0].bind, "j");
  EXPECT_NE(two.steps[0].spec.find("${tenant.a}"), std::string::npos);
  EXPECT_EQ(two.steps[1].within_ms, 30'000);
  EXPECT_EQ(two.steps[2].as, "admin");  // the runner's own, by default
  EXPECT_EQ(two.steps[3].status, 200);
  EXPECT_EQ(two.steps[1].field, "groups[1].cases[0].steps[1]");
  EXPECT_EQ(suite->cases[0].weight, 1);  // the default weight
}

struct PocBadSuite {
  std::string text;
  std::string field;
  std::string says;  // part of the message: the fix
};

TEST(PocSuite, BadSuitesNameTheFieldAndTheFix) {
  const std::string good = PocSmallSuite();
  auto replace = [&good](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
    return s;
  };
  const PocBadSuite cases[] = {
      {PocSmallSuite("soon"), "groups[1].cases[0].steps[1].wait.within", "30s"},
      {PocSmallSuite("2h"), "groups[1].cases[0].steps[1].wait.within", "1h"},
      {PocSmallSuite("30s", "speed"), "groups[1].cases[0].capability", "resource-management"},
      {PocSmallSuite("30s", "orchestration", "urgent"), "groups[1].cases[0].risk", "must-fix"},
      {replace("wait: {job: j,", "wait: {job: k,"), "groups[1].cases[0].steps[1].wait.job",
       "earlier submit"},
      {replace("${job.j}", "${job.nope}"), "groups[1].cases[0].steps[3].request", "earlier submit"},
      {replace("${tenant.a}", "${tenant.z}"), "groups[1].cases[0].steps[0].submit.job",
       "setup.tenants"},
      {replace("${tenant.a}", "${tenants.a}"), "groups[1].cases[0].steps[0].submit.job", "${run}"},
      {replace("as: alice, bind", "as: mallory, bind"), "groups[1].cases[0].steps[0].submit.as",
       "setup.identities"},
      {replace("request: {get: /v1/gpus", "fetch: {get: /v1/gpus"),
       "groups[0].cases[0].steps[0].fetch", "submit, wait"},
      {replace("states: [Succeeded]", "states: [Done]"),
       "groups[1].cases[0].steps[1].wait.states[0]", "Succeeded"},
      {replace("get: /v1/gpus", "get: v1/gpus"), "groups[0].cases[0].steps[0].request.get",
       "starting with '/'"},
      {replace("status: 200", "status: 2000"), "groups[1].cases[0].steps[3].request.status",
       "100 to 599"},
      {replace("        retest: berth gpus\n", ""), "groups[0].cases[0].retest", "required"},
      {replace("perspective: platform", "perspective: marketing"), "groups[0].cases[0].perspective",
       "finance"},
      {replace("weight: 3", "weight: 0"), "groups[1].cases[0].weight", "1 to 100"},
      {replace("{gpus: 2, podman: true}", "{gpus: 2, podman: maybe}"),
       "groups[1].cases[0].preconditions.podman", "true or false"},
      {replace("{gpus: 2, podman: true}", "{gpus: 2, cuda: 12}"),
       "groups[1].cases[0].preconditions.cuda", "gpu_model"},
      {replace("{a: member}", "{a: owner}"), "setup.identities[0].tenants.a", "viewer"},
      {replace("{gpus: 2, podman: true}", "{gpus: 2, alert_sink: pager}"),
       "groups[1].cases[0].preconditions.alert_sink", "budget"},
      {replace("setup:\n", "setup:\n  policy: {queues: []}\n"), "setup.policy.queues",
       "setup.tenants"},
      {replace("setup:\n", "setup:\n  policy: 6h\n"), "setup.policy", "reclaim_grace"},
      {replace("${job.j}/logs'", "${ref.r}/logs'"), "groups[1].cases[0].steps[3].request",
       "request: {bind: NAME}"},
      {replace("status: 200}", "status: 404, bind: r}"), "groups[1].cases[0].steps[3].request.bind",
       "refused"},
      {replace("status: 200}", "within: soon}"), "groups[1].cases[0].steps[3].request.within",
       "30s"},
      {replace("{a: member}", "{c: member}"), "setup.identities[0].tenants.c", "setup.tenants"},
      {replace("id: two", "id: one"), "groups[1].cases[0].id", "another case"},
      {replace("id: two", "id: Two!"), "groups[1].cases[0].id", "a-z"},
      {replace("expect: {job: j, state: Succeeded}", "expect: {job: j}"),
       "groups[1].cases[0].steps[2].expect", "failure_class"},
      {replace("name: small\n", "name: small\ncolour: red\n"), "colour", "unknown field"},
      {"groups: [\n", "", "not YAML"},
      {"- a\n- b\n", "", "mapping"},
  };
  for (const auto& bad : cases) {
    auto suite = ParseSuite(bad.text);
    ASSERT_FALSE(suite.has_value()) << bad.field;
    EXPECT_EQ(suite.error().code, Code::kInvalidArgument);
    EXPECT_EQ(suite.error().field, bad.field) << suite.error().message;
    EXPECT_NE(suite.error().message.find(bad.says), std::string::npos)
        << bad.field << ": " << suite.error().message;
  }
}

TEST(PocSuite, PlaceholdersExpandOrSayWhatIsMissing) {
  const std::map<std::string, std::string> tenants{{"a", "poc-x-a"}};
  const std::map<std::string, std::string> jobs{{"j", "42"}};
  auto text =
      ExpandPlaceholders("${run}: /v1/jobs/${job.j} of ${tenant.a}", "poc-x", tenants, jobs);
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(*text, "poc-x: /v1/jobs/42 of poc-x-a");
  auto missing = ExpandPlaceholders("${job.k}", "poc-x", tenants, jobs);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("job.k"), std::string::npos);
  EXPECT_FALSE(ExpandPlaceholders("${other}", "poc-x", tenants, jobs).has_value());
  EXPECT_EQ(*ExpandPlaceholders("no placeholder $HOME", "r", tenants, jobs),
            "no placeholder $HOME");
}

TEST(PocSuite, RequestsBindAnIdPollAndTheGpuCountExpands) {
  std::string text = PocSmallSuite();
  const std::string from = "status: 200}\n";
  text.replace(text.find(from), from.size(),
               "status: 200, bind: r, within: 5s}\n"
               "          - request: {post: '/v1/quota-requests/${ref.r}/approve', body: '{}'}\n"
               "          - submit: {as: alice, job: {name: y, tenant: '${tenant.a}', "
               "replicas: '${gpus}', command: ['true']}}\n");
  auto suite = ParseSuite(text);
  ASSERT_TRUE(suite.has_value()) << suite.error().field << ": " << suite.error().message;
  const Case& two = suite->cases[1];
  ASSERT_EQ(two.steps.size(), 6U);
  EXPECT_EQ(two.steps[3].bind, "r");
  EXPECT_EQ(two.steps[3].within_ms, 5'000);
  EXPECT_EQ(two.steps[4].method, "POST");
  const std::map<std::string, std::string> tenants{{"a", "poc-x-a"}};
  const std::map<std::string, std::string> values{{"ref.r", "7"}, {"gpus", "8"}};
  EXPECT_EQ(*ExpandPlaceholders("/v1/quota-requests/${ref.r} of ${gpus}", "poc-x", tenants, values),
            "/v1/quota-requests/7 of 8");
}

// bind: {name, from, where, field}: a value picked from a list in the
// answer (an alert's id among the alerts), then used by a later step.
std::string PocListBindSuite(const std::string& bind) {
  std::string text = PocSmallSuite();
  const std::string from = "status: 200}\n";
  text.replace(text.find(from), from.size(),
               "status: 200}\n"
               "          - request:\n"
               "              get: /v1/alerts\n"
               "              within: 5s\n"
               "              bind: " +
                   bind +
                   "\n"
                   "          - request: {get: /v1/alert-deliveries, contains: ['${ref.mine}']}\n");
  return text;
}

TEST(PocSuite, ARequestBindsAFieldOfAnItemOfAListInItsAnswer) {
  auto suite = ParseSuite(
      PocListBindSuite("{name: mine, from: alerts, where: {kind: budget, subject: {starts_with: "
                       "'${tenant.a}/'}}, field: id}"));
  ASSERT_TRUE(suite.has_value()) << suite.error().field << ": " << suite.error().message;
  const Step& step = suite->cases[1].steps[4];
  EXPECT_EQ(step.bind, "mine");
  EXPECT_EQ(step.bind_from, "alerts");
  EXPECT_EQ(step.bind_field, "id");
  ASSERT_EQ(step.bind_where.size(), 2U);
  EXPECT_EQ(step.bind_where[0].field, "kind");
  EXPECT_EQ(step.bind_where[0].value, "budget");
  EXPECT_FALSE(step.bind_where[0].prefix);
  EXPECT_EQ(step.bind_where[1].field, "subject");
  EXPECT_EQ(step.bind_where[1].value, "${tenant.a}/");
  EXPECT_TRUE(step.bind_where[1].prefix);
  // field defaults to id; where is optional (the first item).
  auto plain = ParseSuite(PocListBindSuite("{name: mine, from: alerts}"));
  ASSERT_TRUE(plain.has_value()) << plain.error().message;
  EXPECT_EQ(plain->cases[1].steps[4].bind_field, "id");
  EXPECT_TRUE(plain->cases[1].steps[4].bind_where.empty());
  // A plain name still binds the answer's own id.
  auto own = ParseSuite(PocListBindSuite("mine"));
  ASSERT_TRUE(own.has_value());
  EXPECT_TRUE(own->cases[1].steps[4].bind_from.empty());
}

TEST(PocSuite, ABadListBindNamesTheFieldAndTheFix) {
  const std::string at = "groups[1].cases[0].steps[4].request.bind";
  const PocBadSuite cases[] = {
      {PocListBindSuite("{name: mine, where: {kind: budget}}"), at + ".from", "from: alerts"},
      {PocListBindSuite("{name: mine, from: ''}"), at + ".from", "bind: NAME"},
      {PocListBindSuite("{from: alerts}"), at + ".name", "required"},
      {PocListBindSuite("{name: Mine!, from: alerts}"), at + ".name", "a-z"},
      {PocListBindSuite("{name: mine, from: alerts, pick: id}"), at + ".pick", "unknown field"},
      {PocListBindSuite("{name: mine, from: alerts, where: {kind: [a, b]}}"), at + ".where.kind",
       "starts_with"},
      {PocListBindSuite("{name: mine, from: alerts, where: {subject: {ends_with: x}}}"),
       at + ".where.subject", "starts_with"},
      {PocListBindSuite("{name: mine, from: alerts, where: {}}"), at + ".where", "drop where"},
      {PocListBindSuite("{name: mine, from: alerts, where: {subject: '${ref.none}'}}"),
       at + ".where.subject", "earlier request"},
      {PocListBindSuite("[mine]"), at, "{name: x, from: LIST"},
  };
  for (const auto& bad : cases) {
    auto suite = ParseSuite(bad.text);
    ASSERT_FALSE(suite.has_value()) << bad.field;
    EXPECT_EQ(suite.error().field, bad.field) << suite.error().message;
    EXPECT_NE(suite.error().message.find(bad.says), std::string::npos)
        << bad.field << ": " << suite.error().message;
  }
}

TEST(PocSuite, APickedValueIsTheFirstMatchingItemsField) {
  const nlohmann::json answer = {
      {"alerts",
       {{{"id", 3}, {"kind", "budget"}, {"subject", "poc-y-a/2026-12/100"}},
        {{"id", 5}, {"kind", "queue_wait"}, {"subject", "poc-x-a/batch"}},
        {{"id", 7}, {"kind", "budget"}, {"subject", "poc-x-a/2026-12/100"}},
        {{"id", 9}, {"kind", "budget"}, {"subject", "poc-x-a/2026-12/200"}}}}};
  std::string why;
  const std::vector<BindWhere> mine{{"kind", "budget", false}, {"subject", "poc-x-a/", true}};
  EXPECT_EQ(PickBoundValue(answer, "alerts", mine, "id", why), "7") << why;
  // Numbers match as their digits (a delivery's alert_id against ${ref.x}).
  EXPECT_EQ(PickBoundValue(answer, "alerts", {{"id", "9", false}}, "subject", why),
            "poc-x-a/2026-12/200");
  EXPECT_EQ(PickBoundValue(answer, "alerts", {}, "id", why), "3");
  EXPECT_FALSE(
      PickBoundValue(answer, "alerts", {{"kind", "budget", false}, {"id", "5", false}}, "id", why)
          .has_value());
  EXPECT_NE(why.find("no item of alerts matched, of 4"), std::string::npos) << why;
  EXPECT_FALSE(PickBoundValue(answer, "deliveries", mine, "id", why).has_value());
  EXPECT_NE(why.find("no list deliveries"), std::string::npos) << why;
  EXPECT_FALSE(PickBoundValue(answer, "alerts", mine, "rule", why).has_value());
  EXPECT_NE(why.find("has no rule"), std::string::npos) << why;
}

TEST(PocSuite, AMeteredStepNamesAWaitedJobAndItsGpus) {
  std::string text = PocSmallSuite();
  const std::string after = "          - expect: {job: j, state: Succeeded}\n";
  auto with = [&](const std::string& step) {
    std::string t = text;
    t.insert(t.find(after) + after.size(), "          - metered: " + step + "\n");
    return t;
  };
  auto suite = ParseSuite(with("{job: j, gpus: 2}"));
  ASSERT_TRUE(suite.has_value()) << suite.error().field << ": " << suite.error().message;
  const Step& m = suite->cases[1].steps[3];
  EXPECT_EQ(m.kind, StepKind::kMetered);
  EXPECT_EQ(StepKindName(m.kind), "metered");
  EXPECT_EQ(m.job, "j");
  EXPECT_EQ(m.metered_gpus, 2);
  const std::string at = "groups[1].cases[0].steps[3].metered";
  const PocBadSuite cases[] = {
      {with("{job: j}"), at + ".gpus", "the GPUs the job asked for"},
      {with("{job: j, gpus: 0}"), at + ".gpus", "1 to 1024"},
      {with("{job: k, gpus: 1}"), at + ".job", "earlier submit"},
      {with("{job: j, gpus: 1, price: 2}"), at + ".price", "unknown field"},
  };
  for (const auto& bad : cases) {
    auto s2 = ParseSuite(bad.text);
    ASSERT_FALSE(s2.has_value()) << bad.field;
    EXPECT_EQ(s2.error().field, bad.field) << s2.error().message;
    EXPECT_NE(s2.error().message.find(bad.says), std::string::npos)
        << bad.field << ": " << s2.error().message;
  }
  // Metered before it has run: wait for it first.
  std::string early = text;
  const std::string wait = "          - wait: {job: j,";
  early.insert(early.find(wait), "          - metered: {job: j, gpus: 1}\n");
  auto refused = ParseSuite(early);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "groups[1].cases[0].steps[1].metered.job");
  EXPECT_NE(refused.error().message.find("wait for it first"), std::string::npos);
}

TEST(PocSuite, SelectingCasesKeepsTheirGroupsAndRefusesUnknownIds) {
  auto suite = ParseSuite(PocSmallSuite());
  ASSERT_TRUE(suite.has_value());
  auto two = SelectCases(*suite, {"two"});
  ASSERT_TRUE(two.has_value());
  ASSERT_EQ(two->cases.size(), 1U);
  EXPECT_EQ(two->cases[0].id, "two");
  ASSERT_EQ(two->groups.size(), 1U);
  EXPECT_EQ(two->groups[0].id, "g2");
  EXPECT_EQ(two->identities.size(), 1U);  // the setup stays whole
  auto both = SelectCases(*suite, {"two", "one"});
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->cases[0].id, "one");  // the suite's order
  auto bad = SelectCases(*suite, {"three"});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "case");
  EXPECT_NE(bad.error().message.find("one, two"), std::string::npos) << bad.error().message;
}

TEST(PocSuite, TheSuiteHashIsSha256OfItsText) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto a = ParseSuite(PocSmallSuite());
  auto b = ParseSuite(PocSmallSuite() + "# a comment changes the hash\n");
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->sha256, b->sha256);
}

TEST(PocSuite, RisksMapToTheThreeConclusions) {
  EXPECT_EQ(RiskConclusion(Risk::kHigh), "must-fix");
  EXPECT_EQ(RiskConclusion(Risk::kMedium), "limited-launch");
  EXPECT_EQ(RiskConclusion(Risk::kLow), "later-optimization");
}

// The small suite's second case with a standby, a failover and an expect
// that the job kept its run.
std::string PocFailoverSuite(const std::string& failover, const std::string& expect,
                             const std::string& preconditions = "{standby: true}") {
  std::string text = PocSmallSuite();
  auto swap = [&text](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
  };
  swap("{gpus: 2, podman: true}", preconditions);
  swap("          - expect: {job: j, state: Succeeded}\n",
       "          - failover: " + failover + "\n          - expect: " + expect + "\n");
  return text;
}

TEST(PocSuite, AFailoverStepReadsItsLimitAndAnExpectItsSameRun) {
  auto suite = ParseSuite(PocFailoverSuite("{within: 45s}",
                                           "{as: alice, job: j, state: Running, "
                                           "same_run: true}"));
  ASSERT_TRUE(suite.has_value()) << suite.error().field << ": " << suite.error().message;
  const Case& two = suite->cases[1];
  EXPECT_TRUE(two.preconditions.standby);
  ASSERT_EQ(two.steps.size(), 5U);
  EXPECT_EQ(two.steps[2].kind, StepKind::kFailover);
  EXPECT_EQ(StepKindName(two.steps[2].kind), "failover");
  EXPECT_EQ(two.steps[2].within_ms, 45'000);
  EXPECT_EQ(two.steps[3].kind, StepKind::kExpect);
  EXPECT_TRUE(two.steps[3].same_run);
  // same_run alone is an expectation.
  EXPECT_TRUE(ParseSuite(PocFailoverSuite("{within: 1m}", "{job: j, same_run: true}")));
}

TEST(PocSuite, ABadFailoverStepNamesTheFieldAndTheFix) {
  // The built-in suite's failover case has one; its command never comes
  // from a suite.
  auto built_in = ParseSuite(DefaultSuiteText());
  ASSERT_TRUE(built_in.has_value());
  bool found = false;
  for (const auto& c : built_in->cases) {
    for (const auto& s : c.steps) found = found || s.kind == StepKind::kFailover;
  }
  EXPECT_TRUE(found);
  const std::string expect = "{job: j, state: Running, same_run: true}";
  const PocBadSuite cases[] = {
      {PocFailoverSuite("{within: soon}", expect), "groups[1].cases[0].steps[2].failover.within",
       "30s"},
      {PocFailoverSuite("{within: 2h}", expect), "groups[1].cases[0].steps[2].failover.within",
       "1h"},
      {PocFailoverSuite("{}", expect), "groups[1].cases[0].steps[2].failover.within", "required"},
      {PocFailoverSuite("{within: 30s, command: 'kill 1'}", expect),
       "groups[1].cases[0].steps[2].failover.command", "unknown field"},
      {PocFailoverSuite("{within: 30s}", expect, "{gpus: 2}"),
       "groups[1].cases[0].steps[2].failover", "standby: true"},
      {PocFailoverSuite("{within: 30s}", "{job: j, same_run: maybe}"),
       "groups[1].cases[0].steps[3].expect.same_run", "true or false"},
  };
  for (const auto& bad : cases) {
    auto suite = ParseSuite(bad.text);
    ASSERT_FALSE(suite.has_value()) << bad.field;
    EXPECT_EQ(suite.error().field, bad.field) << suite.error().message;
    EXPECT_NE(suite.error().message.find(bad.says), std::string::npos)
        << bad.field << ": " << suite.error().message;
  }
  // same_run compares with what an earlier wait saw: without one, refused.
  std::string unwaited = PocFailoverSuite("{within: 30s}", expect);
  const std::string wait = "          - wait: {job: j, states: [Succeeded], within: 30s}\n";
  unwaited.erase(unwaited.find(wait), wait.size());
  auto refused = ParseSuite(unwaited);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "groups[1].cases[0].steps[2].expect.same_run");
  EXPECT_NE(refused.error().message.find("add a wait for 'j'"), std::string::npos)
      << refused.error().message;
}

// The small suite with `steps` added after its last step.
std::string PocSuiteWith(const std::string& steps) {
  std::string text = PocSmallSuite();
  const std::string from = "status: 200}\n";
  text.replace(text.find(from), from.size(), "status: 200}\n" + steps);
  return text;
}

TEST(PocSuite, AnHttpStepCallsTheGatewayAsAnIdentityAndARequestBindsAnyField) {
  auto suite = ParseSuite(PocSuiteWith(
      "          - request: {as: alice, get: '/v1/services/${tenant.a}/s', bind: cold, "
      "bind_field: status.last_cold_start.job}\n"
      "          - http: {as: alice, post: '${gateway}/s/${tenant.a}/s/v1/completions', "
      "body: '{\"prompt\": \"${ref.cold}\"}', within: 90s, contains: [text_completion]}\n"
      "          - http: {as: alice, get: '${gateway}/s/x/y/', status: 404}\n"));
  ASSERT_TRUE(suite.has_value()) << suite.error().field << ": " << suite.error().message;
  const Case& two = suite->cases[1];
  ASSERT_EQ(two.steps.size(), 7U);
  EXPECT_EQ(two.steps[4].bind_field, "status.last_cold_start.job");
  EXPECT_EQ(two.steps[3].bind_field, "id");  // the default
  EXPECT_EQ(two.steps[5].kind, StepKind::kHttp);
  EXPECT_EQ(StepKindName(two.steps[5].kind), "http");
  EXPECT_EQ(two.steps[5].method, "POST");
  EXPECT_EQ(two.steps[5].as, "alice");
  EXPECT_EQ(two.steps[5].within_ms, 90'000);
  EXPECT_EQ(two.steps[5].status, 200);
  EXPECT_EQ(two.steps[6].method, "GET");
  EXPECT_EQ(two.steps[6].within_ms, 120'000);  // a request held at zero may take a while
  EXPECT_EQ(two.steps[6].status, 404);
  const std::map<std::string, std::string> tenants{{"a", "poc-x-a"}};
  const std::map<std::string, std::string> values{{"gateway", "http://127.0.0.1:8480"},
                                                  {"model_server", "berth-model-server"}};
  EXPECT_EQ(*ExpandPlaceholders("${gateway}/s/${tenant.a}/s/ runs ${model_server}", "poc-x",
                                tenants, values),
            "http://127.0.0.1:8480/s/poc-x-a/s/ runs berth-model-server");
  // Without a gateway there is nothing to call: the runner skips the case
  // first (precondition gateway), and an expansion says so.
  EXPECT_FALSE(ExpandPlaceholders("${gateway}/s/", "poc-x", tenants, {}).has_value());
}

TEST(PocSuite, ABadHttpStepNamesTheFieldAndTheFix) {
  const PocBadSuite cases[] = {
      {PocSuiteWith("          - http: {get: '${gateway}/s/a/b/'}\n"),
       "groups[1].cases[0].steps[4].http.as", "identity whose token"},
      {PocSuiteWith("          - http: {as: admin, get: '${gateway}/s/a/b/'}\n"),
       "groups[1].cases[0].steps[4].http.as", "no identity of setup.identities"},
      {PocSuiteWith("          - http: {as: alice, get: /s/a/b/}\n"),
       "groups[1].cases[0].steps[4].http.get", "${gateway}/s/TENANT/SERVICE/PATH"},
      // A token goes to berthd's gateway only, never to a host the suite names.
      {PocSuiteWith("          - http: {as: alice, get: 'http://collector.example/s/a/b/'}\n"),
       "groups[1].cases[0].steps[4].http.get", "gateway only"},
      {PocSuiteWith("          - http: {as: alice}\n"), "groups[1].cases[0].steps[4].http.get",
       "is required"},
      {PocSuiteWith("          - http: {as: alice, get: '${gateway}/s/a/b/', within: 2h}\n"),
       "groups[1].cases[0].steps[4].http.within", "1h"},
      {PocSuiteWith("          - http: {as: alice, get: '${gateway}/s/a/b/', bind: x}\n"),
       "groups[1].cases[0].steps[4].http.bind", "unknown field"},
      {PocSuiteWith("          - http: {as: alice, get: '${gatway}/s/a/b/'}\n"),
       "groups[1].cases[0].steps[4].http.get", "${gateway}"},
      {PocSuiteWith("          - request: {get: /v1/services, bind_field: gateway.url}\n"),
       "groups[1].cases[0].steps[4].request.bind_field", "give bind too"},
  };
  for (const auto& bad : cases) {
    auto suite = ParseSuite(bad.text);
    ASSERT_FALSE(suite.has_value()) << bad.field;
    EXPECT_EQ(suite.error().field, bad.field) << suite.error().message;
    EXPECT_NE(suite.error().message.find(bad.says), std::string::npos)
        << bad.field << ": " << suite.error().message;
  }
}

TEST(PocSuite, AnHttpLoadKeepsCallsInFlightAndAnHttpStepNamesItsColdStartTarget) {
  auto suite = ParseSuite(PocSuiteWith(
      "          - http: {as: alice, post: '${gateway}/s/${tenant.a}/s/v1/completions', "
      "within: 10s, cold_start: true}\n"
      "          - http_load: {as: alice, post: '${gateway}/s/${tenant.a}/s/v1/completions', "
      "body: '{\"max_tokens\": 2}', concurrency: 4, duration: 8s, contains: [text_completion]}\n"));
  ASSERT_TRUE(suite.has_value()) << suite.error().field << ": " << suite.error().message;
  const Case& two = suite->cases[1];
  ASSERT_EQ(two.steps.size(), 6U);
  EXPECT_EQ(two.steps[4].kind, StepKind::kHttp);
  EXPECT_TRUE(two.steps[4].cold_start);
  EXPECT_EQ(two.steps[4].within_ms, 10'000);
  const Step& load = two.steps[5];
  EXPECT_EQ(load.kind, StepKind::kHttpLoad);
  EXPECT_EQ(StepKindName(load.kind), "http_load");
  EXPECT_FALSE(load.cold_start);
  EXPECT_EQ(load.method, "POST");
  EXPECT_EQ(load.as, "alice");
  EXPECT_EQ(load.load_concurrency, 4);
  EXPECT_EQ(load.load_duration_ms, 8'000);
  EXPECT_EQ(load.status, 200);
  EXPECT_EQ(load.contains, std::vector<std::string>{"text_completion"});
  EXPECT_EQ(load.body, "{\"max_tokens\": 2}");
}

TEST(PocSuite, ABadHttpLoadNamesTheFieldAndTheFix) {
  const std::string url = "post: '${gateway}/s/a/b/'";
  const PocBadSuite cases[] = {
      {PocSuiteWith("          - http_load: {as: alice, " + url + ", duration: 5s}\n"),
       "groups[1].cases[0].steps[4].http_load.concurrency", "is required"},
      {PocSuiteWith("          - http_load: {as: alice, " + url +
                    ", concurrency: 65, "
                    "duration: 5s}\n"),
       "groups[1].cases[0].steps[4].http_load.concurrency", "64"},
      {PocSuiteWith("          - http_load: {as: alice, " + url + ", concurrency: 2}\n"),
       "groups[1].cases[0].steps[4].http_load.duration", "is required"},
      {PocSuiteWith("          - http_load: {as: alice, " + url +
                    ", concurrency: 2, "
                    "duration: 500ms}\n"),
       "groups[1].cases[0].steps[4].http_load.duration", "1s to 10m"},
      // The same rule as http: tokens go to berthd's gateway only.
      {PocSuiteWith("          - http_load: {as: alice, post: 'http://collector.example/x', "
                    "concurrency: 2, duration: 5s}\n"),
       "groups[1].cases[0].steps[4].http_load.post", "gateway only"},
      {PocSuiteWith("          - http_load: {as: alice, " + url +
                    ", concurrency: 2, "
                    "duration: 5s, cold_start: true}\n"),
       "groups[1].cases[0].steps[4].http_load.cold_start", "http step"},
      {PocSuiteWith("          - http_load: {as: alice, " + url +
                    ", concurrency: 2, "
                    "duration: 5s, bind: x}\n"),
       "groups[1].cases[0].steps[4].http_load.bind", "unknown field"},
      {PocSuiteWith("          - http: {as: alice, " + url + ", cold_start: true}\n"),
       "groups[1].cases[0].steps[4].http.within", "cold-start target"},
  };
  for (const auto& bad : cases) {
    auto suite = ParseSuite(bad.text);
    ASSERT_FALSE(suite.has_value()) << bad.field;
    EXPECT_EQ(suite.error().field, bad.field) << suite.error().message;
    EXPECT_NE(suite.error().message.find(bad.says), std::string::npos)
        << bad.field << ": " << suite.error().message;
  }
}

}  // namespace
}  // namespace berth::cli::poc
