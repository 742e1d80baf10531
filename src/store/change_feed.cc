#include "store/change_feed.h"

#include <fmt/format.h>

#include <charconv>

namespace berth::store {

std::string_view TopicName(Topic t) {
  switch (t) {
    case Topic::kJob:
      return "job";
    case Topic::kNode:
      return "node";
    case Topic::kAlert:
      return "alert";
  }
  return "job";
}

ChangeFeed::ChangeFeed(std::string epoch, std::size_t capacity)
    : epoch_(std::move(epoch)), capacity_(capacity == 0 ? 1 : capacity) {}

void ChangeFeed::Publish(Topic topic, std::string id, std::string tenant, std::string queue,
                         std::string state) {
  std::lock_guard lock(mu_);
  ring_.push_back(
      Change{++last_, topic, std::move(id), std::move(tenant), std::move(queue), std::move(state)});
  if (ring_.size() > capacity_) ring_.pop_front();
}

ChangeFeed::Read ChangeFeed::Since(std::uint64_t after, std::size_t max) const {
  Read out;
  std::lock_guard lock(mu_);
  if (after > last_) {
    // A position this feed never gave: another berthd's, of the same epoch
    // text by chance, or made up.
    out.gap = true;
    return out;
  }
  if (after == last_) return out;
  const std::uint64_t oldest = ring_.empty() ? last_ + 1 : ring_.front().seq;
  if (after + 1 < oldest) out.gap = true;
  // ring_ holds seqs oldest..last_ contiguously.
  std::size_t start = after + 1 < oldest ? 0 : static_cast<std::size_t>(after + 1 - oldest);
  for (std::size_t i = start; i < ring_.size() && out.changes.size() < max; ++i) {
    out.changes.push_back(ring_[i]);
  }
  return out;
}

std::uint64_t ChangeFeed::last() const {
  std::lock_guard lock(mu_);
  return last_;
}

std::string ChangeFeed::Position(std::uint64_t seq) const {
  return fmt::format("{}-{}", epoch_, seq);
}

std::optional<std::uint64_t> ChangeFeed::ParsePosition(std::string_view text) const {
  const auto dash = text.rfind('-');
  if (dash == std::string_view::npos || text.substr(0, dash) != epoch_) return std::nullopt;
  const std::string_view digits = text.substr(dash + 1);
  std::uint64_t seq = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seq);
  if (ec != std::errc() || p != digits.data() + digits.size() || digits.empty()) {
    return std::nullopt;
  }
  return seq;
}

}  // namespace berth::store
