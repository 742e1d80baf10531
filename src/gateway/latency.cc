#include "gateway/latency.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <set>

namespace berth::gateway {

namespace {

// 2^(j/8) for j = 0..8.
const std::array<double, kLatencyStepsPerDoubling + 1>& LatencySteps() {
  static const auto steps = [] {
    std::array<double, kLatencyStepsPerDoubling + 1> s{};
    for (int j = 0; j <= kLatencyStepsPerDoubling; ++j) {
      s[j] = std::exp2(static_cast<double>(j) / kLatencyStepsPerDoubling);
    }
    s[kLatencyStepsPerDoubling] = 2.0;
    return s;
  }();
  return steps;
}

constexpr int kLatencyOverflow = kLatencyBuckets - 1;

}  // namespace

double LatencyBucketBound(int bucket) {
  if (bucket <= 0) return 0;
  if (bucket >= kLatencyOverflow) return std::numeric_limits<double>::infinity();
  const int i = bucket - 1;
  return std::ldexp(LatencySteps()[i % kLatencyStepsPerDoubling], i / kLatencyStepsPerDoubling);
}

int LatencyBucketOf(std::int64_t ms) {
  if (ms <= 0) return 0;
  if (ms > kLatencyMaxBoundMs) return kLatencyOverflow;
  const auto u = static_cast<std::uint64_t>(ms);
  const int k = std::bit_width(u) - 1;  // 2^k <= ms < 2^(k+1)
  const int base = 1 + k * kLatencyStepsPerDoubling;
  if (u == (std::uint64_t{1} << k)) return base;
  // ms / 2^k is exact (a power-of-two division of an integer below 2^21).
  const double frac = std::ldexp(static_cast<double>(ms), -k);
  const auto& steps = LatencySteps();
  int j = 1;
  while (steps[j] < frac) ++j;  // steps[8] == 2 > frac: stops
  return base + j;
}

void LatencyHistogram::Add(std::int64_t ms) {
  ms = std::max<std::int64_t>(ms, 0);
  ++counts_[LatencyBucketOf(ms)];
  if (count_ == 0) {
    min_ms_ = max_ms_ = ms;
  } else {
    min_ms_ = std::min(min_ms_, ms);
    max_ms_ = std::max(max_ms_, ms);
  }
  ++count_;
  sum_ms_ += ms;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (int b = 0; b < kLatencyBuckets; ++b) counts_[b] += other.counts_[b];
  min_ms_ = count_ == 0 ? other.min_ms_ : std::min(min_ms_, other.min_ms_);
  max_ms_ = count_ == 0 ? other.max_ms_ : std::max(max_ms_, other.max_ms_);
  count_ += other.count_;
  sum_ms_ += other.sum_ms_;
}

double LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Nearest rank; the epsilon keeps 0.95 * 100 at rank 95, not 96.
  auto rank = static_cast<std::int64_t>(std::ceil(q * static_cast<double>(count_) - 1e-9));
  rank = std::clamp<std::int64_t>(rank, 1, count_);
  if (rank == 1) return static_cast<double>(min_ms_);
  if (rank == count_) return static_cast<double>(max_ms_);
  std::int64_t seen = 0;
  int b = 0;
  for (; b < kLatencyBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) break;
  }
  if (b == 0) return 0;
  if (b >= kLatencyOverflow) return static_cast<double>(max_ms_);
  const double lo = LatencyBucketBound(b - 1);
  const double hi = LatencyBucketBound(b);
  double estimate = std::sqrt(lo * hi);
  // The integers bucket b can hold: floor(lo) + 1 .. floor(hi).
  estimate = std::clamp(estimate, std::floor(lo) + 1, std::floor(hi));
  return std::clamp(estimate, static_cast<double>(min_ms_), static_cast<double>(max_ms_));
}

std::vector<std::pair<int, std::int64_t>> LatencyHistogram::NonEmptyBuckets() const {
  std::vector<std::pair<int, std::int64_t>> out;
  for (int b = 0; b < kLatencyBuckets; ++b) {
    if (counts_[b] > 0) out.emplace_back(b, counts_[b]);
  }
  return out;
}

LatencyHistogram LatencyHistogram::FromBuckets(
    const std::vector<std::pair<int, std::int64_t>>& buckets, std::int64_t sum_ms,
    std::int64_t min_ms, std::int64_t max_ms) {
  LatencyHistogram h;
  for (const auto& [b, n] : buckets) {
    if (b < 0 || b >= kLatencyBuckets || n <= 0) continue;
    h.counts_[b] += n;
    h.count_ += n;
  }
  if (h.count_ == 0) return h;
  h.sum_ms_ = sum_ms;
  h.min_ms_ = std::max<std::int64_t>(min_ms, 0);
  h.max_ms_ = std::max(h.min_ms_, max_ms);
  return h;
}

std::vector<LatencyBucket> LatencyHistogram::PrometheusBuckets() const {
  std::vector<LatencyBucket> out;
  std::int64_t seen = 0;
  int b = 0;
  for (int k = 0; k <= 20; ++k) {
    const int last = 1 + k * kLatencyStepsPerDoubling;  // bound 2^k ms
    for (; b <= last; ++b) seen += counts_[b];
    out.push_back({static_cast<double>(std::int64_t{1} << k), seen});
  }
  out.push_back({std::numeric_limits<double>::infinity(), count_});
  return out;
}

void LatencyAggregator::Record(const RequestLogEntry& entry) {
  if (!entry.has_route()) {
    ++counters_.no_route;
    return;
  }
  auto it = routes_.find(entry.backend);
  if (it == routes_.end()) {
    if (routes_.size() >= kMaxLatencyRoutes) {
      ++counters_.over_route_limit;
      return;
    }
    it = routes_.emplace(entry.backend, PerRoute{}).first;
    it->second.tenant = entry.tenant;
    it->second.service = entry.service;
  }
  ++counters_.recorded;
  PerRoute& r = it->second;
  for (Counts* c : {&r.window_counts, &r.total_counts}) {
    ++c->requests;
    if (entry.status >= 200 && entry.status < 300) ++c->responses_2xx;
    if (entry.status >= 400 && entry.status < 500) ++c->responses_4xx;
    if (entry.status >= 500 && entry.status < 600) ++c->responses_5xx;
    if (entry.held_ms >= 0) ++c->held;
  }
  // HAProxy logs Ta for every request it logs; a negative one (none) is
  // counted above but kept out of the latencies.
  if (entry.latency_ms() >= 0) {
    r.window.Add(entry.latency_ms());
    r.total.Add(entry.latency_ms());
  }
}

void LatencyAggregator::RecordUnparsed(std::string error) {
  ++counters_.unparsed;
  counters_.last_error = std::move(error);
}

void LatencyAggregator::RecordMessage(std::string text) {
  ++counters_.haproxy_messages;
  counters_.last_message = std::move(text);
}

std::vector<RouteLatency> LatencyAggregator::TakeWindow() {
  std::vector<RouteLatency> out;
  out.reserve(routes_.size());
  for (auto& [backend, r] : routes_) {
    RouteLatency l;
    l.tenant = r.tenant;
    l.service = r.service;
    l.requests = r.window_counts.requests;
    l.responses_2xx = r.window_counts.responses_2xx;
    l.responses_4xx = r.window_counts.responses_4xx;
    l.responses_5xx = r.window_counts.responses_5xx;
    l.held = r.window_counts.held;
    l.p50_ms = r.window.Quantile(0.50);
    l.p95_ms = r.window.Quantile(0.95);
    l.p99_ms = r.window.Quantile(0.99);
    l.max_ms = r.window.max_ms();
    l.sum_ms = r.window.sum_ms();
    l.min_ms = r.window.min_ms();
    l.buckets = r.window.NonEmptyBuckets();
    out.push_back(std::move(l));
    r.window.Clear();
    r.window_counts = Counts{};
  }
  return out;
}

std::vector<RouteLatencyHistogram> LatencyAggregator::Cumulative() const {
  std::vector<RouteLatencyHistogram> out;
  out.reserve(routes_.size());
  for (const auto& [backend, r] : routes_) {
    RouteLatencyHistogram h;
    h.tenant = r.tenant;
    h.service = r.service;
    h.count = r.total.count();
    h.sum_ms = r.total.sum_ms();
    h.responses_2xx = r.total_counts.responses_2xx;
    h.responses_4xx = r.total_counts.responses_4xx;
    h.responses_5xx = r.total_counts.responses_5xx;
    h.held = r.total_counts.held;
    h.buckets = r.total.PrometheusBuckets();
    out.push_back(std::move(h));
  }
  return out;
}

void LatencyAggregator::Retain(const std::vector<std::string>& backends) {
  const std::set<std::string, std::less<>> keep(backends.begin(), backends.end());
  std::erase_if(routes_, [&](const auto& kv) { return !keep.contains(kv.first); });
}

}  // namespace berth::gateway
