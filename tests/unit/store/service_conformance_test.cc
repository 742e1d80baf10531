// The services conformance suite: every backend of store::ServiceStore
// (SqliteStore, MemoryServiceStore) runs the same tests of applying,
// revising, scaling, rolling back, listing and deleting a service, of the
// per-tenant limit, and of the audit record each change commits with
// itself (and a refused change does not).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/memory_service_store.h"
#include "unit/store/backends.h"

namespace berth::store {
namespace {

tests::Backend Memory() {
  auto* store = new MemoryServiceStore();  // NOLINT(cppcoreguidelines-owning-memory)
  tests::Backend b;
  b.services = store;
  b.close = [store] { delete store; };  // NOLINT(cppcoreguidelines-owning-memory)
  b.audit_records = [store] { return store->audit_records(); };
  return b;
}

std::vector<tests::NamedBackend> ServiceBackends() {
  auto backends = tests::StoreBackends();
  backends.push_back({"memory", Memory});
  return backends;
}

class ServiceStoreConformance : public tests::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_NE(b_.services, nullptr);
  }

  ServiceStore& store() { return *b_.services; }

  // Parsed, as the API stores it: a spec in its canonical form reads back
  // equal from either backend.
  static model::ServiceSpec Spec(const std::string& name, const std::string& tenant = "ml") {
    auto s = model::ParseServiceSpec("name: " + name + "\ntenant: " + tenant +
                                     "\nqueue: serving\ncommand: [serve]\n"
                                     "replicas: {min: 1, max: 2}\nresources: {gpus: 1}\n");
    EXPECT_TRUE(s.has_value()) << s.error().message;
    return s.value_or(model::ServiceSpec{});
  }
  // An audit hook that records `action` on the service it is given.
  static AuditOf<ServiceApply> ApplyAudit() {
    return [](const ServiceApply& a) -> std::optional<AuditEntry> {
      AuditEntry e;
      e.time_ms = a.service.updated_ms;
      e.actor = a.service.updated_by;
      e.tenant = a.service.tenant;
      e.action = "service.apply";
      e.object = "service/" + a.service.tenant + "/" + a.service.name;
      e.after = "{\"revision\":" + std::to_string(a.service.revision) + "}";
      e.outcome = "ok";
      return e;
    };
  }
  static AuditOf<ServiceRecord, ServiceRecord> ChangeAudit(std::string action) {
    return
        [action](const ServiceRecord& was, const ServiceRecord& now) -> std::optional<AuditEntry> {
          AuditEntry e;
          e.time_ms = now.updated_ms;
          e.actor = now.updated_by;
          e.tenant = now.tenant;
          e.action = action;
          e.object = "service/" + now.tenant + "/" + now.name;
          e.before = "{\"revision\":" + std::to_string(was.revision) + "}";
          e.after = "{\"revision\":" + std::to_string(now.revision) + "}";
          e.outcome = "ok";
          return e;
        };
  }
  ServiceApply Apply(const model::ServiceSpec& spec, TimeMs at, std::size_t max = 100) {
    auto a = store().ApplyService(spec, "alice", at, max, {}, ApplyAudit());
    EXPECT_TRUE(a.has_value()) << a.error().message;
    return a.value_or(ServiceApply{});
  }
  std::vector<std::string> Actions() {
    std::vector<std::string> out;
    for (const auto& r : b_.audit_records()) {
      if (r.action.starts_with("service.")) out.push_back(r.action + " " + r.object);
    }
    return out;
  }
};

TEST_P(ServiceStoreConformance, ApplyCreatesRevisionOneAndGetReadsItBack) {
  auto spec = Spec("coder");
  auto a = Apply(spec, 2000);
  EXPECT_EQ(a.applied, ServiceApplied::kCreated);
  EXPECT_EQ(a.service.revision, 1);
  auto got = store().GetService("ml", "coder");
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(got->spec, spec);
  EXPECT_EQ(got->revision, 1);
  EXPECT_EQ(got->created_ms, 2000);
  EXPECT_EQ(got->created_by, "alice");
  ASSERT_EQ(got->revisions.size(), 1U);
  EXPECT_EQ(got->revisions[0].change, "apply");
  EXPECT_EQ(Actions(), (std::vector<std::string>{"service.apply service/ml/coder"}));
}

TEST_P(ServiceStoreConformance, TheSameSpecAgainChangesNothingAndRecordsNothing) {
  auto spec = Spec("coder");
  Apply(spec, 2000);
  auto again = Apply(spec, 3000);
  EXPECT_EQ(again.applied, ServiceApplied::kUnchanged);
  EXPECT_EQ(again.service.revision, 1);
  EXPECT_EQ(again.service.updated_ms, 2000);
  EXPECT_EQ(Actions().size(), 1U);
}

TEST_P(ServiceStoreConformance, AChangedSpecIsANewRevisionKeepingTheOldOne) {
  auto v1 = Spec("coder");
  Apply(v1, 2000);
  auto v2 = v1;
  v2.image = "registry/coder:v2";
  auto a = Apply(v2, 3000);
  EXPECT_EQ(a.applied, ServiceApplied::kRevised);
  EXPECT_EQ(a.service.revision, 2);
  auto got = store().GetService("ml", "coder");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->spec, v2);
  EXPECT_EQ(got->created_ms, 2000);
  EXPECT_EQ(got->updated_ms, 3000);
  ASSERT_EQ(got->revisions.size(), 2U);
  EXPECT_EQ(got->revisions[0].revision, 2);
  EXPECT_EQ(got->revisions[1].spec, v1);
}

TEST_P(ServiceStoreConformance, OnlyTheNewestTenRevisionsAreKept) {
  auto spec = Spec("coder");
  for (std::uint32_t i = 1; i <= 13; ++i) {
    spec.port = 8000 + i;
    Apply(spec, 1000 + i);
  }
  auto got = store().GetService("ml", "coder");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->revision, 13);
  ASSERT_EQ(got->revisions.size(), kServiceRevisionsKept);
  EXPECT_EQ(got->revisions.front().revision, 13);
  EXPECT_EQ(got->revisions.back().revision, 4);
  EXPECT_EQ(got->revisions.back().spec.port, 8004U);
}

TEST_P(ServiceStoreConformance, ScaleIsARevisionOfTheBoundsOnly) {
  auto spec = Spec("coder");
  Apply(spec, 2000);
  auto s = store().ScaleService("ml", "coder", {2, 5}, "bob", 3000, ChangeAudit("service.scale"));
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->revision, 2);
  EXPECT_EQ(s->spec.replicas, (model::ReplicaBounds{2, 5}));
  auto expected = spec;
  expected.replicas = {2, 5};
  EXPECT_EQ(s->spec, expected);
  EXPECT_EQ(s->updated_by, "bob");
  auto got = store().GetService("ml", "coder");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->revisions[0].change, "scale");
  // The same bounds again: nothing.
  auto same =
      store().ScaleService("ml", "coder", {2, 5}, "bob", 4000, ChangeAudit("service.scale"));
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->revision, 2);
  EXPECT_EQ(Actions(), (std::vector<std::string>{"service.apply service/ml/coder",
                                                 "service.scale service/ml/coder"}));
}

TEST_P(ServiceStoreConformance, ScaleRefusesBoundsOutOfRangeNamingTheField) {
  Apply(Spec("coder"), 2000);
  auto inverted = store().ScaleService("ml", "coder", {3, 2}, "bob", 3000);
  ASSERT_FALSE(inverted.has_value());
  EXPECT_EQ(inverted.error().code, Code::kInvalidArgument);
  EXPECT_EQ(inverted.error().field, "min");
  auto zero = store().ScaleService("ml", "coder", {0, 0}, "bob", 3000);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().field, "max");
  auto huge = store().ScaleService("ml", "coder", {1, model::kMaxServiceReplicas + 1}, "bob", 3000);
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().field, "max");
  auto got = store().GetService("ml", "coder");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->revision, 1);
}

TEST_P(ServiceStoreConformance, RollbackRestoresThePreviousSpecAsANewRevision) {
  auto v1 = Spec("coder");
  Apply(v1, 2000);
  auto v2 = v1;
  v2.image = "registry/coder:v2";
  Apply(v2, 3000);
  auto r = store().RollbackService("ml", "coder", "bob", 4000, {}, ChangeAudit("service.rollback"));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->revision, 3);
  EXPECT_EQ(r->spec, v1);
  auto got = store().GetService("ml", "coder");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->spec, v1);
  EXPECT_EQ(got->revisions[0].change, "rollback");
  EXPECT_EQ(got->revisions[0].restores, std::optional<std::int64_t>(1));
  // Rolling back again restores revision 2's spec (the one before 3).
  auto again = store().RollbackService("ml", "coder", "bob", 5000);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->spec, v2);
  EXPECT_EQ(again->revision, 4);
}

TEST_P(ServiceStoreConformance, RollbackWithoutAnEarlierRevisionIsRefused) {
  Apply(Spec("coder"), 2000);
  auto r = store().RollbackService("ml", "coder", "bob", 3000, {}, ChangeAudit("service.rollback"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(r.error().field, "revision");
  EXPECT_EQ(Actions().size(), 1U);
}

TEST_P(ServiceStoreConformance, AnAdmissionRefusalCommitsNothingNorItsRecord) {
  auto refuse = [](const model::ServiceSpec& s) -> Status {
    if (s.queue == "training") return Fail(Code::kInvalidArgument, "not inference", "queue");
    return Ok();
  };
  auto bad = Spec("coder");
  bad.queue = "training";
  auto a = store().ApplyService(bad, "alice", 2000, 100, refuse, ApplyAudit());
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().field, "queue");
  EXPECT_EQ(store().GetService("ml", "coder").error().code, Code::kNotFound);
  EXPECT_TRUE(Actions().empty());
  // Rollback to a spec the admission now refuses: refused, nothing changes.
  ASSERT_TRUE(store().ApplyService(bad, "alice", 2000, 100, {}, ApplyAudit()).has_value());
  ASSERT_TRUE(
      store().ApplyService(Spec("coder"), "alice", 3000, 100, refuse, ApplyAudit()).has_value());
  auto r =
      store().RollbackService("ml", "coder", "bob", 4000, refuse, ChangeAudit("service.rollback"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().field, "queue");
  EXPECT_EQ(store().GetService("ml", "coder")->revision, 2);
  EXPECT_EQ(Actions().size(), 2U);
}

TEST_P(ServiceStoreConformance, ATenantPastItsLimitIsRefusedAndOthersAreNot) {
  Apply(Spec("a"), 2000, 2);
  Apply(Spec("b"), 2001, 2);
  auto third = store().ApplyService(Spec("c"), "alice", 2002, 2, {}, ApplyAudit());
  ASSERT_FALSE(third.has_value());
  EXPECT_EQ(third.error().code, Code::kResourceExhausted);
  EXPECT_NE(third.error().message.find("--max-services-per-tenant"), std::string::npos)
      << third.error().message;
  EXPECT_NE(third.error().message.find("2 services"), std::string::npos);
  // A new revision of one it has is not a create; another tenant has its own count.
  auto b2 = Spec("b");
  b2.port = 9000;
  EXPECT_EQ(Apply(b2, 2003, 2).applied, ServiceApplied::kRevised);
  EXPECT_EQ(Apply(Spec("c", "vision"), 2004, 2).applied, ServiceApplied::kCreated);
  EXPECT_EQ(Actions().size(), 4U);
}

TEST_P(ServiceStoreConformance, NamesAreUniquePerTenantNotAcrossTenants) {
  auto ml = Spec("coder", "ml");
  auto vision = Spec("coder", "vision");
  vision.port = 9000;
  EXPECT_EQ(Apply(ml, 2000).applied, ServiceApplied::kCreated);
  EXPECT_EQ(Apply(vision, 2001).applied, ServiceApplied::kCreated);
  EXPECT_EQ(store().GetService("ml", "coder")->spec.port, 8000U);
  EXPECT_EQ(store().GetService("vision", "coder")->spec.port, 9000U);
}

TEST_P(ServiceStoreConformance, ListIsNewestFirstFilteredByScopeAndTenantInPages) {
  Apply(Spec("a", "ml"), 2000);
  Apply(Spec("b", "vision"), 2001);
  Apply(Spec("c", "ml"), 2002);
  auto names = [](const std::vector<ServiceRecord>& list) {
    std::vector<std::string> out;
    for (const auto& s : list) {
      EXPECT_TRUE(s.revisions.empty());
      out.push_back(s.tenant + "/" + s.name);
    }
    return out;
  };
  ServiceFilter all;
  auto list = store().ListServices(all);
  ASSERT_TRUE(list.has_value()) << list.error().message;
  EXPECT_EQ(names(*list), (std::vector<std::string>{"ml/c", "vision/b", "ml/a"}));

  ServiceFilter ml_only;
  ml_only.tenants = model::TenantScope::Of({"ml"});
  EXPECT_EQ(names(*store().ListServices(ml_only)), (std::vector<std::string>{"ml/c", "ml/a"}));
  ServiceFilter none;
  none.tenants = model::TenantScope::Of({});
  EXPECT_TRUE(store().ListServices(none)->empty());
  ServiceFilter by_tenant;
  by_tenant.tenant = "vision";
  EXPECT_EQ(names(*store().ListServices(by_tenant)), (std::vector<std::string>{"vision/b"}));

  ServiceFilter page;
  page.limit = 2;
  auto first = store().ListServices(page);
  ASSERT_EQ(first->size(), 2U);
  page.before_id = first->back().id;
  EXPECT_EQ(names(*store().ListServices(page)), (std::vector<std::string>{"ml/a"}));
}

TEST_P(ServiceStoreConformance, DeleteRemovesItAndItsRevisionsAndTheNameIsFreeAgain) {
  Apply(Spec("coder"), 2000);
  auto v2 = Spec("coder");
  v2.port = 9000;
  Apply(v2, 2500);
  auto gone = store().DeleteService("ml", "coder", "bob", 3000,
                                    [](const ServiceRecord& s) -> std::optional<AuditEntry> {
                                      AuditEntry e;
                                      e.time_ms = 3000;
                                      e.actor = "bob";
                                      e.tenant = s.tenant;
                                      e.action = "service.delete";
                                      e.object = "service/" + s.tenant + "/" + s.name;
                                      e.outcome = "ok";
                                      return e;
                                    });
  ASSERT_TRUE(gone.has_value()) << gone.error().message;
  EXPECT_EQ(gone->revision, 2);
  auto got = store().GetService("ml", "coder");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, Code::kNotFound);
  EXPECT_EQ(got.error().message, "service ml/coder not found");
  EXPECT_EQ(store().DeleteService("ml", "coder", "bob", 3100).error().code, Code::kNotFound);
  EXPECT_EQ(store().ScaleService("ml", "coder", {1, 1}, "bob", 3100).error().code, Code::kNotFound);
  EXPECT_EQ(store().RollbackService("ml", "coder", "bob", 3100).error().code, Code::kNotFound);
  auto again = Apply(Spec("coder"), 4000);
  EXPECT_EQ(again.applied, ServiceApplied::kCreated);
  EXPECT_EQ(again.service.revision, 1);
  EXPECT_EQ(store().GetService("ml", "coder")->revisions.size(), 1U);
  EXPECT_EQ(Actions().back(), "service.apply service/ml/coder");
  EXPECT_EQ(Actions()[2], "service.delete service/ml/coder");
}

TEST_P(ServiceStoreConformance, RolloutProgressMovesOnlyFromWhatTheCallerRead) {
  Apply(Spec("coder"), 2000);
  auto none = store().GetRolloutProgress("ml", "coder");
  ASSERT_TRUE(none.has_value()) << none.error().message;
  EXPECT_FALSE(*none);
  const RolloutProgress first{1, 0, 2100, "berth"};
  auto audit = [](const RolloutProgress& p) -> std::optional<AuditEntry> {
    AuditEntry e;
    e.time_ms = p.since_ms;
    e.actor = p.by;
    e.tenant = "ml";
    e.action = "service.rollout.step";
    e.object = "service/ml/coder";
    e.after = "{\"step\":" + std::to_string(p.step) + "}";
    e.outcome = "ok";
    return e;
  };
  auto set = store().SetRolloutProgress("ml", "coder", std::nullopt, first, audit);
  ASSERT_TRUE(set.has_value()) << set.error().message;
  EXPECT_EQ(*store().GetRolloutProgress("ml", "coder"), first);

  // Two callers read step 0 and both move it on: the second is refused,
  // records nothing, and the progress is the first's.
  const RolloutProgress resumed{1, 1, 2200, "alice"};
  ASSERT_TRUE(store().SetRolloutProgress("ml", "coder", first, resumed, audit).has_value());
  auto late = store().SetRolloutProgress("ml", "coder", first, {1, 1, 2201, "berth"}, audit);
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(late.error().field, "rollout");
  EXPECT_EQ(*store().GetRolloutProgress("ml", "coder"), resumed);
  auto fresh = store().SetRolloutProgress("ml", "coder", std::nullopt, first, audit);
  EXPECT_EQ(fresh.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(Actions(), (std::vector<std::string>{"service.apply service/ml/coder",
                                                 "service.rollout.step service/ml/coder",
                                                 "service.rollout.step service/ml/coder"}));

  // It goes with the service; a service of the same name starts with none.
  ASSERT_TRUE(store().DeleteService("ml", "coder", "bob", 3000).has_value());
  EXPECT_EQ(store().GetRolloutProgress("ml", "coder").error().code, Code::kNotFound);
  EXPECT_EQ(store().SetRolloutProgress("ml", "coder", resumed, first).error().code,
            Code::kNotFound);
  Apply(Spec("coder"), 4000);
  EXPECT_FALSE(*store().GetRolloutProgress("ml", "coder"));
}

INSTANTIATE_TEST_SUITE_P(Backends, ServiceStoreConformance, ::testing::ValuesIn(ServiceBackends()),
                         tests::BackendName);

}  // namespace
}  // namespace berth::store
