#include "model/usage.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "common/utf8.h"
#include "model/yaml_object.h"

namespace berth::model {
namespace {

constexpr TimeMs kDayMs = 86'400'000;

// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (Howard
// Hinnant's civil_from_days).
std::tuple<std::int64_t, unsigned, unsigned> CivilFromDays(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {m <= 2 ? y + 1 : y, m, d};
}

std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

std::int64_t FloorDiv(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

// mgpu_ms x price / (mGPU-ms per GPU-hour), rounded half up; 128-bit so a
// year of a large node at any sane price cannot overflow.
std::int64_t Cost(std::int64_t mgpu_ms, std::int64_t micros_per_gpu_hour) {
  const Int128 num = static_cast<Int128>(mgpu_ms) * micros_per_gpu_hour;
  return static_cast<std::int64_t>((num + kMgpuMsPerGpuHour / 2) / kMgpuMsPerGpuHour);
}

constexpr std::string_view kKeyNames[] = {"tenant", "queue", "user",  "pool",   "model",
                                          "node",   "day",   "month", "service"};

constexpr std::string_view kPriceTableFields[] = {"currency", "default", "prices"};
constexpr std::string_view kPriceFields[] = {"model", "pool", "per_gpu_hour"};

Result<std::int64_t> MoneyField(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) {
    return InvalidField(field, "must be an amount per GPU-hour, e.g. 2.50");
  }
  return ParseMoney(node.Scalar(), field);
}

// Control characters (a lone CR that YAML keeps inside a plain scalar, a
// tab) in names that reports print in tables.
bool HasControl(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
}

Result<PriceTable> PriceTableFrom(const YAML::Node& root) {
  BERTH_RETURN_IF_ERROR(
      YamlObject::Read(root, "", kPriceTableFields,
                       "a price table is a map with `currency`, `default` and `prices`"));
  PriceTable table;
  if (auto c = root["currency"]) {
    if (!c.IsScalar() || c.Scalar().empty() || c.Scalar().size() > 16 || HasControl(c.Scalar()) ||
        c.Scalar().find(' ') != std::string::npos) {
      return InvalidField("currency",
                          "must be a short currency name without spaces or control characters, "
                          "e.g. USD");
    }
    table.currency = c.Scalar();
  }
  if (auto d = root["default"]) {
    auto m = MoneyField(d, "default");
    if (!m) return std::unexpected(m.error());
    table.default_micros_per_gpu_hour = *m;
  }
  if (auto prices = root["prices"]) {
    if (!prices.IsSequence()) {
      return InvalidField("prices", "must be a list of {model, pool, per_gpu_hour}");
    }
    std::set<std::pair<std::string, std::string>> seen;
    for (std::size_t i = 0; i < prices.size(); ++i) {
      const auto path = fmt::format("prices[{}]", i);
      const YAML::Node p = prices[i];
      BERTH_RETURN_IF_ERROR(
          YamlObject::Read(p, path, kPriceFields, "must be a map {model, pool, per_gpu_hour}"));
      PriceEntry e;
      if (!p["model"] || !p["model"].IsScalar() || p["model"].Scalar().empty() ||
          HasControl(p["model"].Scalar())) {
        return InvalidField(path + ".model", "is required: a GPU model (H100-80GB) or \"*\"");
      }
      e.model = p["model"].Scalar();
      if (p["pool"]) {
        if (!p["pool"].IsScalar() || p["pool"].Scalar().empty() || HasControl(p["pool"].Scalar())) {
          return InvalidField(path + ".pool", "must be a pool name or \"*\"");
        }
        e.pool = p["pool"].Scalar();
      }
      if (!p["per_gpu_hour"]) {
        return InvalidField(path + ".per_gpu_hour", "is required: the price of one GPU-hour");
      }
      auto m = MoneyField(p["per_gpu_hour"], path + ".per_gpu_hour");
      if (!m) return std::unexpected(m.error());
      e.micros_per_gpu_hour = *m;
      if (!seen.emplace(e.model, e.pool).second) {
        return InvalidField(path, fmt::format("model {} in pool {} is priced twice; keep one line",
                                              e.model, e.pool));
      }
      table.prices.push_back(std::move(e));
    }
  }
  return table;
}

}  // namespace

Result<std::int64_t> ParseMoney(std::string_view text, const std::string& field) {
  auto bad = [&] {
    return InvalidField(field, fmt::format("'{}' is not an amount: write a number from 0 to {} "
                                           "with at most six decimals, e.g. 2.50",
                                           text, kMaxMoneyUnits));
  };
  if (text.empty()) return bad();
  std::int64_t whole = 0;
  std::int64_t frac = 0;
  int frac_digits = 0;
  bool dot = false;
  bool digits = false;
  for (char c : text) {
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') return bad();
    digits = true;
    if (dot) {
      if (++frac_digits > 6) return bad();
      frac = frac * 10 + (c - '0');
    } else {
      // At most a trillion per GPU-hour, checked after each digit: micro-units
      // of that (10^18) still fit in 64 bits; of ten trillion they would not.
      whole = whole * 10 + (c - '0');
      if (whole > kMaxMoneyUnits) return bad();
    }
  }
  if (!digits) return bad();
  for (int i = frac_digits; i < 6; ++i) frac *= 10;
  const std::int64_t micros = whole * kMicrosPerUnit + frac;  // at most 10^18 + 999999
  if (micros > kMaxMoneyUnits * kMicrosPerUnit) return bad();
  return micros;
}

std::string FormatMoney(std::int64_t micros) {
  const bool neg = micros < 0;
  const std::int64_t a = neg ? -micros : micros;
  std::string frac = fmt::format("{:06d}", a % kMicrosPerUnit);
  while (frac.size() > 2 && frac.back() == '0') frac.pop_back();
  return fmt::format("{}{}.{}", neg ? "-" : "", a / kMicrosPerUnit, frac);
}

Result<PriceTable> ParsePriceTable(std::string_view yaml) {
  PriceTable table;
  BERTH_RETURN_IF_ERROR(ReadDocument(yaml, 0, "price table", [&](const YAML::Node& root) -> Status {
    auto t = PriceTableFrom(root);
    if (!t) return std::unexpected(t.error());
    table = std::move(*t);
    return Ok();
  }));
  return table;
}

std::int64_t PriceFor(const PriceTable& table, std::string_view gpu_model, std::string_view pool) {
  const std::pair<std::string_view, std::string_view> order[] = {
      {gpu_model, pool}, {gpu_model, "*"}, {"*", pool}, {"*", "*"}};
  for (const auto& [m, p] : order) {
    for (const auto& e : table.prices) {
      if (e.model == m && e.pool == p) return e.micros_per_gpu_hour;
    }
  }
  return table.default_micros_per_gpu_hour;
}

void PriceRecord(UsageRecord& r, const std::vector<PriceVersion>& versions) {
  r.pieces.clear();
  r.mgpu_ms = 0;
  r.cost_micros = 0;
  TimeMs t = r.start_ms;
  while (t < r.end_ms) {
    // The version in effect at t, and when the next one starts.
    const PriceVersion* in_effect = nullptr;
    TimeMs next_change = r.end_ms;
    for (const auto& v : versions) {
      if (v.applied_ms <= t) {
        in_effect = &v;
      } else {
        next_change = std::min(next_change, v.applied_ms);
        break;
      }
    }
    const TimeMs end = std::min({r.end_ms, next_change, DayStart(t) + kDayMs});
    UsagePiece p;
    p.start_ms = t;
    p.end_ms = end;
    p.mgpu_ms = r.mgpu * (end - t);
    if (in_effect != nullptr) {
      p.price_version = in_effect->version;
      p.micros_per_gpu_hour = PriceFor(in_effect->table, r.gpu_model, r.pool);
    }
    p.cost_micros = Cost(p.mgpu_ms, p.micros_per_gpu_hour);
    r.mgpu_ms += p.mgpu_ms;
    r.cost_micros += p.cost_micros;
    r.pieces.push_back(p);
    t = end;
  }
}

std::optional<UsageRecord> ClipRecord(const UsageRecord& record, TimeMs from, TimeMs to,
                                      const std::vector<PriceVersion>& versions) {
  const TimeMs s = std::max(record.start_ms, from);
  const TimeMs e = std::min(record.end_ms, to);
  if (s >= e) return std::nullopt;
  UsageRecord r = record;
  r.start_ms = s;
  r.end_ms = e;
  PriceRecord(r, versions);
  return r;
}

void MeasureRecord(UsageRecord& r, const std::vector<std::optional<PieceMeasure>>& measures) {
  r.measured_mgpu_ms = r.used_mgpu_ms = r.idle_mgpu_ms = 0;
  r.used_cost_micros = r.idle_cost_micros = 0;
  auto part = [](std::int64_t whole, std::int64_t num, std::int64_t den) {
    return static_cast<std::int64_t>(static_cast<Int128>(whole) * num / den);
  };
  for (std::size_t i = 0; i < r.pieces.size(); ++i) {
    UsagePiece& p = r.pieces[i];
    p.measured = false;
    p.used_mgpu_ms = p.idle_mgpu_ms = p.used_cost_micros = p.idle_cost_micros = 0;
    if (i >= measures.size() || !measures[i] || measures[i]->samples <= 0) continue;
    const PieceMeasure& m = *measures[i];
    const std::int64_t util = std::clamp<std::int64_t>(m.util_sum, 0, m.samples * 100);
    const std::int64_t idle = std::clamp<std::int64_t>(m.idle_samples, 0, m.samples);
    p.measured = true;
    p.used_mgpu_ms = part(p.mgpu_ms, util, m.samples * 100);
    p.idle_mgpu_ms = part(p.mgpu_ms, idle, m.samples);
    p.used_cost_micros = part(p.cost_micros, util, m.samples * 100);
    p.idle_cost_micros = part(p.cost_micros, idle, m.samples);
    r.measured_mgpu_ms += p.mgpu_ms;
    r.used_mgpu_ms += p.used_mgpu_ms;
    r.idle_mgpu_ms += p.idle_mgpu_ms;
    r.used_cost_micros += p.used_cost_micros;
    r.idle_cost_micros += p.idle_cost_micros;
  }
}

std::string_view UsageKeyName(UsageKey key) {
  return kKeyNames[static_cast<int>(key)];
}

Result<std::vector<UsageKey>> ParseUsageKeys(std::string_view text) {
  BERTH_RETURN_IF_ERROR(CheckUtf8(text, "by"));
  std::vector<UsageKey> keys;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view name = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (name.empty()) continue;
    auto it = std::find(std::begin(kKeyNames), std::end(kKeyNames), name);
    if (it == std::end(kKeyNames)) {
      return InvalidField("by", fmt::format("'{}' is not a grouping; use one or more of tenant, "
                                            "queue, user, pool, model, node, day, month, service",
                                            name));
    }
    const auto key = static_cast<UsageKey>(it - std::begin(kKeyNames));
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      return InvalidField("by", fmt::format("'{}' is named twice", name));
    }
    keys.push_back(key);
  }
  return keys;
}

UsageReport Aggregate(const std::vector<UsageRecord>& records, const std::vector<UsageKey>& keys) {
  UsageReport report;
  report.keys = keys;
  struct Group {
    UsageRow row;
    std::set<std::string> runs;
    std::set<std::string> idle_runs;
  };
  std::map<std::vector<std::string>, Group> groups;
  for (const auto& r : records) {
    for (const auto& p : r.pieces) {
      std::vector<std::string> key;
      key.reserve(keys.size());
      for (UsageKey k : keys) {
        switch (k) {
          case UsageKey::kTenant:
            key.push_back(r.tenant);
            break;
          case UsageKey::kQueue:
            key.push_back(r.tenant + "/" + r.queue);
            break;
          case UsageKey::kUser:
            key.push_back(r.user);
            break;
          case UsageKey::kPool:
            key.push_back(r.pool);
            break;
          case UsageKey::kModel:
            key.push_back(r.gpu_model);
            break;
          case UsageKey::kNode:
            key.push_back(r.node);
            break;
          case UsageKey::kDay:
            key.push_back(DayOf(p.start_ms));
            break;
          case UsageKey::kMonth:
            key.push_back(MonthOf(p.start_ms));
            break;
          case UsageKey::kService:
            key.push_back(r.service.empty() ? "" : r.tenant + "/" + r.service);
            break;
        }
      }
      auto& [row, runs, idle_runs] = groups[key];
      row.mgpu_ms += p.mgpu_ms;
      row.cost_micros += p.cost_micros;
      if (p.measured) row.measured_mgpu_ms += p.mgpu_ms;
      row.used_mgpu_ms += p.used_mgpu_ms;
      row.idle_mgpu_ms += p.idle_mgpu_ms;
      row.used_cost_micros += p.used_cost_micros;
      row.idle_cost_micros += p.idle_cost_micros;
      runs.insert(r.run_id);
      if (r.idle) idle_runs.insert(r.run_id);
    }
    UsageRow& total = report.total;
    total.mgpu_ms += r.mgpu_ms;
    total.cost_micros += r.cost_micros;
    total.measured_mgpu_ms += r.measured_mgpu_ms;
    total.used_mgpu_ms += r.used_mgpu_ms;
    total.idle_mgpu_ms += r.idle_mgpu_ms;
    total.used_cost_micros += r.used_cost_micros;
    total.idle_cost_micros += r.idle_cost_micros;
    if (!r.pieces.empty()) ++total.runs;
    if (!r.pieces.empty() && r.idle) ++total.idle_runs;
  }
  for (auto& [key, group] : groups) {
    auto& [row0, runs, idle_runs] = group;
    UsageRow row = row0;
    row.key = key;
    row.runs = static_cast<std::int64_t>(runs.size());
    row.idle_runs = static_cast<std::int64_t>(idle_runs.size());
    report.rows.push_back(std::move(row));
  }
  return report;
}

std::string DayOf(TimeMs t) {
  auto [y, m, d] = CivilFromDays(FloorDiv(t, kDayMs));
  return fmt::format("{:04d}-{:02d}-{:02d}", y, m, d);
}

std::string MonthOf(TimeMs t) {
  auto [y, m, d] = CivilFromDays(FloorDiv(t, kDayMs));
  return fmt::format("{:04d}-{:02d}", y, m);
}

TimeMs DayStart(TimeMs t) {
  return FloorDiv(t, kDayMs) * kDayMs;
}

TimeMs MonthStart(TimeMs t) {
  auto [y, m, d] = CivilFromDays(FloorDiv(t, kDayMs));
  return DaysFromCivil(y, m, 1) * kDayMs;
}

TimeMs NextMonthStart(TimeMs t) {
  auto [y, m, d] = CivilFromDays(FloorDiv(t, kDayMs));
  return m == 12 ? DaysFromCivil(y + 1, 1, 1) * kDayMs : DaysFromCivil(y, m + 1, 1) * kDayMs;
}

BudgetState EvaluateBudget(const Budget& budget, std::string month, std::int64_t used_mgpu_ms,
                           std::int64_t used_cost_micros) {
  BudgetState s;
  s.budget = budget;
  s.month = std::move(month);
  if (budget.mgpu_ms) {
    // micro-GPU-hours: mGPU-ms / 3600.
    s.used_micros = used_mgpu_ms / 3600;
    s.limit_micros = *budget.mgpu_ms / 3600;
  } else {
    s.used_micros = used_cost_micros;
    s.limit_micros = budget.cost_micros.value_or(0);
  }
  s.over = s.used_micros >= s.limit_micros;
  for (std::int32_t pct : budget.alert_percents) {
    // used / limit >= pct / 100, in integers.
    if (static_cast<Int128>(s.used_micros) * 100 >= static_cast<Int128>(s.limit_micros) * pct) {
      s.crossed_percents.push_back(pct);
    }
  }
  return s;
}

}  // namespace berth::model
