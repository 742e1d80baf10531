// TelemetryStore (telemetry_store.h, docs/metering.md "Telemetry"). Two
// locks: `mu` guards the in-memory buckets and is all Ingest ever takes, so
// the agent stream never waits on the disk; `db_mu` guards the connection
// and is held for a whole Flush and a whole query, so a query sees every
// bucket exactly once (in memory, or on disk once the flush committed).
// Order: db_mu before mu.
#include "store/telemetry_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "store/sqlite_db.h"

namespace berth::store {
namespace {

constexpr std::int64_t kMinuteMs = 60'000;
constexpr std::int64_t kHourMs = 3'600'000;
constexpr TimeMs kNever = std::numeric_limits<TimeMs>::min();

// Bucket rows: one per GPU, bucket start and set of runs. run_ids is the
// sorted run ids joined by ',' (run ids are JOB.REPLICA.ATTEMPT). The run
// side table indexes buckets by run, so a run's summary reads only its own
// rows. Retention deletes by start_ms through the start indexes.
constexpr std::string_view kTelemetrySchema = R"sql(
CREATE TABLE IF NOT EXISTS telemetry_1m(
  uuid TEXT NOT NULL, start_ms INTEGER NOT NULL, run_ids TEXT NOT NULL, node TEXT NOT NULL,
  gpu INTEGER NOT NULL, samples INTEGER NOT NULL, util_sum INTEGER NOT NULL,
  util_max INTEGER NOT NULL, mem_util_sum INTEGER NOT NULL, mem_used_sum INTEGER NOT NULL,
  mem_used_max INTEGER NOT NULL, mem_total INTEGER NOT NULL, temp_max INTEGER NOT NULL,
  power_sum_mw INTEGER NOT NULL, ecc_dbe_max INTEGER NOT NULL, last_xid INTEGER NOT NULL,
  idle_samples INTEGER NOT NULL, PRIMARY KEY(uuid, start_ms, run_ids)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS telemetry_1m_by_start ON telemetry_1m(start_ms);
CREATE TABLE IF NOT EXISTS telemetry_1h(
  uuid TEXT NOT NULL, start_ms INTEGER NOT NULL, run_ids TEXT NOT NULL, node TEXT NOT NULL,
  gpu INTEGER NOT NULL, samples INTEGER NOT NULL, util_sum INTEGER NOT NULL,
  util_max INTEGER NOT NULL, mem_util_sum INTEGER NOT NULL, mem_used_sum INTEGER NOT NULL,
  mem_used_max INTEGER NOT NULL, mem_total INTEGER NOT NULL, temp_max INTEGER NOT NULL,
  power_sum_mw INTEGER NOT NULL, ecc_dbe_max INTEGER NOT NULL, last_xid INTEGER NOT NULL,
  idle_samples INTEGER NOT NULL, PRIMARY KEY(uuid, start_ms, run_ids)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS telemetry_1h_by_start ON telemetry_1h(start_ms);
CREATE TABLE IF NOT EXISTS telemetry_run(
  run_id TEXT NOT NULL, width_ms INTEGER NOT NULL, start_ms INTEGER NOT NULL, uuid TEXT NOT NULL,
  run_ids TEXT NOT NULL, PRIMARY KEY(run_id, width_ms, start_ms, uuid, run_ids)) WITHOUT ROWID;
)sql";

constexpr std::string_view kColumns =
    "uuid, start_ms, run_ids, node, gpu, samples, util_sum, util_max, mem_util_sum, "
    "mem_used_sum, mem_used_max, mem_total, temp_max, power_sum_mw, ecc_dbe_max, last_xid, "
    "idle_samples";

constexpr std::string_view kJoinedColumns =
    "b.uuid, b.start_ms, b.run_ids, b.node, b.gpu, b.samples, b.util_sum, b.util_max, "
    "b.mem_util_sum, b.mem_used_sum, b.mem_used_max, b.mem_total, b.temp_max, b.power_sum_mw, "
    "b.ecc_dbe_max, b.last_xid, b.idle_samples";

std::string_view Table(std::int64_t width) {
  return width == kHourMs ? "telemetry_1h" : "telemetry_1m";
}

// Adds a bucket into the stored one with the same key (a minute written,
// then more of its samples arriving after a restart or during the flush).
// The stored row's columns are named with the table's name: PostgreSQL
// finds a bare name ambiguous beside excluded's.
std::string UpsertSql(Dialect d, std::int64_t width) {
  const std::string_view t = Table(width);
  auto sum = [&](std::string_view c) { return fmt::format("{0} = {1}.{0} + excluded.{0}", c, t); };
  auto max = [&](std::string_view c) {
    return fmt::format("{} = {}", c,
                       SqlMax(d, fmt::format("{}.{}", t, c), "excluded." + std::string(c)));
  };
  return fmt::format(
      "INSERT INTO {0}({1}) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
      "ON CONFLICT(uuid, start_ms, run_ids) DO UPDATE SET node = excluded.node, "
      "gpu = excluded.gpu, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, "
      "last_xid = CASE WHEN excluded.last_xid <> 0 THEN excluded.last_xid ELSE {0}.last_xid END, "
      "{12}",
      t, kColumns, sum("samples"), sum("util_sum"), max("util_max"), sum("mem_util_sum"),
      sum("mem_used_sum"), max("mem_used_max"), max("mem_total"), max("temp_max"),
      sum("power_sum_mw"), max("ecc_dbe_max"), sum("idle_samples"));
}

TimeMs FloorTo(TimeMs t, std::int64_t width) {
  TimeMs q = t / width;
  if (t % width != 0 && t < 0) --q;
  return q * width;
}

std::string JoinRuns(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) {
    if (!out.empty()) out += ',';
    out += id;
  }
  return out;
}

std::vector<std::string> SplitRuns(std::string_view s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    auto end = s.find(',', pos);
    if (end == std::string_view::npos) end = s.size();
    if (end > pos) out.emplace_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// Adds `b` (the later bucket when they differ in time) into `into`.
void Merge(GpuBucket& into, const GpuBucket& b) {
  if (b.samples == 0) return;
  into.temperature_max_c = into.samples == 0
                               ? b.temperature_max_c
                               : std::max(into.temperature_max_c, b.temperature_max_c);
  into.samples += b.samples;
  into.util_sum += b.util_sum;
  into.util_max = std::max(into.util_max, b.util_max);
  into.mem_util_sum += b.mem_util_sum;
  into.memory_used_sum += b.memory_used_sum;
  into.memory_used_max = std::max(into.memory_used_max, b.memory_used_max);
  into.memory_total_bytes = std::max(into.memory_total_bytes, b.memory_total_bytes);
  into.power_sum_mw += b.power_sum_mw;
  into.ecc_dbe_max = std::max(into.ecc_dbe_max, b.ecc_dbe_max);
  if (b.last_xid != 0) into.last_xid = b.last_xid;
  into.idle_samples += b.idle_samples;
}

void Fold(GpuBucket& b, const model::GpuSample& s, std::uint32_t idle_pct) {
  b.temperature_max_c =
      b.samples == 0 ? s.temperature_c : std::max(b.temperature_max_c, s.temperature_c);
  ++b.samples;
  b.util_sum += s.util_pct;
  b.util_max = std::max(b.util_max, s.util_pct);
  b.mem_util_sum += s.mem_util_pct;
  b.memory_used_sum += s.memory_used_bytes;
  b.memory_used_max = std::max(b.memory_used_max, s.memory_used_bytes);
  b.memory_total_bytes = std::max(b.memory_total_bytes, s.memory_total_bytes);
  b.power_sum_mw += s.power_mw;
  b.ecc_dbe_max = std::max(b.ecc_dbe_max, s.ecc_dbe_total);
  if (s.last_xid != 0) b.last_xid = s.last_xid;
  if (s.util_pct < idle_pct) ++b.idle_samples;
}

void BindBucket(Statement& st, const GpuBucket& b) {
  st.Bind(1, b.uuid)
      .Bind(2, b.start_ms)
      .Bind(3, JoinRuns(b.run_ids))
      .Bind(4, b.node)
      .Bind(5, std::int64_t{b.gpu})
      .Bind(6, b.samples)
      .Bind(7, b.util_sum)
      .Bind(8, std::int64_t{b.util_max})
      .Bind(9, b.mem_util_sum)
      .Bind(10, static_cast<std::int64_t>(b.memory_used_sum))
      .Bind(11, static_cast<std::int64_t>(b.memory_used_max))
      .Bind(12, static_cast<std::int64_t>(b.memory_total_bytes))
      .Bind(13, std::int64_t{b.temperature_max_c})
      .Bind(14, static_cast<std::int64_t>(b.power_sum_mw))
      .Bind(15, static_cast<std::int64_t>(b.ecc_dbe_max))
      .Bind(16, std::int64_t{b.last_xid})
      .Bind(17, b.idle_samples);
}

// Reads the kColumns at `first` onwards.
GpuBucket ReadBucket(const Statement& st, std::int64_t width, int first = 0) {
  GpuBucket b;
  b.uuid = st.Text(first + 0);
  b.start_ms = st.Int(first + 1);
  b.width_ms = width;
  b.run_ids = SplitRuns(st.Text(first + 2));
  b.node = st.Text(first + 3);
  b.gpu = static_cast<std::uint32_t>(st.Int(first + 4));
  b.samples = st.Int(first + 5);
  b.util_sum = st.Int(first + 6);
  b.util_max = static_cast<std::uint32_t>(st.Int(first + 7));
  b.mem_util_sum = st.Int(first + 8);
  b.memory_used_sum = static_cast<std::uint64_t>(st.Int(first + 9));
  b.memory_used_max = static_cast<std::uint64_t>(st.Int(first + 10));
  b.memory_total_bytes = static_cast<std::uint64_t>(st.Int(first + 11));
  b.temperature_max_c = static_cast<std::int32_t>(st.Int(first + 12));
  b.power_sum_mw = static_cast<std::uint64_t>(st.Int(first + 13));
  b.ecc_dbe_max = static_cast<std::uint64_t>(st.Int(first + 14));
  b.last_xid = static_cast<std::uint32_t>(st.Int(first + 15));
  b.idle_samples = st.Int(first + 16);
  return b;
}

// Buckets with the same GPU, start, width and runs merged into one (the
// disk's and memory's parts of one minute), ordered by start, then GPU and
// runs.
std::vector<GpuBucket> Combine(std::vector<GpuBucket> in) {
  auto key = [](const GpuBucket& b) { return std::tie(b.start_ms, b.width_ms, b.uuid, b.run_ids); };
  std::sort(in.begin(), in.end(),
            [&](const GpuBucket& a, const GpuBucket& b) { return key(a) < key(b); });
  std::vector<GpuBucket> out;
  for (auto& b : in) {
    if (!out.empty() && key(out.back()) == key(b)) {
      Merge(out.back(), b);
    } else {
      out.push_back(std::move(b));
    }
  }
  return out;
}

UtilSummary Summarize(const std::vector<GpuBucket>& buckets) {
  UtilSummary s;
  // Time slots (bucket start -> end, all idle) for the longest idle stretch.
  std::map<TimeMs, std::pair<TimeMs, bool>> slots;
  for (const auto& b : buckets) {
    if (b.samples == 0) continue;
    s.samples += b.samples;
    s.util_sum += b.util_sum;
    s.util_max = std::max(s.util_max, b.util_max);
    s.mem_util_sum += b.mem_util_sum;
    s.memory_used_sum += b.memory_used_sum;
    s.memory_used_max = std::max(s.memory_used_max, b.memory_used_max);
    s.memory_total_bytes = std::max(s.memory_total_bytes, b.memory_total_bytes);
    s.idle_samples += b.idle_samples;
    const TimeMs end = b.start_ms + b.width_ms;
    s.first_ms = s.first_ms == 0 ? b.start_ms : std::min(s.first_ms, b.start_ms);
    s.last_ms = std::max(s.last_ms, end);
    auto [it, inserted] = slots.try_emplace(b.start_ms, end, true);
    it->second.first = std::max(it->second.first, end);
    it->second.second = it->second.second && b.idle_samples == b.samples;
  }
  std::int64_t stretch = 0;
  TimeMs prev_end = kNever;
  for (const auto& [start, slot] : slots) {
    const auto& [end, idle] = slot;
    if (!idle) {
      stretch = 0;
    } else {
      stretch = (prev_end == start ? stretch : 0) + (end - start);
      s.longest_idle_ms = std::max(s.longest_idle_ms, stretch);
    }
    prev_end = end;
  }
  return s;
}

std::vector<std::string> SortedRuns(const std::vector<std::string>& ids) {
  std::vector<std::string> out = ids;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

void UtilSummary::Add(const UtilSummary& o) {
  first_ms = samples == 0 ? o.first_ms : std::min(first_ms, o.first_ms);
  last_ms = std::max(last_ms, o.last_ms);
  samples += o.samples;
  util_sum += o.util_sum;
  util_max = std::max(util_max, o.util_max);
  mem_util_sum += o.mem_util_sum;
  memory_used_sum += o.memory_used_sum;
  memory_used_max = std::max(memory_used_max, o.memory_used_max);
  memory_total_bytes = std::max(memory_total_bytes, o.memory_total_bytes);
  idle_samples += o.idle_samples;
}

double UtilSummary::AvgUtilPct() const {
  return samples == 0 ? 0.0 : static_cast<double>(util_sum) / static_cast<double>(samples);
}

double UtilSummary::AvgMemoryUsedBytes() const {
  return samples == 0 ? 0.0 : static_cast<double>(memory_used_sum) / static_cast<double>(samples);
}

double UtilSummary::IdleFraction() const {
  return samples == 0 ? 0.0 : static_cast<double>(idle_samples) / static_cast<double>(samples);
}

struct TelemetryStore::Impl {
  Impl(Database d, TelemetryOptions o) : options(o), db(std::move(d)) {}

  struct PerGpu {
    bool has_latest = false;
    model::GpuSample latest;
    // Start of the newest minute written to disk: a sample in it or before
    // is late.
    TimeMs flushed_through = kNever;
    // Open minute buckets by (minute start, joined run ids).
    std::map<std::pair<TimeMs, std::string>, GpuBucket> open;
  };

  const TelemetryOptions options;
  std::mutex db_mu;
  Database db;
  // Minutes before this were rolled up; hours before this were expired.
  TimeMs rolled_before = kNever;
  TimeMs expired_before = kNever;

  mutable std::mutex mu;
  std::unordered_map<std::string, PerGpu> gpus;
  std::int64_t ingested = 0;
  std::int64_t late = 0;

  Status WriteMinutes(const std::vector<GpuBucket>& closed);
  Status RollUp(TimeMs before);
  Status Expire(TimeMs before);
  Result<std::vector<GpuBucket>> Select(std::string_view sql, std::int64_t width,
                                        const std::function<void(Statement&)>& bind);
  // Puts buckets back into memory after a failed write.
  void Restore(std::vector<GpuBucket> closed);
};

Status TelemetryStore::Impl::WriteMinutes(const std::vector<GpuBucket>& closed) {
  Transaction tx(db);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto up = db.Prepare(UpsertSql(db.dialect(), kMinuteMs));
  if (!up) return std::unexpected(up.error());
  auto run = db.Prepare(
      "INSERT INTO telemetry_run(run_id, width_ms, start_ms, uuid, run_ids) "
      "VALUES(?,?,?,?,?) ON CONFLICT DO NOTHING");
  if (!run) return std::unexpected(run.error());
  for (const auto& b : closed) {
    BindBucket(*up, b);
    BERTH_RETURN_IF_ERROR(up->Run());
    up->Reset();
    if (b.run_ids.empty()) continue;
    const std::string joined = JoinRuns(b.run_ids);
    for (const auto& id : b.run_ids) {
      run->Bind(1, id).Bind(2, kMinuteMs).Bind(3, b.start_ms).Bind(4, b.uuid).Bind(5, joined);
      BERTH_RETURN_IF_ERROR(run->Run());
      run->Reset();
    }
  }
  return tx.Commit();
}

// Minute buckets that start before `before` (hour-aligned) become hour
// buckets, one GPU at a time so memory stays small.
Status TelemetryStore::Impl::RollUp(TimeMs before) {
  Transaction tx(db);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto read = db.Prepare(fmt::format(
      "SELECT {} FROM telemetry_1m WHERE start_ms < ? ORDER BY uuid, start_ms", kColumns));
  if (!read) return std::unexpected(read.error());
  read->Bind(1, before);
  auto up = db.Prepare(UpsertSql(db.dialect(), kHourMs));
  if (!up) return std::unexpected(up.error());
  auto add_run = db.Prepare(
      "INSERT INTO telemetry_run(run_id, width_ms, start_ms, uuid, run_ids) "
      "VALUES(?,?,?,?,?) ON CONFLICT DO NOTHING");
  if (!add_run) return std::unexpected(add_run.error());
  auto drop_run = db.Prepare(
      "DELETE FROM telemetry_run WHERE run_id = ? AND width_ms = ? AND start_ms = ? AND uuid = ? "
      "AND run_ids = ?");
  if (!drop_run) return std::unexpected(drop_run.error());

  std::map<std::pair<TimeMs, std::string>, GpuBucket> hours;  // of one GPU
  auto write_hours = [&]() -> Status {
    for (auto& [key, b] : hours) {
      BindBucket(*up, b);
      BERTH_RETURN_IF_ERROR(up->Run());
      up->Reset();
      for (const auto& id : b.run_ids) {
        add_run->Bind(1, id)
            .Bind(2, kHourMs)
            .Bind(3, b.start_ms)
            .Bind(4, b.uuid)
            .Bind(5, key.second);
        BERTH_RETURN_IF_ERROR(add_run->Run());
        add_run->Reset();
      }
    }
    hours.clear();
    return Ok();
  };
  std::string current;
  for (;;) {
    auto row = read->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    GpuBucket m = ReadBucket(*read, kMinuteMs);
    if (m.uuid != current) {
      BERTH_RETURN_IF_ERROR(write_hours());
      current = m.uuid;
    }
    const std::string joined = JoinRuns(m.run_ids);
    for (const auto& id : m.run_ids) {
      drop_run->Bind(1, id).Bind(2, kMinuteMs).Bind(3, m.start_ms).Bind(4, m.uuid).Bind(5, joined);
      BERTH_RETURN_IF_ERROR(drop_run->Run());
      drop_run->Reset();
    }
    const TimeMs hour = FloorTo(m.start_ms, kHourMs);
    auto [it, inserted] = hours.try_emplace({hour, joined});
    if (inserted) {
      it->second = m;
      it->second.start_ms = hour;
      it->second.width_ms = kHourMs;
    } else {
      Merge(it->second, m);
    }
  }
  BERTH_RETURN_IF_ERROR(write_hours());
  auto del = db.Prepare("DELETE FROM telemetry_1m WHERE start_ms < ?");
  if (!del) return std::unexpected(del.error());
  BERTH_RETURN_IF_ERROR(del->Bind(1, before).Run());
  return tx.Commit();
}

// Hour buckets that start before `before` are dropped, with their run rows.
Status TelemetryStore::Impl::Expire(TimeMs before) {
  Transaction tx(db);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  {
    auto read = db.Prepare("SELECT uuid, start_ms, run_ids FROM telemetry_1h WHERE start_ms < ?");
    if (!read) return std::unexpected(read.error());
    read->Bind(1, before);
    auto drop_run = db.Prepare(
        "DELETE FROM telemetry_run WHERE run_id = ? AND width_ms = ? AND start_ms = ? AND "
        "uuid = ? AND run_ids = ?");
    if (!drop_run) return std::unexpected(drop_run.error());
    for (;;) {
      auto row = read->Step();
      if (!row) return std::unexpected(row.error());
      if (!*row) break;
      const std::string joined = read->Text(2);
      for (const auto& id : SplitRuns(joined)) {
        drop_run->Bind(1, id)
            .Bind(2, kHourMs)
            .Bind(3, read->Int(1))
            .Bind(4, read->Text(0))
            .Bind(5, joined);
        BERTH_RETURN_IF_ERROR(drop_run->Run());
        drop_run->Reset();
      }
    }
  }
  auto del = db.Prepare("DELETE FROM telemetry_1h WHERE start_ms < ?");
  if (!del) return std::unexpected(del.error());
  BERTH_RETURN_IF_ERROR(del->Bind(1, before).Run());
  return tx.Commit();
}

Result<std::vector<GpuBucket>> TelemetryStore::Impl::Select(
    std::string_view sql, std::int64_t width, const std::function<void(Statement&)>& bind) {
  auto st = db.Prepare(sql);
  if (!st) return std::unexpected(st.error());
  bind(*st);
  std::vector<GpuBucket> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(ReadBucket(*st, width));
  }
  return out;
}

void TelemetryStore::Impl::Restore(std::vector<GpuBucket> closed) {
  std::lock_guard lock(mu);
  for (auto& b : closed) {
    PerGpu& g = gpus[b.uuid];
    auto [it, inserted] = g.open.try_emplace({b.start_ms, JoinRuns(b.run_ids)});
    if (inserted) {
      it->second = std::move(b);
    } else {
      Merge(it->second, b);
    }
  }
}

Result<std::unique_ptr<TelemetryStore>> TelemetryStore::Open(const StoreLocation& where,
                                                             TelemetryOptions options) {
  if (options.minute_retention_ms < kHourMs) {
    return InvalidField("minute_retention",
                        "minute buckets must be kept at least an hour (e.g. 7d)");
  }
  if (options.hour_retention_ms < options.minute_retention_ms) {
    return InvalidField("hour_retention",
                        "hour buckets must be kept at least as long as minute buckets");
  }
  if (options.idle_util_pct > 100) {
    return InvalidField("idle_threshold", "the idle threshold is a percentage, 0 to 100");
  }
  auto db = OpenStateDatabase(where);
  if (!db) return std::unexpected(db.error());
  BERTH_RETURN_IF_ERROR(db->Exec(SchemaFor(db->dialect(), kTelemetrySchema)));
  return std::unique_ptr<TelemetryStore>(
      new TelemetryStore(std::make_unique<Impl>(std::move(*db), options)));
}

TelemetryStore::TelemetryStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TelemetryStore::~TelemetryStore() = default;

void TelemetryStore::Ingest(std::span<const model::GpuSample> samples) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  for (const auto& s : samples) {
    auto& g = m.gpus[s.uuid];
    const TimeMs minute = FloorTo(s.at_ms, kMinuteMs);
    if (minute <= g.flushed_through) {
      ++m.late;
      continue;
    }
    const bool sorted = std::is_sorted(s.run_ids.begin(), s.run_ids.end()) &&
                        std::adjacent_find(s.run_ids.begin(), s.run_ids.end()) == s.run_ids.end();
    std::vector<std::string> runs = sorted ? std::vector<std::string>{} : SortedRuns(s.run_ids);
    const auto& ids = sorted ? s.run_ids : runs;
    auto [it, inserted] = g.open.try_emplace({minute, JoinRuns(ids)});
    GpuBucket& b = it->second;
    if (inserted) {
      b.node = s.node;
      b.gpu = s.gpu;
      b.uuid = s.uuid;
      b.start_ms = minute;
      b.width_ms = kMinuteMs;
      b.run_ids = ids;
    }
    Fold(b, s, m.options.idle_util_pct);
    if (!g.has_latest || s.at_ms >= g.latest.at_ms) {
      g.latest = s;
      g.has_latest = true;
    }
    ++m.ingested;
  }
}

Status TelemetryStore::Flush(TimeMs now) {
  Impl& m = *impl_;
  std::lock_guard db_lock(m.db_mu);
  std::vector<GpuBucket> closed;
  {
    std::lock_guard lock(m.mu);
    for (auto& [uuid, g] : m.gpus) {
      for (auto it = g.open.begin(); it != g.open.end() && it->first.first + kMinuteMs <= now;) {
        closed.push_back(std::move(it->second));
        it = g.open.erase(it);
      }
    }
  }
  if (!closed.empty()) {
    // Samples of these minutes that arrive while they are written open new
    // buckets; the next flush adds them to the stored rows (an upsert).
    if (auto st = m.WriteMinutes(closed); !st) {
      m.Restore(std::move(closed));
      return st;
    }
    std::lock_guard lock(m.mu);
    for (const auto& b : closed) {
      auto& g = m.gpus[b.uuid];
      g.flushed_through = std::max(g.flushed_through, b.start_ms);
    }
  }
  const TimeMs roll_before = FloorTo(now - m.options.minute_retention_ms, kHourMs);
  if (roll_before > m.rolled_before) {
    BERTH_RETURN_IF_ERROR(m.RollUp(roll_before));
    m.rolled_before = roll_before;
  }
  const TimeMs expire_before = FloorTo(now - m.options.hour_retention_ms, kHourMs);
  if (expire_before > m.expired_before) {
    BERTH_RETURN_IF_ERROR(m.Expire(expire_before));
    m.expired_before = expire_before;
  }
  return Ok();
}

std::vector<model::GpuSample> TelemetryStore::Latest() const {
  std::lock_guard lock(impl_->mu);
  std::vector<model::GpuSample> out;
  out.reserve(impl_->gpus.size());
  for (const auto& [uuid, g] : impl_->gpus) {
    if (g.has_latest) out.push_back(g.latest);
  }
  std::sort(out.begin(), out.end(), [](const model::GpuSample& a, const model::GpuSample& b) {
    return std::tie(a.node, a.gpu, a.uuid) < std::tie(b.node, b.gpu, b.uuid);
  });
  return out;
}

Result<std::vector<GpuBucket>> TelemetryStore::GpuHistory(const std::string& uuid, TimeMs from,
                                                          TimeMs to, std::int64_t step_ms) {
  if (step_ms < 0 || step_ms % kMinuteMs != 0) {
    return InvalidField("step", fmt::format("step must be a whole number of minutes (e.g. 5m), "
                                            "not {} ms; 0 keeps the stored buckets",
                                            step_ms));
  }
  if (to <= from) {
    return InvalidField(
        "to", fmt::format("the window is empty: to ({}) must be after from ({})", to, from));
  }
  Impl& m = *impl_;
  std::lock_guard db_lock(m.db_mu);
  std::vector<GpuBucket> all;
  for (std::int64_t width : {kHourMs, kMinuteMs}) {
    auto rows =
        m.Select(fmt::format("SELECT {} FROM {} WHERE uuid = ? AND start_ms < ? AND "
                             "start_ms > ?",
                             kColumns, Table(width)),
                 width, [&](Statement& st) { st.Bind(1, uuid).Bind(2, to).Bind(3, from - width); });
    if (!rows) return std::unexpected(rows.error());
    std::move(rows->begin(), rows->end(), std::back_inserter(all));
  }
  {
    std::lock_guard lock(m.mu);
    if (auto it = m.gpus.find(uuid); it != m.gpus.end()) {
      for (const auto& [key, b] : it->second.open) {
        if (b.start_ms < to && b.start_ms + b.width_ms > from) all.push_back(b);
      }
    }
  }
  all = Combine(std::move(all));
  if (step_ms == 0) return all;
  // Merged per step window and run set; a bucket wider than the step (an
  // hour at a 5m step) stays as it is.
  std::vector<GpuBucket> merged;
  std::map<std::pair<TimeMs, std::string>, std::size_t> at;
  for (auto& b : all) {
    if (b.width_ms >= step_ms) {
      merged.push_back(std::move(b));
      continue;
    }
    const TimeMs window = FloorTo(b.start_ms, step_ms);
    auto [it, inserted] = at.try_emplace({window, JoinRuns(b.run_ids)}, merged.size());
    if (inserted) {
      b.start_ms = window;
      b.width_ms = step_ms;
      merged.push_back(std::move(b));
    } else {
      Merge(merged[it->second], b);
    }
  }
  std::stable_sort(merged.begin(), merged.end(), [](const GpuBucket& a, const GpuBucket& b) {
    return std::tie(a.start_ms, a.run_ids) < std::tie(b.start_ms, b.run_ids);
  });
  return merged;
}

Result<std::map<std::string, UtilSummary>> TelemetryStore::RunSummaries(
    std::span<const std::string> run_ids, TimeMs from, TimeMs to) {
  Impl& m = *impl_;
  std::lock_guard db_lock(m.db_mu);
  std::map<std::string, std::vector<GpuBucket>> per_run;
  for (const auto& id : run_ids) {
    for (std::int64_t width : {kHourMs, kMinuteMs}) {
      auto rows = m.Select(
          fmt::format("SELECT {} FROM telemetry_run r JOIN {} b ON b.uuid = r.uuid AND "
                      "b.start_ms = r.start_ms AND b.run_ids = r.run_ids WHERE r.run_id = ? AND "
                      "r.width_ms = ? AND r.start_ms >= ? AND r.start_ms < ?",
                      kJoinedColumns, Table(width)),
          width, [&](Statement& st) { st.Bind(1, id).Bind(2, width).Bind(3, from).Bind(4, to); });
      if (!rows) return std::unexpected(rows.error());
      auto& list = per_run[id];
      std::move(rows->begin(), rows->end(), std::back_inserter(list));
    }
  }
  {
    std::lock_guard lock(m.mu);
    const std::set<std::string_view> wanted(run_ids.begin(), run_ids.end());
    for (const auto& [uuid, g] : m.gpus) {
      for (const auto& [key, b] : g.open) {
        if (b.start_ms < from || b.start_ms >= to) continue;
        for (const auto& id : b.run_ids) {
          if (wanted.contains(id)) per_run[id].push_back(b);
        }
      }
    }
  }
  std::map<std::string, UtilSummary> out;
  for (auto& [id, buckets] : per_run) {
    UtilSummary s = Summarize(Combine(std::move(buckets)));
    if (s.samples > 0) out.emplace(id, s);
  }
  return out;
}

Result<UtilSummary> TelemetryStore::FleetSummary(TimeMs from, TimeMs to) {
  Impl& m = *impl_;
  std::lock_guard db_lock(m.db_mu);
  UtilSummary s;
  for (std::int64_t width : {kHourMs, kMinuteMs}) {
    auto st = m.db.Prepare(fmt::format(
        "SELECT COALESCE(SUM(samples), 0), COALESCE(SUM(util_sum), 0), COALESCE(MAX(util_max), 0), "
        "COALESCE(SUM(mem_util_sum), 0), COALESCE(SUM(mem_used_sum), 0), "
        "COALESCE(MAX(mem_used_max), 0), COALESCE(MAX(mem_total), 0), "
        "COALESCE(SUM(idle_samples), 0), MIN(start_ms), MAX(start_ms) FROM {} "
        "WHERE start_ms >= ? AND start_ms < ?",
        Table(width)));
    if (!st) return std::unexpected(st.error());
    st->Bind(1, from).Bind(2, to);
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (st->Int(0) == 0) continue;
    UtilSummary part;
    part.samples = st->Int(0);
    part.util_sum = st->Int(1);
    part.util_max = static_cast<std::uint32_t>(st->Int(2));
    part.mem_util_sum = st->Int(3);
    part.memory_used_sum = static_cast<std::uint64_t>(st->Int(4));
    part.memory_used_max = static_cast<std::uint64_t>(st->Int(5));
    part.memory_total_bytes = static_cast<std::uint64_t>(st->Int(6));
    part.idle_samples = st->Int(7);
    part.first_ms = st->Int(8);
    part.last_ms = st->Int(9) + width;
    s.Add(part);
  }
  std::vector<GpuBucket> open;
  {
    std::lock_guard lock(m.mu);
    for (const auto& [uuid, g] : m.gpus) {
      for (const auto& [key, b] : g.open) {
        if (b.start_ms >= from && b.start_ms < to) open.push_back(b);
      }
    }
  }
  const UtilSummary mem = Summarize(open);
  if (mem.samples > 0) s.Add(mem);
  return s;
}

std::uint32_t TelemetryStore::idle_util_pct() const {
  return impl_->options.idle_util_pct;
}

std::int64_t TelemetryStore::ingested() const {
  std::lock_guard lock(impl_->mu);
  return impl_->ingested;
}

std::int64_t TelemetryStore::late() const {
  std::lock_guard lock(impl_->mu);
  return impl_->late;
}

}  // namespace berth::store
