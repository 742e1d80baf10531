// Each inference service's requests through the gateway, by hour
// (docs/metering.md, "Requests in the operations report"): what the
// operations report's inference section shows over any window, long after
// the gateway's own counters and the service controller's last hour are
// gone. The service controller adds what each round's request log showed
// and flushes once a minute; a berthd that dies loses at most that minute.
//
// The latency histogram is kept as gateway/latency.h's buckets (an index
// and a count each, the empty ones left out), so that percentiles over any
// set of hours are the gateway's own estimate over their merged requests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/tenant_scope.h"
#include "store/sqlite_db.h"

namespace berth::store {

inline constexpr std::int64_t kTrafficHourMs = 3'600'000;

struct ServiceTraffic {
  std::string tenant;
  std::string service;
  TimeMs hour_ms = 0;  // the hour's start (a row), or the first hour summed (a range)
  std::int64_t requests = 0;
  std::int64_t responses_2xx = 0;
  std::int64_t responses_4xx = 0;
  std::int64_t responses_5xx = 0;
  std::int64_t held = 0;  // held at the gateway while the service had no replica
  std::int64_t latency_sum_ms = 0;
  std::int64_t latency_min_ms = 0;  // of the requests counted; 0 when none
  std::int64_t latency_max_ms = 0;
  std::map<int, std::int64_t> latency_buckets;  // bucket index -> requests
  // The controller's SLO windows (one per round with requests): how many,
  // and how many kept the latency target.
  std::int64_t slo_windows = 0;
  std::int64_t slo_windows_met = 0;
  // Sums counts, merges buckets and min/max.
  void Add(const ServiceTraffic& other);
};

class ServiceTrafficStore {
 public:
  // Opens `<data_dir>/berth.db` on a connection of its own, creating the
  // table if needed. Hours older than `retention_ms` are dropped as new
  // ones are written.
  static Result<std::unique_ptr<ServiceTrafficStore>> Open(const StoreLocation& where,
                                                           std::int64_t retention_ms);

  // Adds each delta to its (tenant, service, hour) row, all in one
  // transaction, and drops hours older than the retention before `now`.
  [[nodiscard]] Status Add(const std::vector<ServiceTraffic>& deltas, TimeMs now);
  // Per service, the hours that overlap [from, to), summed (an hour is
  // counted whole: the report's request figures are to the hour). Sorted by
  // tenant and service.
  // Only the services of `tenants`, filtered in the query, so other tenants'
  // hours never count against the cap. Reads at most `max_rows` hour rows:
  // past them, ResourceExhausted (field "window"), as the report's other
  // reads are capped.
  [[nodiscard]] Result<std::vector<ServiceTraffic>> Range(
      TimeMs from, TimeMs to, std::size_t max_rows,
      const model::TenantScope& tenants = model::TenantScope::All());

 private:
  ServiceTrafficStore(Database db, std::int64_t retention_ms)
      : db_(std::move(db)), retention_ms_(retention_ms) {}
  std::mutex mu_;  // one connection: the controller writes, the API reads
  Database db_;
  std::int64_t retention_ms_;
};

}  // namespace berth::store
