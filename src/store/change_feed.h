// What changed in the control plane's state, in the order it was
// committed, for those who watch it live (the API's GET /v1/events, which
// the web console listens to instead of polling). A change is published
// only after the write it describes is durable, so a watcher that refetches
// on it reads the new state.
//
// The feed is this berthd's memory, not state: it keeps the last
// `capacity` changes, numbered from 1 within an epoch (the berthd's start).
// A watcher that reconnects names the last change it saw; Since() replays
// what followed, or says it cannot (the ring moved past it, or the feed is
// another berthd's) and the watcher refetches everything. Nothing is lost
// that a watcher relies on: the feed says when to look, the API says what
// is there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace berth::store {

enum class Topic { kJob, kNode, kAlert };
std::string_view TopicName(Topic t);

struct Change {
  std::uint64_t seq = 0;  // 1, 2, … within the feed's epoch
  Topic topic = Topic::kJob;
  // The job's or alert's id, or the node's name.
  std::string id;
  // The job's tenant and queue ("" for nodes and alerts): who may hear of it.
  std::string tenant;
  std::string queue;
  // The job's state, the alert's ("open", "resolved"), or what changed on
  // the node ("registered", "state", "health", "cordon", "allocation",
  // "removed").
  std::string state;
};

class ChangeFeed {
 public:
  // `epoch`: this feed's identity, distinct per berthd start (berthd uses
  // its start time), so a watcher's position from another one is refused.
  explicit ChangeFeed(std::string epoch, std::size_t capacity = 8192);

  // Appends a change; its seq is the next one.
  void Publish(Topic topic, std::string id, std::string tenant, std::string queue,
               std::string state);

  struct Read {
    std::vector<Change> changes;  // oldest first, at most `max`
    // The changes after the position asked for are no longer all here (or
    // the position is not this feed's): the watcher missed some.
    bool gap = false;
  };
  // The changes after `after` (0: from the feed's start), up to `max`.
  Read Since(std::uint64_t after, std::size_t max) const;
  // The seq of the newest change (0: none yet).
  std::uint64_t last() const;
  const std::string& epoch() const { return epoch_; }

  // A watcher's position as sent on the wire ("<epoch>-<seq>") and parsed
  // back: the seq, or nullopt when the text is malformed or names another
  // epoch.
  std::string Position(std::uint64_t seq) const;
  std::optional<std::uint64_t> ParsePosition(std::string_view text) const;

 private:
  const std::string epoch_;
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::deque<Change> ring_;  // the newest `capacity_` changes
  std::uint64_t last_ = 0;
};

// Publishes to `feed` when there is one (a store without a watcher has
// none).
inline void Publish(ChangeFeed* feed, Topic topic, std::string id, std::string tenant = {},
                    std::string queue = {}, std::string state = {}) {
  if (feed != nullptr) {
    feed->Publish(topic, std::move(id), std::move(tenant), std::move(queue), std::move(state));
  }
}

}  // namespace berth::store
