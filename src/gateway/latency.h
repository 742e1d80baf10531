// Request latency per route, from HAProxy's request log (request_log.h):
// a fixed log-scale histogram and a per-route aggregator that gives, for a
// window (the requests logged since the previous Take), counts by status
// class and p50/p95/p99, and, since the route was first seen, cumulative
// buckets for a Prometheus histogram. Pure (no clock, no I/O); the log
// collector feeds it from its reader thread.
//
// Memory is bounded whatever the number of requests: a histogram is a fixed
// array, a route holds two, and the aggregator holds at most kMaxLatencyRoutes
// routes (lines for further routes are counted, not kept).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gateway/request_log.h"

namespace berth::gateway {

// Buckets per doubling: 8, so bucket bounds grow by 2^(1/8) = 1.0905.
inline constexpr int kLatencyStepsPerDoubling = 8;
// Finite bounds: 0 ms, then 2^(i/8) ms for i = 0..160, i.e. 1 ms to 2^20 ms
// (1,048,576 ms, 17.5 min: above the default request timeout of 5 min).
inline constexpr int kLatencyFiniteBounds = 2 + 20 * kLatencyStepsPerDoubling;
// Plus one overflow bucket (+Inf).
inline constexpr int kLatencyBuckets = kLatencyFiniteBounds + 1;
// The largest finite bound, in ms.
inline constexpr std::int64_t kLatencyMaxBoundMs = std::int64_t{1} << 20;

// Bucket b holds latencies v (integer ms, as HAProxy logs them) with
// LatencyBucketBound(b - 1) < v <= LatencyBucketBound(b): bucket 0 holds
// 0 ms, bucket 1 holds 1 ms, then each bucket is 2^(1/8) wider than the
// one before; the last holds everything above 2^20 ms.
double LatencyBucketBound(int bucket);  // +Inf for the last
int LatencyBucketOf(std::int64_t ms);   // negative ms count as 0

// One cumulative bucket as Prometheus has them: requests with latency <= le_ms.
struct LatencyBucket {
  double le_ms = 0;  // +Inf for the last
  std::int64_t count = 0;
};

// A fixed-size histogram of latencies in ms. 1.3 KiB, whatever the count.
//
// Quantile error bound: Quantile(q) estimates the nearest-rank q-quantile
// (the smallest logged value v with at least ceil(q * count) values <= v).
// The estimate lies in the same bucket as the true value and is the
// bucket's geometric middle, clamped to the integers the bucket can hold
// and to the observed min and max. So it is within 2^(1/16) - 1 = 4.43% of
// the true value; exact for values up to 11 ms (one integer per bucket),
// for the min and for the max; and above 2^20 ms it is the max.
class LatencyHistogram {
 public:
  void Add(std::int64_t ms);
  void Merge(const LatencyHistogram& other);
  void Clear() { *this = LatencyHistogram(); }

  std::int64_t count() const { return count_; }
  std::int64_t sum_ms() const { return sum_ms_; }
  std::int64_t min_ms() const { return count_ ? min_ms_ : 0; }
  std::int64_t max_ms() const { return count_ ? max_ms_ : 0; }
  std::int64_t bucket_count(int bucket) const { return counts_[bucket]; }

  // q in [0, 1]; 0 when the histogram is empty.
  double Quantile(double q) const;
  // The buckets that hold requests, as (index, count), ascending; and the
  // histogram they came from, with its sum, min and max (a kept histogram,
  // store/traffic_store.h). Indexes outside 0..kLatencyBuckets-1 and
  // negative counts are ignored.
  std::vector<std::pair<int, std::int64_t>> NonEmptyBuckets() const;
  static LatencyHistogram FromBuckets(const std::vector<std::pair<int, std::int64_t>>& buckets,
                                      std::int64_t sum_ms, std::int64_t min_ms,
                                      std::int64_t max_ms);
  // Cumulative counts at the powers of two from 1 ms to 2^20 ms and +Inf
  // (22 buckets; every one a bucket bound, so exact). Prometheus wants few
  // buckets per series; the fine buckets stay for the quantiles.
  std::vector<LatencyBucket> PrometheusBuckets() const;

 private:
  std::array<std::int64_t, kLatencyBuckets> counts_{};
  std::int64_t count_ = 0;
  std::int64_t sum_ms_ = 0;
  std::int64_t min_ms_ = 0;
  std::int64_t max_ms_ = 0;
};

// One route's requests in a window (Gateway::TakeLatency).
struct RouteLatency {
  std::string tenant;
  std::string service;
  std::int64_t requests = 0;  // logged in the window (answered or not)
  std::int64_t responses_2xx = 0;
  std::int64_t responses_4xx = 0;
  std::int64_t responses_5xx = 0;
  std::int64_t held = 0;  // of them, held at zero servers first (hold included in latency)
  // Latency (HAProxy's Ta: first request byte to last response byte, hold
  // at zero included), estimated from the histogram (LatencyHistogram's
  // error bound). 0 when requests == 0.
  double p50_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
  std::int64_t max_ms = 0;
  // The window's histogram, for a history that merges windows
  // (LatencyHistogram::FromBuckets).
  std::int64_t sum_ms = 0;
  std::int64_t min_ms = 0;
  std::vector<std::pair<int, std::int64_t>> buckets;
};

// One route's requests since it was first seen (for /metrics): counters
// only grow, until the route is forgotten (it left the gateway's routes).
struct RouteLatencyHistogram {
  std::string tenant;
  std::string service;
  std::int64_t count = 0;
  std::int64_t sum_ms = 0;
  std::int64_t responses_2xx = 0;
  std::int64_t responses_4xx = 0;
  std::int64_t responses_5xx = 0;
  std::int64_t held = 0;
  std::vector<LatencyBucket> buckets;  // cumulative, le ascending, last +Inf
};

// What the log collector did with the datagrams it received.
struct RequestLogCounters {
  std::int64_t datagrams = 0;  // received
  std::int64_t recorded = 0;   // counted in a route's histogram
  std::int64_t no_route = 0;   // parsed, but answered by the frontend itself (404, bad request)
  // Lines without the request tag: HAProxy's own messages to the
  // frontend's log target ("Proxy berth stopped" at a reload). Expected.
  std::int64_t haproxy_messages = 0;
  std::int64_t unparsed = 0;          // tagged, but did not parse (last_error says why)
  std::int64_t over_route_limit = 0;  // for a route beyond kMaxLatencyRoutes
  std::string last_error;
  std::string last_message;  // the last of haproxy_messages, quoted
};

// At most this many routes are kept; far above a gateway's service count.
inline constexpr std::size_t kMaxLatencyRoutes = 4096;

// Per-route windows and cumulative histograms. Not thread-safe: the log
// collector locks around it.
class LatencyAggregator {
 public:
  // Counts one parsed line (or, with an error, one that did not parse).
  void Record(const RequestLogEntry& entry);
  void RecordUnparsed(std::string error);
  void RecordMessage(std::string text);
  void CountDatagram() { ++counters_.datagrams; }

  // Every known route's window, in backend-name order, and a new window.
  // Routes with no request in the window are listed with requests == 0.
  std::vector<RouteLatency> TakeWindow();
  std::vector<RouteLatencyHistogram> Cumulative() const;
  const RequestLogCounters& counters() const { return counters_; }

  // Drops every route not in `backends` ("<tenant>:<service>"): routes that
  // left the gateway, so that service churn cannot grow memory.
  void Retain(const std::vector<std::string>& backends);
  std::size_t routes() const { return routes_.size(); }

 private:
  struct Counts {
    std::int64_t requests = 0;
    std::int64_t responses_2xx = 0;
    std::int64_t responses_4xx = 0;
    std::int64_t responses_5xx = 0;
    std::int64_t held = 0;
  };
  struct PerRoute {
    std::string tenant;
    std::string service;
    LatencyHistogram window;
    Counts window_counts;
    LatencyHistogram total;
    Counts total_counts;
  };
  std::map<std::string, PerRoute, std::less<>> routes_;  // by backend name
  RequestLogCounters counters_;
};

}  // namespace berth::gateway
