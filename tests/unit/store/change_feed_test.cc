#include "store/change_feed.h"

#include <gtest/gtest.h>

namespace berth::store {
namespace {

TEST(ChangeFeed, ReplaysWhatFollowedAPositionInOrder) {
  ChangeFeed feed("e1", 8);
  EXPECT_EQ(feed.last(), 0U);
  feed.Publish(Topic::kJob, "1", "red", "main", "Pending");
  feed.Publish(Topic::kNode, "n1", "", "", "cordon");
  feed.Publish(Topic::kJob, "1", "red", "main", "Running");
  EXPECT_EQ(feed.last(), 3U);

  auto all = feed.Since(0, 100);
  EXPECT_FALSE(all.gap);
  ASSERT_EQ(all.changes.size(), 3U);
  EXPECT_EQ(all.changes[0].seq, 1U);
  EXPECT_EQ(all.changes[2].state, "Running");

  auto after = feed.Since(1, 100);
  ASSERT_EQ(after.changes.size(), 2U);
  EXPECT_EQ(after.changes[0].topic, Topic::kNode);
  EXPECT_EQ(after.changes[0].id, "n1");

  auto capped = feed.Since(0, 2);
  ASSERT_EQ(capped.changes.size(), 2U);
  EXPECT_EQ(capped.changes[1].seq, 2U);

  EXPECT_TRUE(feed.Since(3, 100).changes.empty());
  EXPECT_FALSE(feed.Since(3, 100).gap);
}

TEST(ChangeFeed, APositionTheRingMovedPastOrNeverGaveIsAGap) {
  ChangeFeed feed("e1", 4);
  for (int i = 0; i < 10; ++i) feed.Publish(Topic::kJob, std::to_string(i), "red", "main", "x");
  // Seqs 7..10 are kept: after 6 is complete, after 5 missed seq 6.
  EXPECT_FALSE(feed.Since(6, 100).gap);
  EXPECT_EQ(feed.Since(6, 100).changes.size(), 4U);
  auto missed = feed.Since(5, 100);
  EXPECT_TRUE(missed.gap);
  EXPECT_EQ(missed.changes.front().seq, 7U);
  // Ahead of the feed: another berthd's position.
  EXPECT_TRUE(feed.Since(11, 100).gap);
}

TEST(ChangeFeed, PositionsNameTheirEpoch) {
  ChangeFeed feed("1765000000000", 4);
  EXPECT_EQ(feed.Position(12), "1765000000000-12");
  EXPECT_EQ(feed.ParsePosition("1765000000000-12"), 12U);
  EXPECT_FALSE(feed.ParsePosition("1765000000001-12"));  // another start
  EXPECT_FALSE(feed.ParsePosition("1765000000000-"));
  EXPECT_FALSE(feed.ParsePosition("1765000000000-1x"));
  EXPECT_FALSE(feed.ParsePosition("12"));
  EXPECT_EQ(TopicName(Topic::kAlert), "alert");
}

}  // namespace
}  // namespace berth::store
