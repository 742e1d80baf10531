#include "store/traffic_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "store/sqlite_scope.h"

namespace berth::store {
namespace {

constexpr std::string_view kTrafficSchema = R"sql(
CREATE TABLE IF NOT EXISTS service_traffic(
  tenant TEXT NOT NULL, service TEXT NOT NULL, hour_ms INTEGER NOT NULL,
  requests INTEGER NOT NULL, responses_2xx INTEGER NOT NULL, responses_4xx INTEGER NOT NULL,
  responses_5xx INTEGER NOT NULL, held INTEGER NOT NULL, latency_sum_ms INTEGER NOT NULL,
  latency_min_ms INTEGER NOT NULL, latency_max_ms INTEGER NOT NULL, latency_buckets TEXT NOT NULL,
  slo_windows INTEGER NOT NULL, slo_windows_met INTEGER NOT NULL,
  PRIMARY KEY(tenant, service, hour_ms)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS service_traffic_by_hour ON service_traffic(hour_ms);
)sql";

constexpr std::string_view kTrafficColumns =
    "tenant, service, hour_ms, requests, responses_2xx, responses_4xx, responses_5xx, held, "
    "latency_sum_ms, latency_min_ms, latency_max_ms, latency_buckets, slo_windows, "
    "slo_windows_met";

// Buckets as a JSON array of [index, count] pairs.
std::string BucketsText(const std::map<int, std::int64_t>& buckets) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [b, n] : buckets) out.push_back({b, n});
  return out.dump();
}

std::map<int, std::int64_t> BucketsOf(const std::string& text) {
  std::map<int, std::int64_t> out;
  const auto parsed = nlohmann::json::parse(text, nullptr, false);
  if (!parsed.is_array()) return out;
  for (const auto& pair : parsed) {
    if (pair.is_array() && pair.size() == 2 && pair[0].is_number_integer() &&
        pair[1].is_number_integer()) {
      out[pair[0].get<int>()] += pair[1].get<std::int64_t>();
    }
  }
  return out;
}

ServiceTraffic ReadRow(const Statement& st) {
  ServiceTraffic t;
  t.tenant = st.Text(0);
  t.service = st.Text(1);
  t.hour_ms = st.Int(2);
  t.requests = st.Int(3);
  t.responses_2xx = st.Int(4);
  t.responses_4xx = st.Int(5);
  t.responses_5xx = st.Int(6);
  t.held = st.Int(7);
  t.latency_sum_ms = st.Int(8);
  t.latency_min_ms = st.Int(9);
  t.latency_max_ms = st.Int(10);
  t.latency_buckets = BucketsOf(st.Text(11));
  t.slo_windows = st.Int(12);
  t.slo_windows_met = st.Int(13);
  return t;
}

}  // namespace

void ServiceTraffic::Add(const ServiceTraffic& other) {
  if (other.requests > 0) {
    latency_min_ms =
        requests > 0 ? std::min(latency_min_ms, other.latency_min_ms) : other.latency_min_ms;
    latency_max_ms = std::max(latency_max_ms, other.latency_max_ms);
  }
  requests += other.requests;
  responses_2xx += other.responses_2xx;
  responses_4xx += other.responses_4xx;
  responses_5xx += other.responses_5xx;
  held += other.held;
  latency_sum_ms += other.latency_sum_ms;
  for (const auto& [b, n] : other.latency_buckets) latency_buckets[b] += n;
  slo_windows += other.slo_windows;
  slo_windows_met += other.slo_windows_met;
}

Result<std::unique_ptr<ServiceTrafficStore>> ServiceTrafficStore::Open(const StoreLocation& where,
                                                                       std::int64_t retention_ms) {
  if (retention_ms < kTrafficHourMs) {
    return Fail(Code::kInvalidArgument, "request history must be kept at least an hour (e.g. 400d)",
                "retention");
  }
  auto db = OpenStateDatabase(where);
  if (!db) return std::unexpected(db.error());
  BERTH_RETURN_IF_ERROR(db->Exec(SchemaFor(db->dialect(), kTrafficSchema)));
  return std::unique_ptr<ServiceTrafficStore>(
      new ServiceTrafficStore(std::move(*db), retention_ms));
}

Status ServiceTrafficStore::Add(const std::vector<ServiceTraffic>& deltas, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto read =
      db_.Prepare(fmt::format("SELECT {} FROM service_traffic WHERE tenant = ? AND "
                              "service = ? AND hour_ms = ?",
                              kTrafficColumns));
  if (!read) return std::unexpected(read.error());
  // The row read above, added to and written back whole.
  std::string set;
  for (std::string_view c :
       {"requests", "responses_2xx", "responses_4xx", "responses_5xx", "held", "latency_sum_ms",
        "latency_min_ms", "latency_max_ms", "latency_buckets", "slo_windows", "slo_windows_met"}) {
    set += fmt::format("{}{} = excluded.{}", set.empty() ? "" : ", ", c, c);
  }
  auto write =
      db_.Prepare(fmt::format("INSERT INTO service_traffic({}) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                              "ON CONFLICT(tenant, service, hour_ms) DO UPDATE SET {}",
                              kTrafficColumns, set));
  if (!write) return std::unexpected(write.error());
  for (const ServiceTraffic& d : deltas) {
    const TimeMs hour = d.hour_ms - d.hour_ms % kTrafficHourMs;
    read->Reset();
    read->Bind(1, d.tenant).Bind(2, d.service).Bind(3, hour);
    auto row = read->Step();
    if (!row) return std::unexpected(row.error());
    ServiceTraffic t;
    if (*row) {
      t = ReadRow(*read);
    } else {
      t.tenant = d.tenant;
      t.service = d.service;
      t.hour_ms = hour;
    }
    read->Reset();
    t.Add(d);
    write->Reset();
    BERTH_RETURN_IF_ERROR(write->Bind(1, t.tenant)
                              .Bind(2, t.service)
                              .Bind(3, t.hour_ms)
                              .Bind(4, t.requests)
                              .Bind(5, t.responses_2xx)
                              .Bind(6, t.responses_4xx)
                              .Bind(7, t.responses_5xx)
                              .Bind(8, t.held)
                              .Bind(9, t.latency_sum_ms)
                              .Bind(10, t.latency_min_ms)
                              .Bind(11, t.latency_max_ms)
                              .Bind(12, BucketsText(t.latency_buckets))
                              .Bind(13, t.slo_windows)
                              .Bind(14, t.slo_windows_met)
                              .Run());
  }
  auto expire = db_.Prepare("DELETE FROM service_traffic WHERE hour_ms < ?");
  if (!expire) return std::unexpected(expire.error());
  BERTH_RETURN_IF_ERROR(expire->Bind(1, now - retention_ms_).Run());
  return tx.Commit();
}

Result<std::vector<ServiceTraffic>> ServiceTrafficStore::Range(TimeMs from, TimeMs to,
                                                               std::size_t max_rows,
                                                               const model::TenantScope& tenants) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(fmt::format(
      "SELECT {} FROM service_traffic WHERE hour_ms > ?1 AND hour_ms < ?2{} ORDER BY tenant, "
      "service, hour_ms",
      kTrafficColumns, ScopeSql(tenants, "tenant", 3)));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, from - kTrafficHourMs).Bind(2, to);
  BindScope(*st, 3, tenants);
  std::vector<ServiceTraffic> out;
  std::size_t rows = 0;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) return out;
    if (++rows > max_rows) {
      return Fail(Code::kResourceExhausted,
                  fmt::format("the window holds more than {} hours of services' requests; ask "
                              "for a shorter window",
                              max_rows),
                  "window");
    }
    ServiceTraffic t = ReadRow(*st);
    if (!out.empty() && out.back().tenant == t.tenant && out.back().service == t.service) {
      out.back().Add(t);
    } else {
      out.push_back(std::move(t));
    }
  }
}

}  // namespace berth::store
