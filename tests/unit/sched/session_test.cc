// When a session ends on its own: its maximum lifetime, counted from its
// start, and its idle window, counted from the last request, the last busy
// GPU reading or the replica's start, whichever is latest.
#include "sched/session.h"

#include <gtest/gtest.h>

namespace berth::sched {
namespace {

constexpr TimeMs kMinute = 60'000;
constexpr TimeMs kT0 = 1'800'000'000'000;

model::SessionLimits Limits(std::int64_t lifetime_min, std::int64_t idle_min) {
  model::SessionLimits l;
  l.max_lifetime_ms = lifetime_min * kMinute;
  l.idle_window_ms = idle_min * kMinute;
  return l;
}

SessionActivity Running(TimeMs since) {
  SessionActivity a;
  a.started_ms = kT0;
  a.running = true;
  a.running_since_ms = since;
  return a;
}

TEST(Session, ItEndsAtItsMaximumLifetimeCountedFromItsStart) {
  SessionActivity a = Running(kT0 + 30 * kMinute);  // waited half an hour for a GPU
  a.last_request_ms = kT0 + 119 * kMinute;
  const auto limits = Limits(120, 60);
  auto before = JudgeSession(limits, a, kT0 + 119 * kMinute);
  EXPECT_EQ(before.end, SessionEnd::kNone);
  EXPECT_EQ(before.expires_ms, kT0 + 120 * kMinute);
  auto at = JudgeSession(limits, a, kT0 + 120 * kMinute);
  EXPECT_EQ(at.end, SessionEnd::kLifetime);
  EXPECT_NE(at.reason.find("maximum lifetime of 2h"), std::string::npos) << at.reason;
  // Busy or not, waiting or not.
  a.running = false;
  EXPECT_EQ(JudgeSession(limits, a, kT0 + 121 * kMinute).end, SessionEnd::kLifetime);
}

TEST(Session, ItIsIdleOnlyAfterAWholeWindowWithoutRequestsOrBusyGpus) {
  const auto limits = Limits(24 * 60, 30);
  SessionActivity a = Running(kT0 + 5 * kMinute);
  // Nothing since its replica started: idle from then.
  auto v = JudgeSession(limits, a, kT0 + 34 * kMinute);
  EXPECT_EQ(v.end, SessionEnd::kNone);
  EXPECT_EQ(v.idle_since_ms, kT0 + 5 * kMinute);
  EXPECT_EQ(v.idle_ends_ms, kT0 + 35 * kMinute);
  EXPECT_EQ(JudgeSession(limits, a, kT0 + 35 * kMinute).end, SessionEnd::kIdle);

  // A request restarts the window; so does a busy GPU reading.
  a.last_request_ms = kT0 + 20 * kMinute;
  EXPECT_EQ(JudgeSession(limits, a, kT0 + 49 * kMinute).end, SessionEnd::kNone);
  a.last_gpu_busy_ms = kT0 + 40 * kMinute;
  auto busy = JudgeSession(limits, a, kT0 + 69 * kMinute);
  EXPECT_EQ(busy.end, SessionEnd::kNone);
  EXPECT_EQ(busy.idle_since_ms, kT0 + 40 * kMinute);
  auto idle = JudgeSession(limits, a, kT0 + 70 * kMinute);
  EXPECT_EQ(idle.end, SessionEnd::kIdle);
  EXPECT_NE(idle.reason.find("idle for 30m"), std::string::npos) << idle.reason;
  EXPECT_NE(idle.reason.find("under 5% utilization"), std::string::npos) << idle.reason;
}

TEST(Session, NotRunningIsNeverIdleAndAZeroWindowNeverCulls) {
  SessionActivity waiting;
  waiting.started_ms = kT0;
  EXPECT_EQ(JudgeSession(Limits(600, 10), waiting, kT0 + 300 * kMinute).end, SessionEnd::kNone);
  SessionActivity a = Running(kT0);
  auto v = JudgeSession(Limits(600, 0), a, kT0 + 599 * kMinute);
  EXPECT_EQ(v.end, SessionEnd::kNone);
  EXPECT_EQ(v.idle_ends_ms, 0);
  EXPECT_EQ(v.idle_since_ms, kT0);
}

}  // namespace
}  // namespace berth::sched
