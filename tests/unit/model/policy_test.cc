#include "model/policy.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "model/job.h"
#include "model/json.h"
#include "model/reason.h"

namespace berth::model {
namespace {

constexpr const char* kPolicyExample = R"(
usage_half_life: 1h
min_runtime: 10m
pools: [{name: training, selector: {pool: training}}, {name: inference, selector: {pool: inference}}]
priority_classes: [{name: low, value: 0}, {name: normal, value: 100}, {name: high, value: 200, preemptible: false}]
queues:
  - name: vision
    pools: [training]
    quota:
      gpus: {guaranteed: 16, borrow_limit: 8, weight: 2, lending_limit: 4}
      gpus/H100-80GB: {guaranteed: 8}
      memory: {guaranteed: 1Ti}
      cpu: {guaranteed: 0.5}
    over_quota: borrow
    children:
      - name: training
        quota: {gpus: {guaranteed: 12}}
      - name: serving
        kind: inference
        preemptible: false
        quota: {gpus: 0.5}
)";

const ResourceKey kGpus{ResourceKind::kGpus, ""};

// A top-level retry cap, one on a parent queue and one on a child.
constexpr const char* kRetryCapPolicy = R"(
retry: {max_attempts: 3}
queues:
  - name: ml
    retry: {max_attempts: 1}
    children:
      - {name: training}
      - {name: sweeps, retry: {max_attempts: 5}}
  - name: vision
    children: [{name: training}]
)";

TEST(Policy, ReclaimGraceHasADefaultAndRoundTrips) {
  auto d = ParsePolicy("min_runtime: 5m\n");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->reclaim_grace_ms, kDefaultReclaimGraceMs);
  auto p = ParsePolicy("reclaim_grace: 10m\n");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ(p->reclaim_grace_ms, 600'000);
  const std::string yaml = PolicyToYaml(*p);
  EXPECT_NE(yaml.find("reclaim_grace: 10m"), std::string::npos) << yaml;
  auto again = ParsePolicy(yaml);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->reclaim_grace_ms, 600'000);
  auto none = ParsePolicy("reclaim_grace: 0s\n");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->reclaim_grace_ms, 0);
}

TEST(Policy, AnInteractiveQueueMayCapItsSessionsLifetime) {
  auto p = ParsePolicy(
      "queues:\n  - name: ml\n    children:\n      - {name: notebooks, kind: interactive, "
      "max_session_lifetime: 8h}\n      - {name: training}\n");
  ASSERT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  ASSERT_NE(p->FindQueue("ml/notebooks"), nullptr);
  EXPECT_EQ(p->FindQueue("ml/notebooks")->max_session_lifetime_ms,
            std::optional<std::int64_t>(8 * 3'600'000));
  EXPECT_FALSE(p->FindQueue("ml/training")->max_session_lifetime_ms.has_value());
  const std::string yaml = PolicyToYaml(*p);
  EXPECT_NE(yaml.find("max_session_lifetime: 8h"), std::string::npos) << yaml;
  auto again = ParsePolicy(yaml);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->FindQueue("ml/notebooks")->max_session_lifetime_ms,
            p->FindQueue("ml/notebooks")->max_session_lifetime_ms);
  for (const auto& [queue, field] : std::vector<std::pair<std::string, std::string>>{
           {"{name: t, max_session_lifetime: 8h}", "queues[0].children[0].max_session_lifetime"},
           {"{name: n, kind: interactive, max_session_lifetime: 10s}",
            "queues[0].children[0].max_session_lifetime"},
           {"{name: n, kind: interactive, max_session_lifetime: 31d}",
            "queues[0].children[0].max_session_lifetime"}}) {
    auto bad = ParsePolicy("queues:\n  - name: ml\n    children:\n      - " + queue + "\n");
    ASSERT_FALSE(bad.has_value()) << queue;
    EXPECT_EQ(bad.error().field, field) << queue << ": " << bad.error().message;
  }
}

TEST(Policy, ShortFirstMaxWaitHasADefaultAndRoundTrips) {
  auto d = ParsePolicy("min_runtime: 5m\n");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->short_first_max_wait_ms, kDefaultShortFirstMaxWaitMs);
  auto p = ParsePolicy("short_first_max_wait: 2d\n");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ(p->short_first_max_wait_ms, 2 * 86'400'000);
  const std::string yaml = PolicyToYaml(*p);
  EXPECT_NE(yaml.find("short_first_max_wait: 48h"), std::string::npos) << yaml;
  auto again = ParsePolicy(yaml);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->short_first_max_wait_ms, 2 * 86'400'000);
  auto off = ParsePolicy("short_first_max_wait: 0s\n");
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ(off->short_first_max_wait_ms, 0);
  EXPECT_FALSE(ParsePolicy("short_first_max_wait: soon\n").has_value());
}

TEST(Policy, ParsesTheDocumentedExample) {
  auto p = ParsePolicy(kPolicyExample);
  ASSERT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  EXPECT_EQ(p->usage_half_life_ms, 3'600'000);
  EXPECT_EQ(p->min_runtime_ms, 600'000);
  ASSERT_EQ(p->pools.size(), 2U);
  EXPECT_EQ(p->pools[1].selector.at("pool"), "inference");
  ASSERT_EQ(p->priority_classes.size(), 3U);
  EXPECT_FALSE(p->FindPriorityClass("high")->preemptible);
  ASSERT_EQ(p->queues.size(), 3U);
  const QueuePolicy* v = p->FindQueue("vision");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->tenant, "vision");
  EXPECT_EQ(v->parent, "");
  const Quota& g = v->quota.at(kGpus);
  EXPECT_EQ(g.guaranteed, 16'000);
  EXPECT_EQ(g.borrow_limit, 8'000);
  EXPECT_EQ(g.weight, 2);
  EXPECT_EQ(g.lending_limit, 4'000);
  EXPECT_EQ(v->quota.at({ResourceKind::kGpus, "H100-80GB"}).guaranteed, 8'000);
  EXPECT_EQ(v->quota.at({ResourceKind::kMemory, ""}).guaranteed, 1LL << 40);
  EXPECT_EQ(v->quota.at({ResourceKind::kCpu, ""}).guaranteed, 500);
  const QueuePolicy* s = p->FindQueue("vision/serving");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->parent, "vision");
  EXPECT_EQ(s->tenant, "vision");
  EXPECT_EQ(s->kind, "inference");
  EXPECT_FALSE(s->preemptible_by_default);
  EXPECT_EQ(s->quota.at(kGpus).guaranteed, 500);  // fractional GPUs in milli-GPUs
  EXPECT_FALSE(s->quota.at(kGpus).borrow_limit.has_value());
}

TEST(Policy, AFieldGivenTwiceIsRefused) {
  struct Case {
    const char* yaml;
    const char* field;
  };
  for (const Case& c : {
           Case{"backfill: {enabled: true, enabled: false}\n", "backfill.enabled"},
           Case{"queues:\n  - name: a\n    name: b\n", "queues[0].name"},
           Case{"queues:\n  - name: a\n    quota: {gpus: 8, gpus: 16}\n", "queues[0].quota.gpus"},
       }) {
    SCOPED_TRACE(c.yaml);
    auto p = ParsePolicy(c.yaml);
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error().field, c.field);
    EXPECT_NE(p.error().message.find("given twice"), std::string::npos) << p.error().message;
  }
}

TEST(Policy, RoundTripsThroughYaml) {
  auto p = ParsePolicy(kPolicyExample);
  ASSERT_TRUE(p.has_value());
  std::string text = PolicyToYaml(*p);
  auto back = ParsePolicy(text);
  ASSERT_TRUE(back.has_value()) << back.error().message << "\n" << text;
  EXPECT_EQ(PolicyToYaml(*back), text);
  EXPECT_EQ(back->queues.size(), p->queues.size());
  EXPECT_EQ(back->FindQueue("vision")->quota.at(kGpus).lending_limit, 4'000);
  EXPECT_EQ(back->FindQueue("vision/serving")->quota.at(kGpus).guaranteed, 500);
}

TEST(Policy, InferenceHeadroomDefaultsToNoneAndRoundTrips) {
  auto d = ParsePolicy("min_runtime: 5m\n");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->FindPool("default")->inference_headroom_gpus, 0);
  EXPECT_EQ(PolicyToYaml(*d).find("inference_headroom"), std::string::npos);
  auto p = ParsePolicy(
      "pools:\n  - {name: default, selector: {}, inference_headroom: {gpus: 2}}\n"
      "  - {name: west, selector: {zone: west}}\n");
  ASSERT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  EXPECT_EQ(p->FindPool("default")->inference_headroom_gpus, 2);
  EXPECT_EQ(p->FindPool("west")->inference_headroom_gpus, 0);
  const std::string text = PolicyToYaml(*p);
  EXPECT_NE(text.find("inference_headroom: {gpus: 2}"), std::string::npos) << text;
  auto back = ParsePolicy(text);
  ASSERT_TRUE(back.has_value()) << back.error().message << "\n" << text;
  EXPECT_EQ(back->pools, p->pools);
  EXPECT_NE(back->pools, d->pools);
}

TEST(Policy, InferenceHeadroomErrorsNameTheFieldAndTheFix) {
  struct Case {
    const char* yaml;
    const char* field;
    const char* says;
  };
  for (const Case& c : {
           Case{"pools:\n  - {name: a, inference_headroom: 2}\n", "pools[0].inference_headroom",
                "{gpus: 2}"},
           Case{"pools:\n  - {name: a, inference_headroom: {}}\n",
                "pools[0].inference_headroom.gpus", "is required"},
           Case{"pools:\n  - {name: a, inference_headroom: {gpus: 1.5}}\n",
                "pools[0].inference_headroom.gpus", "whole number of GPUs"},
           Case{"pools:\n  - {name: a, inference_headroom: {gpus: -1}}\n",
                "pools[0].inference_headroom.gpus", "whole number of GPUs"},
           Case{"pools:\n  - {name: a, inference_headroom: {gpu: 1}}\n",
                "pools[0].inference_headroom.gpu", "gpus"},
       }) {
    SCOPED_TRACE(c.yaml);
    auto p = ParsePolicy(c.yaml);
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error().field, c.field) << p.error().message;
    EXPECT_NE(p.error().message.find(c.says), std::string::npos) << p.error().message;
  }
}

TEST(Policy, BackfillDefaultsOnAndRoundTrips) {
  auto d = ParsePolicy("min_runtime: 5m\n");
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->backfill.enabled);
  EXPECT_EQ(d->backfill.max_reservations, 32);
  EXPECT_EQ(DefaultPolicy().backfill, d->backfill);
  auto p = ParsePolicy("backfill: {enabled: false, max_reservations: 3}\n");
  ASSERT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  EXPECT_FALSE(p->backfill.enabled);
  EXPECT_EQ(p->backfill.max_reservations, 3);
  std::string text = PolicyToYaml(*p);
  EXPECT_NE(text.find("backfill"), std::string::npos) << text;
  auto back = ParsePolicy(text);
  ASSERT_TRUE(back.has_value()) << back.error().message << "\n" << text;
  EXPECT_EQ(back->backfill, p->backfill);
  EXPECT_EQ(PolicyToYaml(*back), text);
}

TEST(Policy, ConsolidationDefaultsOnAndRoundTrips) {
  auto d = ParsePolicy("min_runtime: 5m\n");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->consolidation, (Consolidation{true, 4, 8}));
  EXPECT_EQ(DefaultPolicy().consolidation, d->consolidation);
  auto p = ParsePolicy("consolidation: {enabled: false, max_moves: 2, max_jobs_per_cycle: 3}\n");
  ASSERT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  EXPECT_EQ(p->consolidation, (Consolidation{false, 2, 3}));
  std::string text = PolicyToYaml(*p);
  auto back = ParsePolicy(text);
  ASSERT_TRUE(back.has_value()) << back.error().message << "\n" << text;
  EXPECT_EQ(back->consolidation, p->consolidation);
  auto bad = ParsePolicy("consolidation: {max_moves: 100}\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "consolidation.max_moves");
  bad = ParsePolicy("consolidation: {moves: 1}\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "consolidation.moves");
}

TEST(Policy, DefaultIsOneUnlimitedQueue) {
  Policy p = DefaultPolicy();
  const QueuePolicy* q = p.FindQueue("default/default");
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(q->quota.empty());
  EXPECT_NE(p.FindQueue("default"), nullptr);
  EXPECT_EQ(p.priority_classes.size(), 4U);
  EXPECT_EQ(p.FindPriorityClass("critical")->value, 300);
  auto back = ParsePolicy(PolicyToYaml(p));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(PolicyToYaml(*back), PolicyToYaml(p));
}

TEST(Policy, WithoutQueuesKeepsTheDefaultQueue) {
  auto p = ParsePolicy("min_runtime: 5m\n");
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->FindQueue("default/default"), nullptr);
  EXPECT_EQ(p->pools.size(), 1U);
}

struct PolicyBadCase {
  const char* yaml;
  const char* field;
  const char* hint;
};

class PolicyRejects : public ::testing::TestWithParam<PolicyBadCase> {};

TEST_P(PolicyRejects, NamesTheFieldPath) {
  auto p = ParsePolicy(GetParam().yaml);
  ASSERT_FALSE(p.has_value()) << GetParam().yaml;
  EXPECT_EQ(p.error().code, Code::kInvalidArgument);
  EXPECT_EQ(p.error().field, GetParam().field) << p.error().message;
  EXPECT_NE(p.error().message.find(GetParam().hint), std::string::npos) << p.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, PolicyRejects,
    ::testing::Values(
        PolicyBadCase{"queue: []\n", "queue", "allowed fields"},
        PolicyBadCase{"queues: [{name: a, quota: {gpus: {guaranted: 1}}}]\n",
                      "queues[0].quota.gpus.guaranted", "allowed"},
        PolicyBadCase{"queues: [{name: a}, {name: a}]\n", "queues[1].name", "twice"},
        PolicyBadCase{"queues: [{name: a, children: [{name: b}, {name: b}]}]\n",
                      "queues[0].children[1].name", "twice"},
        PolicyBadCase{"pools: [{name: x}, {name: x}]\n", "pools[1].name", "twice"},
        PolicyBadCase{"priority_classes: [{name: a, value: 1}, {name: a, value: 2}]\n",
                      "priority_classes[1].name", "twice"},
        PolicyBadCase{
            "queues: [{name: a, quota: {gpus: 4}, children: [{name: b, quota: {gpus: 3}}, "
            "{name: c, quota: {gpus: 2}}]}]\n",
            "queues[0].children", "more than the parent's 4"},
        PolicyBadCase{"queues: [{name: a, pools: [gpu]}]\n", "queues[0].pools[0]", "unknown pool"},
        PolicyBadCase{"queues: [{name: a, quota: {gpus: -1}}]\n", "queues[0].quota.gpus",
                      "negative"},
        PolicyBadCase{"queues: [{name: a, quota: {gpus: {guaranteed: 2, lending_limit: 3}}}]\n",
                      "queues[0].quota.gpus.lending_limit", "more than the guaranteed"},
        PolicyBadCase{"queues: [{name: a, quota: {gpus: 0.0001}}]\n", "queues[0].quota.gpus",
                      "decimals"},
        PolicyBadCase{"queues: [{name: a, quota: {tpus: 1}}]\n", "queues[0].quota.tpus",
                      "unknown resource"},
        PolicyBadCase{"queues: [{name: a, quota: {memory: 1GB}}]\n", "queues[0].quota.memory",
                      "Gi"},
        PolicyBadCase{"queues: [{name: a, quota: {gpus: {guaranteed: 1, weight: 0}}}]\n",
                      "queues[0].quota.gpus.weight", "1 to 1000"},
        PolicyBadCase{"queues: [{name: a, over_quota: maybe}]\n", "queues[0].over_quota", "borrow"},
        PolicyBadCase{"queues: [{name: A}]\n", "queues[0].name", "lower-case"},
        PolicyBadCase{"usage_half_life: 0s\n", "usage_half_life", "longer than zero"},
        PolicyBadCase{"min_runtime: soon\n", "min_runtime", "duration"},
        PolicyBadCase{"reclaim_grace: soon\n", "reclaim_grace", "duration"},
        PolicyBadCase{"reclaim_grace: 30\n", "reclaim_grace", "duration"},
        PolicyBadCase{"backfill: {enabled: yes}\n", "backfill.enabled", "true or false"},
        PolicyBadCase{"backfill: {max_reservations: -1}\n", "backfill.max_reservations",
                      "0 to 1000"},
        PolicyBadCase{"backfill: {max_reservations: 1001}\n", "backfill.max_reservations",
                      "0 to 1000"},
        PolicyBadCase{"backfill: {max_reservations: many}\n", "backfill.max_reservations",
                      "not an integer"},
        PolicyBadCase{"backfill: {reservations: 4}\n", "backfill.reservations", "allowed fields"},
        PolicyBadCase{"backfill: true\n", "backfill", "mapping"},
        PolicyBadCase{"queues: [{name: a\n", "", "YAML"}, PolicyBadCase{"- a\n", "", "mapping"}));

// The scheduling core's reason codes travel through the store and the API.
TEST(Reason, EveryCodeRoundTripsThroughJsonAndRenders) {
  for (int c = 0; c <= static_cast<int>(kLastReasonCode); ++c) {
    Reason r{static_cast<ReasonCode>(c), {{"by_job", 7}, {"work_lost_ms", 90'000}}, "vision gpus"};
    Reason back = ReasonFromJson(ToJson(r));
    EXPECT_EQ(back, r) << ReasonCodeName(r.code);
  }
  Reason reclaimed{ReasonCode::kReclaimed, {{"by_job", 7}, {"work_lost_ms", 90'000}}, "vision/a"};
  EXPECT_EQ(RenderReason(reclaimed),
            "reclaimed by queue vision/a (for job 7), which is below its guarantee and lent these "
            "GPUs; about 1m 30s of work since the last checkpoint was lost");
  Reason quota{ReasonCode::kOverQuota,
               {{"requested_mgpu", 2500},
                {"queue_used_mgpu", 4000},
                {"queue_guaranteed_mgpu", 4000},
                {"borrowable_now_mgpu", 0}},
               "vision gpus/H100-80GB"};
  EXPECT_EQ(RenderReason(quota),
            "over its queue's quota: it asks for 2.5 GPUs of model H100-80GB; queue vision uses 4 "
            "GPUs, with 4 GPUs guaranteed, and may borrow without limit; 0 GPUs can be borrowed "
            "now");
}

}  // namespace
}  // namespace berth::model

namespace berth::model {
namespace {

constexpr const char* kTwoTeams = R"(
queues:
  - name: vision
  - name: nlp
)";

TEST(PolicyTest, RunAsGivesEachTenantItsNamedOrNumericIdentity) {
  auto p = ParsePolicy(std::string(kTwoTeams) + R"(
tenants:
  vision: {run_as: {user: vision-jobs}}
  nlp: {run_as: {uid: 20001, gid: 20002, groups: [20100]}}
)");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  RunAs vision = RunIdentityOf(*p, "vision");
  EXPECT_EQ(vision.user, "vision-jobs");
  EXPECT_FALSE(vision.uid.has_value());
  RunAs nlp = RunIdentityOf(*p, "nlp");
  EXPECT_EQ(nlp.uid, 20001U);
  EXPECT_EQ(nlp.gid, 20002U);
  EXPECT_EQ(nlp.groups, std::vector<std::uint32_t>{20100});
  // Round trip: what diffs compare keeps the identities.
  auto again = ParsePolicy(PolicyToYaml(*p));
  ASSERT_TRUE(again.has_value()) << again.error().message << PolicyToYaml(*p);
  EXPECT_EQ(again->tenants, p->tenants);
}

TEST(PolicyTest, ContainerNetworkIsPrivateUnlessThePolicySaysNoneOrHost) {
  auto p = ParsePolicy(std::string(kTwoTeams) + R"(
tenants:
  vision: {container_network: host}
  nlp: {container_network: none}
)");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ(ContainerNetworkOf(*p, "vision"), ContainerNetwork::kHost);
  EXPECT_EQ(ContainerNetworkOf(*p, "nlp"), ContainerNetwork::kNone);
  EXPECT_EQ(ContainerNetworkOf(*p, "default"), ContainerNetwork::kPrivate);
  auto again = ParsePolicy(PolicyToYaml(*p));
  ASSERT_TRUE(again.has_value()) << again.error().message << PolicyToYaml(*p);
  EXPECT_EQ(again->tenants, p->tenants);
  auto bad =
      ParsePolicy(std::string(kTwoTeams) + "tenants:\n  vision: {container_network: bridge}\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "tenants.vision.container_network");
  EXPECT_NE(bad.error().message.find("'bridge' is none of private"), std::string::npos)
      << bad.error().message;
}

TEST(PolicyTest, RunAsDerivedIdentityIsStableAndAboveEveryAllocatedRange) {
  auto p = ParsePolicy(kTwoTeams);
  ASSERT_TRUE(p.has_value());
  RunAs vision = RunIdentityOf(*p, "vision");
  ASSERT_TRUE(vision.uid.has_value());
  EXPECT_EQ(*vision.uid, DerivedUid("vision"));
  EXPECT_EQ(vision.gid, *vision.uid);
  EXPECT_GE(*vision.uid, kDerivedUidBase);
  EXPECT_LT(*vision.uid, kDerivedUidBase + kDerivedUidSpan);
  EXPECT_LE(kDerivedUidBase + kDerivedUidSpan, 2'147'483'648U) << "podman runs no container as it";
  EXPECT_NE(DerivedUid("vision"), DerivedUid("nlp"));
  EXPECT_EQ(DerivedUid("vision"), DerivedUid("vision"));
}

TEST(PolicyTest, RunAsRefusesRootSharedIdentitiesAndUnknownTenants) {
  struct Case {
    const char* tenants;
    const char* field;
    const char* says;
  };
  for (const Case& c : {
           Case{"vision: {run_as: {uid: 0}}", "tenants.vision.run_as", "allow_root: true"},
           Case{"vision: {run_as: {user: root}}", "tenants.vision.run_as", "allow_root: true"},
           Case{"vision: {run_as: {uid: 5, groups: [0]}}", "tenants.vision.run_as", "allow_root"},
           Case{"vision: {run_as: {user: a, uid: 5}}", "tenants.vision.run_as", "not both"},
           Case{"vision: {run_as: {user: a, gid: 5}}", "tenants.vision.run_as", "only with uid"},
           Case{"vision: {run_as: {}}", "tenants.vision.run_as", "give user"},
           Case{"vision: {run_as: {uid: 5, shell: x}}", "tenants.vision.run_as.shell", "unknown"},
           Case{"ghost: {run_as: {uid: 5}}", "tenants.ghost", "no queue belongs"},
           Case{"vision: {run_as: {uid: 7}}\n  nlp: {run_as: {uid: 7}}", "tenants.",
                "would both run as uid 7"},
           Case{"vision: {run_as: {uid: 4294967295}}", "tenants.vision.run_as.uid", ""},
       }) {
    auto p = ParsePolicy(std::string(kTwoTeams) + "tenants:\n  " + c.tenants + "\n");
    ASSERT_FALSE(p.has_value()) << c.tenants;
    EXPECT_TRUE(p.error().field.starts_with(c.field)) << c.tenants << ": " << p.error().field;
    EXPECT_NE(p.error().message.find(c.says), std::string::npos)
        << c.tenants << ": " << p.error().message;
  }
  // Root is possible, said out loud.
  auto p = ParsePolicy(std::string(kTwoTeams) +
                       "tenants:\n  vision: {run_as: {uid: 0, allow_root: true}}\n");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_TRUE(RunIdentityOf(*p, "vision").allow_root);
}

}  // namespace
}  // namespace berth::model

namespace berth::model {
namespace {

JobSpec SpecOf(const std::string& tenant) {
  JobSpec s;
  s.name = "j";
  s.tenant = tenant;
  s.queue = "main";
  s.command = {"true"};
  return s;
}

TEST(PolicyTest, StorageGrantsDecideWhichPathsAJobMayName) {
  auto p = ParsePolicy(std::string(kTwoTeams) + R"(
tenants:
  vision:
    storage:
      - {path: /data/vision, access: read-write}
      - {path: /models, access: read-only}
)");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  JobSpec ok = SpecOf("vision");
  ok.working_dir = "/data/vision/run1";
  ok.checkpoint.dir = "/data/vision";
  ok.mounts = {{"/models/llama", true}, {"/data/vision/set", false}};
  EXPECT_TRUE(CheckStorageGrants(*p, ok).has_value());

  struct Case {
    std::function<void(JobSpec&)> set;
    const char* field;
    const char* says;
  };
  for (const Case& c : {
           Case{[](JobSpec& s) { s.checkpoint.dir = "/etc/cron.d"; }, "checkpoint.dir",
                "/etc/cron.d is outside the storage granted to its tenant: tenant vision may use "
                "/data/vision (read-write), /models (read-only)"},
           // A sibling that shares the prefix is not under the grant.
           Case{[](JobSpec& s) { s.working_dir = "/data/vision2/x"; }, "working_dir", "outside"},
           Case{[](JobSpec& s) { s.working_dir = "/data/vision/../nlp"; }, "working_dir",
                "not a normal path"},
           Case{[](JobSpec& s) { s.checkpoint.file = "/models/done"; }, "checkpoint.file",
                "which tenant vision may only read"},
           Case{[](JobSpec& s) {
                  s.mounts = {{"/models/x", false}};
                },
                "mounts[0].path", "read_only: true"},
       }) {
    JobSpec s = SpecOf("vision");
    c.set(s);
    auto st = CheckStorageGrants(*p, s);
    ASSERT_FALSE(st.has_value()) << c.field;
    EXPECT_EQ(st.error().field, c.field);
    EXPECT_NE(st.error().message.find(c.says), std::string::npos) << st.error().message;
  }
  // A tenant with no grants may name no path at all.
  JobSpec nlp = SpecOf("nlp");
  nlp.checkpoint.dir = "/tmp/x";
  auto st = CheckStorageGrants(*p, nlp);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("tenant nlp has no storage granted"), std::string::npos);
  // A job that names no path needs no grant.
  EXPECT_TRUE(CheckStorageGrants(*p, SpecOf("nlp")).has_value());
}

TEST(PolicyTest, StorageGrantsAreCheckedWhenThePolicyIsApplied) {
  for (const char* bad :
       {"{path: data, access: read-write}", "{path: /data/, access: read-write}",
        "{path: /data/../etc}", "{path: /data, access: write}", "{access: read-only}"}) {
    auto p =
        ParsePolicy(std::string(kTwoTeams) + "tenants:\n  vision:\n    storage: [" + bad + "]\n");
    ASSERT_FALSE(p.has_value()) << bad;
    EXPECT_TRUE(p.error().field.starts_with("tenants.vision.storage[0]")) << p.error().field;
  }
  // The fresh install grants its one tenant /tmp; the grant round-trips.
  Policy d = DefaultPolicy();
  ASSERT_EQ(d.tenants["default"].storage.size(), 1U);
  EXPECT_EQ(d.tenants["default"].storage[0].path, "/tmp");
  auto again = ParsePolicy(PolicyToYaml(d));
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->tenants, d.tenants) << PolicyToYaml(d);
}

TEST(Policy, QuotaAmountsAndDurationsAreBoundedNamingTheRange) {
  struct Case {
    const char* doc;
    const char* field;
    const char* range;
  };
  const Case cases[] = {
      {"queues: [{name: v, quota: {memory: 4194305Ti}}]", "queues[0].quota.memory",
       "at most 4194304Ti"},
      {"queues: [{name: v, quota: {memory: 18446744073709551615}}]", "queues[0].quota.memory",
       "at most 4194304Ti"},
      {"queues: [{name: v, quota: {gpus: 1000001}}]", "queues[0].quota.gpus", "from 0 to 1000000"},
      {"queues: [{name: v, quota: {gpus: 18446744073709551615}}]", "queues[0].quota.gpus",
       "from 0 to 1000000"},
      {"queues: [{name: v, quota: {cpu: {guaranteed: 1, borrow_limit: 1000000001m}}}]",
       "queues[0].quota.cpu.borrow_limit", "from 0 to 1000000 cores"},
      {"usage_half_life: 3651d", "usage_half_life", "at most 87600h"},
      {"min_runtime: 99999999999999999999d", "min_runtime", "at most 87600h"},
      // A guarantee is never held back by borrowers for more than a day.
      {"reclaim_grace: 25h", "reclaim_grace", "at most 24h"},
  };
  for (const auto& c : cases) {
    auto p = ParsePolicy(c.doc);
    ASSERT_FALSE(p.has_value()) << c.doc;
    EXPECT_EQ(p.error().field, c.field) << c.doc << ": " << p.error().message;
    EXPECT_NE(p.error().message.find(c.range), std::string::npos) << p.error().message;
  }
}

// Children at the largest amount each add up past 64 bits: the sum is
// refused as more than the parent's, not wrapped to a small number.
TEST(Policy, ChildrenGuaranteesAreSummedWithoutOverflow) {
  auto p = ParsePolicy(R"(
queues:
  - name: v
    quota: {memory: 4194304Ti}
    children:
      - {name: a, quota: {memory: 4194304Ti}}
      - {name: b, quota: {memory: 4194304Ti}}
      - {name: c, quota: {memory: 4194304Ti}}
)");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().field, "queues[0].children");
  EXPECT_NE(p.error().message.find("more than the parent's"), std::string::npos)
      << p.error().message;
  // At the bound itself a policy is accepted, borrow limit included.
  auto big = ParsePolicy(
      "queues: [{name: v, quota: {memory: {guaranteed: 4194304Ti, borrow_limit: 4194304Ti}, "
      "gpus: {guaranteed: 1000000, borrow_limit: 1000000}}}]");
  ASSERT_TRUE(big.has_value()) << big.error().field << ": " << big.error().message;
}

TEST(PolicyTest, LimitsComeFromTheTenantThenTheTopLevelThenTheDefault) {
  auto p = ParsePolicy(std::string(kTwoTeams) + R"(
limits: {pending_jobs: 5000, spec_bytes: 256Ki, log_bytes_per_run: 1Gi}
tenants:
  vision:
    limits: {pending_jobs_per_member: 100, pending_jobs: 2000, tokens_per_identity: 3}
)");
  ASSERT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  auto vision = LimitOf(*p, "vision", &Limits::pending_jobs);
  EXPECT_EQ(vision.value, 2000);
  EXPECT_EQ(vision.setting, "tenants.vision.limits.pending_jobs");
  auto nlp = LimitOf(*p, "nlp", &Limits::pending_jobs);
  EXPECT_EQ(nlp.value, 5000);
  EXPECT_EQ(nlp.setting, "limits.pending_jobs");
  auto replicas = LimitOf(*p, "nlp", &Limits::replicas_per_job);
  EXPECT_EQ(replicas.value, kMaxReplicas);
  EXPECT_EQ(replicas.setting, "");
  EXPECT_NE(replicas.Describe().find("the default; a platform admin can raise it with "
                                     "tenants.nlp.limits.replicas_per_job"),
            std::string::npos)
      << replicas.Describe();
  EXPECT_EQ(LimitOf(*p, "vision", &Limits::spec_bytes).value, 256 * 1024);
  EXPECT_EQ(LimitOf(*p, "vision", &Limits::log_bytes_per_run).value, std::int64_t{1} << 30);
  EXPECT_EQ(LimitOf(*p, "vision", &Limits::tokens_per_identity).value, 3);
  EXPECT_EQ(LimitOf(*p, "nlp", &Limits::tokens_per_identity).value, kDefaultTokensPerIdentity);
  EXPECT_EQ(LimitOf(DefaultPolicy(), "default", &Limits::pending_jobs_per_member).value,
            kDefaultPendingJobsPerMember);
  // Written back as sizes and counts, and read back the same.
  const std::string yaml = PolicyToYaml(*p);
  EXPECT_NE(yaml.find("spec_bytes: 256Ki"), std::string::npos) << yaml;
  auto again = ParsePolicy(yaml);
  ASSERT_TRUE(again.has_value()) << again.error().message << yaml;
  EXPECT_EQ(again->limits, p->limits);
  EXPECT_EQ(again->tenants, p->tenants);
  // A policy that sets none writes none.
  EXPECT_EQ(PolicyToYaml(*ParsePolicy(kTwoTeams)).find("limits"), std::string::npos);
}

TEST(PolicyTest, BadLimitsAreRefusedNamingTheField) {
  struct Case {
    const char* doc;
    const char* field;
    const char* says;
  };
  const Case cases[] = {
      {"limits: {pending: 3}\n", "limits.pending", "unknown field 'pending'"},
      {"limits: {pending_jobs: 0}\n", "limits.pending_jobs", "0 is not in 1 to"},
      {"limits: {pending_jobs: lots}\n", "limits.pending_jobs", "'lots' is not an integer"},
      {"limits: {replicas_per_job: 5000}\n", "limits.replicas_per_job", "5000 is not in 1 to 1024"},
      {"limits: {spec_bytes: 12}\n", "limits.spec_bytes", "below the least allowed, 1Ki"},
      {"limits: {spec_bytes: 1Ti}\n", "limits.spec_bytes", "at most"},
      {"limits: {log_bytes_per_run: 10Q}\n", "limits.log_bytes_per_run", ""},
      {"limits: [1, 2]\n", "limits", "must be a mapping"},
      {"tenants:\n  vision:\n    limits: {tokens_per_identity: -1}\n",
       "tenants.vision.limits.tokens_per_identity", "-1 is not in 1 to"},
  };
  for (const auto& c : cases) {
    auto p = ParsePolicy(std::string(kTwoTeams) + c.doc);
    ASSERT_FALSE(p.has_value()) << c.doc;
    EXPECT_EQ(p.error().field, c.field) << c.doc;
    EXPECT_NE(p.error().message.find(c.says), std::string::npos) << c.doc << p.error().message;
  }
}

TEST(PolicyTest, SpecLimitsRefuseAJobNamingTheLimitAndItsFigure) {
  auto p = ParsePolicy(std::string(kTwoTeams) +
                       "tenants:\n  vision:\n    limits: {replicas_per_job: 8, spec_bytes: 2Ki}\n");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  JobSpec spec;
  spec.tenant = "vision";
  spec.replicas = 9;
  auto wide = CheckSpecLimits(*p, spec, 100);
  ASSERT_FALSE(wide.has_value());
  EXPECT_EQ(wide.error().code, Code::kResourceExhausted);
  EXPECT_NE(wide.error().message.find("asks for 9 replicas; tenant vision allows at most 8 per "
                                      "job (limit replicas_per_job, set by "
                                      "tenants.vision.limits.replicas_per_job"),
            std::string::npos)
      << wide.error().message;
  spec.replicas = 8;
  EXPECT_TRUE(CheckSpecLimits(*p, spec, 2048).has_value());
  auto big = CheckSpecLimits(*p, spec, 2049);
  ASSERT_FALSE(big.has_value());
  EXPECT_NE(big.error().message.find("spec is 2049 bytes; tenant vision allows at most 2048"),
            std::string::npos)
      << big.error().message;
  spec.tenant = "nlp";  // under the defaults
  EXPECT_TRUE(CheckSpecLimits(*p, spec, 2049).has_value());
}

TEST(PolicyTest, RetryCapIsAbsentUnlessSetAndRoundTripsAtTheTopAndOnQueues) {
  auto none = ParsePolicy(kPolicyExample);
  ASSERT_TRUE(none.has_value()) << none.error().message;
  EXPECT_FALSE(none->retry.max_attempts);
  EXPECT_FALSE(AttemptCapOf(*none, "vision/training"));
  EXPECT_EQ(PolicyToYaml(*none).find("retry"), std::string::npos);
  EXPECT_FALSE(AttemptCapOf(DefaultPolicy(), "default/default"));

  auto p = ParsePolicy(kRetryCapPolicy);
  ASSERT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  EXPECT_EQ(p->retry.max_attempts, 3U);
  EXPECT_EQ(p->FindQueue("ml")->retry.max_attempts, 1U);
  EXPECT_FALSE(p->FindQueue("ml/training")->retry.max_attempts);
  const std::string text = PolicyToYaml(*p);
  EXPECT_NE(text.find("retry: {max_attempts: 3}"), std::string::npos) << text;
  auto back = ParsePolicy(text);
  ASSERT_TRUE(back.has_value()) << back.error().message << "\n" << text;
  EXPECT_EQ(back->retry, p->retry);
  for (const auto* path : {"ml", "ml/training", "ml/sweeps", "vision", "vision/training"}) {
    ASSERT_NE(back->FindQueue(path), nullptr) << path;
    EXPECT_EQ(back->FindQueue(path)->retry, p->FindQueue(path)->retry) << path;
  }
}

TEST(PolicyTest, RetryCapComesFromTheQueueThenItsAncestorsThenTheTopLevel) {
  auto p = ParsePolicy(kRetryCapPolicy);
  ASSERT_TRUE(p.has_value()) << p.error().message;
  auto own = AttemptCapOf(*p, "ml/sweeps");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->max_attempts, 5U);
  EXPECT_EQ(own->queue, "ml/sweeps");
  auto parent = AttemptCapOf(*p, "ml/training");
  ASSERT_TRUE(parent);
  EXPECT_EQ(parent->max_attempts, 1U);
  EXPECT_EQ(parent->queue, "ml");
  auto top = AttemptCapOf(*p, "vision/training");
  ASSERT_TRUE(top);
  EXPECT_EQ(top->max_attempts, 3U);
  EXPECT_EQ(top->queue, "");
  // A queue the policy no longer has still gets the top level's cap.
  EXPECT_EQ(AttemptCapOf(*p, "gone/queue")->max_attempts, 3U);

  // The fewer of the job's own attempts and the cap; no cap: the job's.
  EXPECT_EQ(EffectiveMaxAttempts(2, parent), 1U);
  EXPECT_EQ(EffectiveMaxAttempts(3, own), 3U);
  EXPECT_EQ(EffectiveMaxAttempts(7, own), 5U);
  EXPECT_EQ(EffectiveMaxAttempts(7, std::nullopt), 7U);
}

TEST(PolicyTest, BadRetryCapsAreRefusedNamingTheFieldAndTheFix) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases{
      {"retry: {max_attempts: 0}\n", "retry.max_attempts", "1 (retries off)"},
      {"retry: {max_attempts: 101}\n", "retry.max_attempts", "to 100"},
      {"retry: {max_attempts: two}\n", "retry.max_attempts", "whole number"},
      {"retry: {max_attempts: -1}\n", "retry.max_attempts", "whole number"},
      {"retry: {}\n", "retry.max_attempts", "is required"},
      {"retry: {attempts: 1}\n", "retry.attempts", "max_attempts"},
      {"retry: 1\n", "retry", "max_attempts: 1"},
      {"queues:\n  - {name: ml, retry: {max_attempts: 0}}\n", "queues[0].retry.max_attempts",
       "1 (retries off)"},
      {"queues:\n  - name: ml\n    children: [{name: t, retry: {backoff: 1s}}]\n",
       "queues[0].children[0].retry.backoff", "max_attempts"}};
  for (const auto& [yaml, field, words] : cases) {
    auto p = ParsePolicy(yaml);
    ASSERT_FALSE(p.has_value()) << yaml;
    EXPECT_EQ(p.error().field, field) << yaml << p.error().message;
    EXPECT_NE(p.error().message.find(words), std::string::npos) << yaml << p.error().message;
  }
}

}  // namespace
}  // namespace berth::model
