// Metering endpoints (docs/metering.md, docs/api.md): the price table
// (GET/POST /v1/prices), usage reports and raw records (GET /v1/usage,
// GET /v1/usage/records) and budgets (GET /v1/budgets, POST and DELETE
// /v1/budgets/{tenant}). Apart from api.cc so metering changes without
// touching the job and policy handlers.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <tuple>

#include "api/api.h"
#include "api/api_util.h"
#include "api/paging.h"

namespace berth::server {
namespace {

using nlohmann::json;

Error NoMeter() {
  return Error{Code::kUnavailable, "this berthd keeps no usage records", {}};
}

// GPU-hours as a number, for people and charts; mgpu_ms is the exact figure.
double GpuHours(std::int64_t mgpu_ms) {
  return static_cast<double>(mgpu_ms) / static_cast<double>(model::kMgpuMsPerGpuHour);
}

json PriceTableJson(const model::PriceTable& t) {
  json prices = json::array();
  for (const auto& e : t.prices) {
    prices.push_back({{"model", e.model},
                      {"pool", e.pool},
                      {"per_gpu_hour", model::FormatMoney(e.micros_per_gpu_hour)},
                      {"per_gpu_hour_micros", e.micros_per_gpu_hour}});
  }
  return {{"currency", t.currency},
          {"default", model::FormatMoney(t.default_micros_per_gpu_hour)},
          {"default_micros", t.default_micros_per_gpu_hour},
          {"prices", prices}};
}

json RecordJson(const model::UsageRecord& r) {
  std::set<std::int64_t> versions;
  for (const auto& p : r.pieces) versions.insert(p.price_version);
  return {{"run_id", r.run_id},
          {"job_id", r.job_id},
          {"replica", r.replica},
          {"attempt", r.attempt},
          {"tenant", r.tenant},
          {"queue", r.queue},
          {"user", r.user},
          {"service", r.service.empty() ? json(nullptr) : json(r.tenant + "/" + r.service)},
          {"pool", r.pool},
          {"node", r.node},
          {"gpu_uuids", r.gpu_uuids},
          {"gpu_model", r.gpu_model},
          {"mgpu", r.mgpu},
          {"start_ms", r.start_ms},
          {"end_ms", r.end_ms},
          {"open", r.open},
          {"outcome", r.outcome},
          {"mgpu_ms", r.mgpu_ms},
          {"gpu_hours", GpuHours(r.mgpu_ms)},
          {"cost_micros", r.cost_micros},
          {"cost", model::FormatMoney(r.cost_micros)},
          {"price_versions", versions},
          {"measured_mgpu_ms", r.measured_mgpu_ms},
          {"used_mgpu_ms", r.used_mgpu_ms},
          {"idle_mgpu_ms", r.idle_mgpu_ms},
          {"used_cost_micros", r.used_cost_micros},
          {"idle_cost_micros", r.idle_cost_micros},
          {"longest_idle_ms", r.longest_idle_ms},
          {"idle", r.idle}};
}

// Used and idle figures are null when berthd collects no telemetry, so
// "unmeasured" never reads as "zero".
json RowJson(const model::UsageRow& row, const std::vector<model::UsageKey>& keys, bool measured) {
  auto or_null = [&](const json& v) { return measured ? v : json(nullptr); };
  json key = json::object();
  for (std::size_t i = 0; i < keys.size() && i < row.key.size(); ++i) {
    key[std::string(model::UsageKeyName(keys[i]))] = row.key[i];
  }
  return {{"key", key},
          {"mgpu_ms", row.mgpu_ms},
          {"allocated_gpu_hours", GpuHours(row.mgpu_ms)},
          {"measured_mgpu_ms", or_null(row.measured_mgpu_ms)},
          {"used_mgpu_ms", or_null(row.used_mgpu_ms)},
          {"idle_mgpu_ms", or_null(row.idle_mgpu_ms)},
          {"used_gpu_hours", or_null(GpuHours(row.used_mgpu_ms))},
          {"idle_gpu_hours", or_null(GpuHours(row.idle_mgpu_ms))},
          {"cost_micros", row.cost_micros},
          {"cost", model::FormatMoney(row.cost_micros)},
          {"used_cost_micros", or_null(row.used_cost_micros)},
          {"idle_cost_micros", or_null(row.idle_cost_micros)},
          {"idle_cost", or_null(model::FormatMoney(row.idle_cost_micros))},
          {"runs", row.runs},
          {"idle_runs", or_null(row.idle_runs)}};
}

json BudgetJson(const model::BudgetState& s, const std::string& currency) {
  const auto& b = s.budget;
  return {{"tenant", b.tenant},
          {"unit", b.mgpu_ms ? "gpu_hours" : "currency"},
          {"currency", b.mgpu_ms ? json(nullptr) : json(currency)},
          {"limit", model::FormatMoney(s.limit_micros)},
          {"limit_micros", s.limit_micros},
          {"month", s.month},
          {"used", model::FormatMoney(s.used_micros)},
          {"used_micros", s.used_micros},
          {"alerts", b.alert_percents},
          {"crossed", s.crossed_percents},
          {"enforce", b.enforce},
          {"over", s.over},
          {"set_ms", b.set_ms},
          {"set_by", b.set_by}};
}

// from (default: the start of this UTC month) and to (default: now).
Result<std::pair<TimeMs, TimeMs>> UsageWindow(const http::Request& req, TimeMs now) {
  TimeMs from = model::MonthStart(now);
  TimeMs to = now;
  for (const char* name : {"from", "to"}) {
    if (!req.has_param(name)) continue;
    auto t = TimeParam(req.get_param_value(name), name, now);
    if (!t) return std::unexpected(t.error());
    (std::string_view(name) == "from" ? from : to) = *t;
  }
  if (to <= from) {
    return InvalidField(
        "to", fmt::format("the window is empty: to ({}) must be after from ({})", to, from));
  }
  return std::pair{from, to};
}

// The window's usage records of the request's tenant scope only
// (docs/security.md): a member's report is its tenants' records, and totals
// reconcile with exactly those. The scope filters in the store's query, so
// other tenants' runs are neither read nor counted.
// At most `max_rows` runs are read (Api::set_report_max_rows); a window
// holding more is refused naming `from`.
Result<std::vector<model::UsageRecord>> VisibleRecords(Meter& meter,
                                                       const std::pair<TimeMs, TimeMs>& window,
                                                       const std::string& tenant,
                                                       const model::TenantScope& scope, TimeMs now,
                                                       std::size_t max_rows) {
  auto records = meter.Records(window.first, window.second, tenant, scope, now,
                               /*measure=*/false, max_rows + 1);
  if (!records) return std::unexpected(records.error());
  if (records->size() > max_rows) {
    return std::unexpected(WindowTooLarge("runs", window.first, window.second, max_rows));
  }
  BERTH_RETURN_IF_ERROR(meter.Measure(*records, window.first, window.second));
  return records;
}

Result<std::size_t> OffsetParam(const http::Request& req) {
  if (!req.has_param("offset")) return 0;
  const auto& s = req.get_param_value("offset");
  std::size_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    return InvalidField("offset", "must be a whole number of records to skip, e.g. 1000");
  }
  return v;
}

std::string Currency(const std::vector<model::PriceVersion>& prices) {
  return prices.empty() ? "USD" : prices.back().table.currency;
}

}  // namespace

void Api::GetPrices(const http::Request& req, http::Response& res) {
  if (meter_ == nullptr) return ReplyError(res, NoMeter());
  auto versions = meter_->meter_store().PriceVersions();
  if (!versions) return ReplyError(res, versions.error());
  json list = json::array();
  for (const auto& v : *versions) {
    list.push_back({{"version", v.price.version},
                    {"applied_ms", v.price.applied_ms},
                    {"applied_by", v.applied_by},
                    {"comment", v.comment}});
  }
  const store::StoredPriceVersion* shown = versions->empty() ? nullptr : &versions->back();
  if (req.has_param("version")) {
    const auto& s = req.get_param_value("version");
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || p != s.data() + s.size() || n < 1) {
      return ReplyError(
          res, Error{Code::kInvalidArgument, "must be a price version number, e.g. 2", "version"});
    }
    shown = nullptr;
    for (const auto& v : *versions) {
      if (v.price.version == n) shown = &v;
    }
    if (shown == nullptr) {
      return ReplyError(res, Error{Code::kNotFound,
                                   fmt::format("price version {} does not exist; there are {}", n,
                                               versions->size()),
                                   "version"});
    }
  }
  json body{{"versions", list},
            {"active", versions->empty() ? json(nullptr) : json(versions->back().price.version)}};
  if (shown != nullptr) {
    body["version"] = shown->price.version;
    body["applied_ms"] = shown->price.applied_ms;
    body["applied_by"] = shown->applied_by;
    body["yaml"] = shown->yaml;
    body["table"] = PriceTableJson(shown->price.table);
  } else {
    body["version"] = nullptr;
    body["table"] = PriceTableJson(model::PriceTable{});
  }
  Reply(res, 200, body);
}

void Api::ApplyPrices(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = "prices";
  if (meter_ == nullptr) return ReplyError(res, NoMeter());
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 "the request body must be a price table (YAML); see "
                                 "docs/metering.md",
                                 "body"});
  }
  auto base = BaseVersion(req);
  if (!base) return ReplyError(res, base.error());
  auto version = meter_->meter_store().ApplyPrices(
      req.body, Actor(req), req.get_param_value("comment"), clock_.NowMs(), *base,
      RecordInChange<std::int64_t>(note, req, res, clock_.NowMs(),
                                   [](AuditNote& n, const std::int64_t& made) {
                                     n.object = fmt::format("prices/v{}", made);
                                     n.after = json{{"version", made}};
                                   }));
  if (!version) return ReplyError(res, version.error());
  Reply(res, 201, json{{"version", *version}});
}

void Api::Usage(const http::Request& req, http::Response& res, const model::TenantScope& scope) {
  if (meter_ == nullptr) return ReplyError(res, NoMeter());
  const TimeMs now = clock_.NowMs();
  auto window = UsageWindow(req, now);
  if (!window) return ReplyError(res, window.error());
  auto keys = model::ParseUsageKeys(req.has_param("by") ? req.get_param_value("by") : "tenant");
  if (!keys) return ReplyError(res, keys.error());
  auto records =
      VisibleRecords(*meter_, *window, req.get_param_value("tenant"), scope, now, report_max_rows_);
  if (!records) return ReplyError(res, records.error());
  auto prices = meter_->Prices();
  if (!prices) return ReplyError(res, prices.error());
  const model::UsageReport report = model::Aggregate(*records, *keys);
  json by = json::array();
  for (auto k : *keys) by.push_back(std::string(model::UsageKeyName(k)));
  json rows = json::array();
  for (const auto& row : report.rows) rows.push_back(RowJson(row, *keys, meter_->measured()));
  Reply(res, 200,
        json{{"from_ms", window->first},
             {"to_ms", window->second},
             {"by", by},
             {"currency", Currency(*prices)},
             {"rows", rows},
             {"total", RowJson(report.total, {}, meter_->measured())},
             {"records", records->size()},
             {"telemetry", meter_->measured()},
             {"idle_window_ms", meter_->idle_window_ms()}});
}

void Api::UsageRecords(const http::Request& req, http::Response& res,
                       const model::TenantScope& scope) {
  if (meter_ == nullptr) return ReplyError(res, NoMeter());
  const TimeMs now = clock_.NowMs();
  auto window = UsageWindow(req, now);
  if (!window) return ReplyError(res, window.error());
  auto limit = PageLimitParam(req);
  if (!limit) return ReplyError(res, limit.error());
  auto offset = OffsetParam(req);
  if (!offset) return ReplyError(res, offset.error());
  // One job's records (its runs' GPU time and cost: the console's job
  // page). A job the caller's scope does not reach has none here, as a
  // tenant it may not read lists none.
  std::optional<std::int64_t> job;
  if (req.has_param("job")) {
    const std::string& text = req.get_param_value("job");
    std::int64_t id = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec != std::errc() || p != text.data() + text.size() || id <= 0) {
      return ReplyError(res, Error{Code::kInvalidArgument,
                                   fmt::format("job '{}' is not a job id; give a job's number, "
                                               "as `berth jobs` lists it",
                                               text),
                                   "job"});
    }
    job = id;
  }
  // The cursor: the last record of the page before, "<start_ms>:<run_id>";
  // records are ordered by start, then run id.
  std::optional<std::pair<TimeMs, std::string>> after;
  if (req.has_param("after")) {
    if (*offset != 0) {
      return ReplyError(res, Error{Code::kInvalidArgument,
                                   "give either offset or after, not both; after (the `next` of "
                                   "the page before) is the one to use",
                                   "offset"});
    }
    auto key = DecodeCursor(CursorKind::kUsageRecords, req.get_param_value("after"));
    if (!key) return ReplyError(res, key.error());
    const auto colon = key->find(':');
    TimeMs start = 0;
    auto [p, ec] = std::from_chars(key->data(), key->data() + std::min(colon, key->size()), start);
    if (colon == std::string::npos || ec != std::errc() || p != key->data() + colon) {
      return ReplyError(res, DecodeCursor(CursorKind::kUsageRecords, "").error());
    }
    after.emplace(start, key->substr(colon + 1));
  }
  auto records =
      VisibleRecords(*meter_, *window, req.get_param_value("tenant"), scope, now, report_max_rows_);
  if (!records) return ReplyError(res, records.error());
  if (job) {
    std::erase_if(*records, [&](const model::UsageRecord& r) { return r.job_id != *job; });
  }
  auto prices = meter_->Prices();
  if (!prices) return ReplyError(res, prices.error());
  // Clipping to the window can tie starts at `from`: order by the key the
  // cursor names.
  std::sort(records->begin(), records->end(),
            [](const model::UsageRecord& a, const model::UsageRecord& b) {
              return std::tie(a.start_ms, a.run_id) < std::tie(b.start_ms, b.run_id);
            });
  std::size_t first = *offset;
  if (after) {
    auto it = std::upper_bound(
        records->begin(), records->end(), *after,
        [](const std::pair<TimeMs, std::string>& key, const model::UsageRecord& r) {
          return key < std::pair<TimeMs, std::string>(r.start_ms, r.run_id);
        });
    first = static_cast<std::size_t>(it - records->begin());
  }
  json list = json::array();
  for (std::size_t i = first; i < records->size() && i < first + *limit; ++i) {
    list.push_back(RecordJson((*records)[i]));
  }
  const model::UsageReport all = model::Aggregate(*records, {});
  const std::size_t next = first + *limit;
  json body{{"from_ms", window->first},
            {"to_ms", window->second},
            {"currency", Currency(*prices)},
            {"records", list},
            {"total_records", records->size()},
            {"next_offset", next < records->size() ? json(next) : json(nullptr)},
            {"telemetry", meter_->measured()},
            {"total", RowJson(all.total, {}, meter_->measured())}};
  if (next < records->size()) {
    const model::UsageRecord& last = (*records)[next - 1];
    body["next"] =
        EncodeCursor(CursorKind::kUsageRecords, fmt::format("{}:{}", last.start_ms, last.run_id));
  }
  Reply(res, 200, body);
}

void Api::ListBudgets(const http::Request&, http::Response& res, const model::TenantScope& scope) {
  if (meter_ == nullptr) return ReplyError(res, NoMeter());
  auto states = meter_->Budgets(clock_.NowMs(), scope);
  if (!states) return ReplyError(res, states.error());
  auto prices = meter_->Prices();
  if (!prices) return ReplyError(res, prices.error());
  json list = json::array();
  for (const auto& s : *states) list.push_back(BudgetJson(s, Currency(*prices)));
  Reply(res, 200, json{{"budgets", list}});
}

// Body: {"gpu_hours": "1000"} or {"amount": "5000.00"}, "alerts": [80, 100],
// "enforce": true.
void Api::SetBudget(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string tenant = req.matches[1];
  note.object = "budget/" + tenant;
  note.tenant = tenant;
  if (meter_ == nullptr) return ReplyError(res, NoMeter());
  auto policy = controller_.ActivePolicy();
  if (!policy) return ReplyError(res, policy.error());
  bool known = false;
  for (const auto& q : (*policy)->policy.queues) {
    if (q.tenant == tenant) known = true;
  }
  if (!known) {
    return ReplyError(res, Error{Code::kNotFound,
                                 fmt::format("tenant {} is not in policy v{}; budgets are for "
                                             "the policy's tenants (berth policy show)",
                                             tenant, (*policy)->version),
                                 "tenant"});
  }
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 "the body must be a JSON object: {\"gpu_hours\": \"1000\"} or "
                                 "{\"amount\": \"500.00\"}, \"alerts\": [80, 100], \"enforce\": "
                                 "true",
                                 "body"});
  }
  for (const auto& [k, v] : body.items()) {
    if (k != "gpu_hours" && k != "amount" && k != "alerts" && k != "enforce") {
      return ReplyError(res, Error{Code::kInvalidArgument,
                                   fmt::format("unknown field '{}'; allowed fields are: gpu_hours, "
                                               "amount, alerts, enforce",
                                               k),
                                   k});
    }
  }
  if (body.contains("gpu_hours") == body.contains("amount")) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 "give exactly one of gpu_hours (GPU-hours a month) or amount "
                                 "(money a month, in the price table's currency)",
                                 "gpu_hours"});
  }
  model::Budget b;
  b.tenant = tenant;
  const std::string field = body.contains("gpu_hours") ? "gpu_hours" : "amount";
  const json& v = body[field];
  const std::string text = v.is_string() ? v.get<std::string>() : v.is_number() ? v.dump() : "";
  auto micros = model::ParseMoney(text, field);
  if (!micros) return ReplyError(res, micros.error());
  if (*micros <= 0) {
    return ReplyError(res, Error{Code::kInvalidArgument, "must be more than zero", field});
  }
  if (field == "gpu_hours") {
    b.mgpu_ms = static_cast<std::int64_t>(static_cast<model::Int128>(*micros) * 3600);
  } else {
    b.cost_micros = *micros;
  }
  if (body.contains("alerts")) {
    const json& a = body["alerts"];
    if (!a.is_array()) {
      return ReplyError(res, Error{Code::kInvalidArgument,
                                   "must be a list of percentages, e.g. [50, 80, 100]", "alerts"});
    }
    std::set<std::int32_t> seen;
    for (const auto& p : a) {
      if (!p.is_number_integer() || p.get<std::int64_t>() < 1 || p.get<std::int64_t>() > 1000) {
        return ReplyError(
            res, Error{Code::kInvalidArgument,
                       fmt::format("{} is not a percentage from 1 to 1000", p.dump()), "alerts"});
      }
      seen.insert(p.get<std::int32_t>());
    }
    b.alert_percents.assign(seen.begin(), seen.end());
  } else {
    b.alert_percents = {80, 100};
  }
  if (body.contains("enforce")) {
    if (!body["enforce"].is_boolean()) {
      return ReplyError(res, Error{Code::kInvalidArgument, "must be true or false", "enforce"});
    }
    b.enforce = body["enforce"].get<bool>();
  }
  b.set_ms = clock_.NowMs();
  b.set_by = Actor(req);
  const json after{
      {field, model::FormatMoney(*micros)}, {"alerts", b.alert_percents}, {"enforce", b.enforce}};
  if (auto st = meter_->meter_store().SetBudget(
          b, RecordInChange<>(note, req, res, clock_.NowMs(),
                              [&after](AuditNote& n) { n.after = after; }));
      !st) {
    return ReplyError(res, st.error());
  }
  controller_.Wake();
  Reply(res, 200,
        json{{"tenant", tenant},
             {field, model::FormatMoney(*micros)},
             {"alerts", b.alert_percents},
             {"enforce", b.enforce}});
}

void Api::DeleteBudget(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string tenant = req.matches[1];
  note.object = "budget/" + tenant;
  note.tenant = tenant;
  if (meter_ == nullptr) return ReplyError(res, NoMeter());
  auto removed = meter_->meter_store().DeleteBudget(
      tenant, RecordInChange<>(note, req, res, clock_.NowMs(), [](AuditNote&) {}));
  if (!removed) return ReplyError(res, removed.error());
  if (!*removed) {
    return ReplyError(
        res, Error{Code::kNotFound,
                   fmt::format("tenant {} has no budget (berth budget list)", tenant), "tenant"});
  }
  controller_.Wake();
  Reply(res, 200, json{{"tenant", tenant}, {"deleted", true}});
}

}  // namespace berth::server
