// The agent's fencing decision on a manual clock: when an agent out of
// contact with berthd must stop its runs, and that the count survives an
// agent restart (the contact file) without ever moving the fence later.
#include "agent/fence.h"

#include <gtest/gtest.h>

#include "model/fencing.h"
#include "test_util.h"

namespace berth::agent {
namespace {

using testing::TempDir;
using testing::WriteText;

constexpr std::int64_t kLeaseMs = 1'000;
constexpr std::int64_t kGraceMs = 2'000;

TEST(FenceTest, NeverDueBeforeTheFirstRegistration) {
  ManualClock clock;
  Fence fence(kGraceMs, {}, clock);
  fence.Restore();
  clock.Advance(3'600'000);
  EXPECT_FALSE(fence.Due()) << "without a lease there is nothing to count from";
  EXPECT_FALSE(fence.deadline_ms().has_value());
}

TEST(FenceTest, DueOnceLeasePlusGracePassWithoutContact) {
  ManualClock clock;
  Fence fence(kGraceMs, {}, clock);
  fence.Registered(kLeaseMs);
  const TimeMs registered = clock.NowMs();
  EXPECT_EQ(fence.deadline_ms(), registered + model::AgentFenceAfterMs(kLeaseMs, kGraceMs));

  clock.Advance(kLeaseMs + kGraceMs - 1);
  EXPECT_FALSE(fence.Due());
  clock.Advance(1);
  EXPECT_TRUE(fence.Due());
  clock.Advance(10'000);
  EXPECT_TRUE(fence.Due()) << "stays due until contact returns";

  fence.Registered(kLeaseMs);
  EXPECT_FALSE(fence.Due());
}

TEST(FenceTest, AnOpenStreamKeepsContact) {
  ManualClock clock;
  Fence fence(kGraceMs, {}, clock);
  fence.Registered(kLeaseMs);
  for (int i = 0; i < 100; ++i) {
    clock.Advance(500);
    fence.InContact();
    ASSERT_FALSE(fence.Due()) << "after " << i;
  }
  clock.Advance(kLeaseMs + kGraceMs);
  EXPECT_TRUE(fence.Due());
}

TEST(FenceTest, FencingOffNeverFences) {
  ManualClock clock;
  Fence fence(std::nullopt, {}, clock);
  fence.Registered(kLeaseMs);
  clock.Advance(3'600'000);
  EXPECT_FALSE(fence.Due());
}

// An agent restarted while cut off counts from the contact its predecessor
// had, not from its own start.
TEST(FenceTest, ARestartedAgentKeepsCountingFromTheLastContact) {
  TempDir dir;
  const auto file = dir.path() / "contact.json";
  ManualClock clock;
  TimeMs contact = 0;
  {
    Fence fence(kGraceMs, file, clock);
    fence.Restore();
    fence.Registered(kLeaseMs);
    for (int i = 0; i < 5; ++i) {
      clock.Advance(400);
      fence.InContact();
    }
    contact = fence.last_contact_ms();
  }
  clock.Advance(kLeaseMs);  // the agent is down, then starts again
  Fence restarted(kGraceMs, file, clock);
  restarted.Restore();
  ASSERT_TRUE(restarted.deadline_ms().has_value());
  // Saved at most once a second: up to a second early, never late.
  EXPECT_LE(*restarted.deadline_ms(), contact + kLeaseMs + kGraceMs);
  EXPECT_GE(*restarted.deadline_ms(), contact + kLeaseMs + kGraceMs - 1'000);
  clock.Set(contact + kLeaseMs + kGraceMs);
  EXPECT_TRUE(restarted.Due());
}

TEST(FenceTest, AContactRecordedInTheFutureCountsFromNow) {
  TempDir dir;
  const auto file = dir.path() / "contact.json";
  ManualClock clock;
  WriteText(file, R"({"last_contact_ms": )" + std::to_string(clock.NowMs() + 3'600'000) +
                      R"(, "lease_ms": 1000})");
  Fence fence(kGraceMs, file, clock);
  fence.Restore();
  EXPECT_EQ(fence.deadline_ms(), clock.NowMs() + kLeaseMs + kGraceMs);
}

TEST(FenceTest, AnUnreadableContactFileLeavesFencingToTheNextRegistration) {
  TempDir dir;
  const auto file = dir.path() / "contact.json";
  WriteText(file, "{\"last_contact_ms\": \"yesterday\"");
  ManualClock clock;
  Fence fence(kGraceMs, file, clock);
  fence.Restore();
  EXPECT_FALSE(fence.deadline_ms().has_value());
  fence.Registered(kLeaseMs);
  EXPECT_TRUE(fence.deadline_ms().has_value());
}

}  // namespace
}  // namespace berth::agent
