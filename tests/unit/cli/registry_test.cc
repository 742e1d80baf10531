// The command groups' registration (src/cli/registry.h): every command a
// group adds has something to run, and the command surface is the one
// docs/cli.md describes.
#include "cli/registry.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli/app.h"
#include "common/clock.h"

namespace berth::cli {
namespace {

TEST(CommandTable, EveryCommandTheGroupsAddHasSomethingToRun) {
  const std::vector<std::string> expected = {"submit",
                                             "jobs",
                                             "job",
                                             "why",
                                             "cancel",
                                             "checkpoint",
                                             "logs",
                                             "outputs",
                                             "cp",
                                             "status",
                                             "nodes",
                                             "gpus",
                                             "node",
                                             "node remove",
                                             "cordon",
                                             "drain",
                                             "uncordon",
                                             "alerts",
                                             "alert resolve",
                                             "alert rules show",
                                             "alert rules apply",
                                             "alert deliveries",
                                             "policy show",
                                             "policy versions",
                                             "policy apply",
                                             "policy diff",
                                             "policy rollback",
                                             "policy preview",
                                             "history export",
                                             "audit",
                                             "audit verify",
                                             "login",
                                             "logout",
                                             "whoami",
                                             "identity list",
                                             "identity create",
                                             "identity disable",
                                             "identity enable",
                                             "identity grant-platform-admin",
                                             "identity revoke-platform-admin",
                                             "member add",
                                             "member remove",
                                             "member list",
                                             "token create",
                                             "token list",
                                             "token revoke",
                                             "quota request",
                                             "quota requests",
                                             "quota show",
                                             "quota approve",
                                             "quota reject",
                                             "quota withdraw",
                                             "queues",
                                             "usage",
                                             "report ops",
                                             "price apply",
                                             "price show",
                                             "budget set",
                                             "budget list",
                                             "svc apply",
                                             "svc list",
                                             "svc show",
                                             "svc why",
                                             "svc logs",
                                             "svc scale",
                                             "svc rollout status",
                                             "svc rollout resume",
                                             "svc rollback",
                                             "svc delete",
                                             "session start",
                                             "session list",
                                             "session open",
                                             "session stop",
                                             "poc run",
                                             "poc rerun",
                                             "poc observe",
                                             "poc cleanup",
                                             "poc suite",
                                             "poc check",
                                             "version"};
  const auto table = CommandTable();
  for (const auto& name : expected) {
    ASSERT_TRUE(table.contains(name)) << name;
    EXPECT_TRUE(table.at(name)) << "berth " << name << " has no action";
  }
  // A group that only groups (berth policy) needs a subcommand, so it is
  // no command of its own.
  EXPECT_FALSE(table.contains("policy"));
  EXPECT_FALSE(table.contains("alert rules"));
  EXPECT_FALSE(table.contains("svc"));
  EXPECT_FALSE(table.contains("svc rollout"));
  EXPECT_FALSE(table.contains("session"));
  EXPECT_FALSE(table.contains("poc"));
  EXPECT_EQ(table.size(), expected.size());
}

TEST(CommandRegistry, TableNamesACommandAddedWithoutAnAction) {
  std::istringstream in;
  std::ostringstream out;
  ManualClock clock(0);
  const Environment env{in, out, out, std::nullopt, clock};
  CLI::App app;
  const std::string output = "table";
  CommandRegistry registry(app, env, output);
  auto* group = app.add_subcommand("group");
  group->require_subcommand(1);
  registry.OnRun(group->add_subcommand("done"),
                 [](ApiClient&, const Output&) -> Status { return {}; });
  group->add_subcommand("forgotten");
  auto* checked = app.add_subcommand("checked");
  registry.OnCheck(checked, [] { return kExitOk; });

  const auto table = registry.Table();
  EXPECT_EQ(table, (std::map<std::string, bool>{
                       {"group done", true}, {"group forgotten", false}, {"checked", false}}));
}

TEST(CommandRegistry, KeptFlagsOutliveTheGroupAndTheParseFillsThem) {
  std::istringstream in;
  std::ostringstream out;
  ManualClock clock(0);
  const Environment env{in, out, out, std::nullopt, clock};
  CLI::App app;
  const std::string output = "table";
  CommandRegistry registry(app, env, output);
  struct Flags {
    std::int64_t base = 0;
  };
  // As a group does: the flags live in the registry, not on its stack.
  auto add = [&registry] {
    auto& flags = registry.Keep<Flags>();
    auto* apply = registry.app().add_subcommand("apply");
    AddBase(apply, flags.base);
    return &flags;
  };
  const Flags* flags = add();
  app.parse("apply --base 7", false);
  EXPECT_EQ(flags->base, 7);
  EXPECT_THROW(app.parse("apply --base 0", false), CLI::ValidationError);
}

}  // namespace
}  // namespace berth::cli
