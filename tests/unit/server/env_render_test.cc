// A job's env as the API renders it (docs/security.md "Env values"): the
// submitter sees its values, everyone else the keys only, and nobody the
// value of a `secret_env` entry.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/api_util.h"
#include "api/render.h"
#include "model/job.h"

namespace berth::server {
namespace {

store::JobRecord Job(std::string_view yaml, std::string submitted_by) {
  auto spec = model::ParseJobSpec(yaml);
  EXPECT_TRUE(spec.has_value()) << spec.error().message;
  store::JobRecord job;
  job.id = 7;
  job.spec = *spec;
  job.submitted_by = std::move(submitted_by);
  return job;
}

constexpr std::string_view kSpec =
    "{name: s, tenant: red, command: [x], env: {LOG: debug, HF_TOKEN: hf_secret_1},"
    " secret_env: [HF_TOKEN]}";

TEST(EnvRender, TheSubmitterSeesItsEnvButNotASecretEntry) {
  const auto job = Job(kSpec, "alice");
  const nlohmann::json spec = JobJson(job, true, EnvView::kSubmitter)["spec"];
  EXPECT_EQ(spec["env"]["LOG"], "debug");
  EXPECT_EQ(spec["env"]["HF_TOKEN"], model::kSecretEnvValue);
  EXPECT_EQ(spec["secret_env"], nlohmann::json::array({"HF_TOKEN"}));
  EXPECT_EQ(JobJson(job, true, EnvView::kSubmitter).dump().find("hf_secret_1"), std::string::npos);
}

TEST(EnvRender, AnyoneElseSeesTheKeysOnly) {
  const auto job = Job(kSpec, "alice");
  const nlohmann::json out = JobJson(job, false, EnvView::kOther);
  EXPECT_EQ(out["spec"]["env"]["LOG"], model::kHiddenEnvValue);
  EXPECT_EQ(out["spec"]["env"]["HF_TOKEN"], model::kSecretEnvValue);
  EXPECT_EQ(out.dump().find("debug"), std::string::npos);
  EXPECT_EQ(out.dump().find("hf_secret_1"), std::string::npos);
}

TEST(EnvRender, ASubmittedArraysParameterSetsFollowTheSameRules) {
  auto spec = model::ParseJobSpec(
      "{name: s, command: [x], array: [{LR: '0.1', KEY: k_secret_1}], secret_env: [KEY]}");
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  nlohmann::json mine = SpecJson(*spec, EnvView::kSubmitter);
  EXPECT_EQ(mine["array"]["params"][0]["LR"], "0.1");
  EXPECT_EQ(mine["array"]["params"][0]["KEY"], model::kSecretEnvValue);
  nlohmann::json theirs = SpecJson(*spec, EnvView::kOther);
  EXPECT_EQ(theirs["array"]["params"][0]["LR"], model::kHiddenEnvValue);
  // An element as stored has the set merged into env: the same rules hold.
  store::JobRecord element;
  element.spec = model::ArrayElementSpec(*spec, 0);
  element.submitted_by = "alice";
  nlohmann::json stored = JobJson(element, false, EnvView::kSubmitter)["spec"]["env"];
  EXPECT_EQ(stored["LR"], "0.1");
  EXPECT_EQ(stored["KEY"], model::kSecretEnvValue);
}

TEST(EnvRender, OnlyTheSubmittersOwnIdentityIsTheSubmitter) {
  const auto job = Job(kSpec, "alice");
  auto caller = [](std::string name, Scope scope) {
    Caller c;
    c.name = std::move(name);
    c.kind = scope == Scope::kJob ? "job" : "user";
    c.scope = scope;
    return c;
  };
  Caller alice = caller("alice", Scope::kFull);
  alice.tenants["red"] = store::Role::kMember;
  EXPECT_EQ(EnvViewOf(alice, job), EnvView::kSubmitter);
  Caller bob = caller("bob", Scope::kFull);
  bob.tenants["red"] = store::Role::kTenantAdmin;
  EXPECT_EQ(EnvViewOf(bob, job), EnvView::kOther);
  Caller admin = caller("admin", Scope::kFull);
  admin.platform_admin = true;
  EXPECT_EQ(EnvViewOf(admin, job), EnvView::kOther);
  // Scoped credentials never see values, even under the submitter's name.
  Caller job_token = caller("alice", Scope::kJob);
  job_token.job_id = 7;
  EXPECT_EQ(EnvViewOf(job_token, job), EnvView::kOther);
  EXPECT_EQ(EnvViewOf(caller("alice", Scope::kMetrics), job), EnvView::kOther);
  EXPECT_EQ(EnvViewOf(Caller{}, Job(kSpec, "")), EnvView::kOther);
}

}  // namespace
}  // namespace berth::server
