// `berth audit` and `berth audit verify`: the audit trail berthd keeps
// (docs/operations.md, "Audit log").
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <vector>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/table.h"
#include "common/text_escape.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

bool AllDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// "2026-11-30T05:00:00Z", "2026-11-30T05:00:00.250+02:00" (also with a
// space or lower-case t/z) as epoch milliseconds.
std::optional<std::int64_t> ParseRfc3339(std::string_view s) {
  auto num = [&](std::size_t pos, std::size_t len) -> std::optional<int> {
    if (pos + len > s.size()) return std::nullopt;
    int v = 0;
    auto [p, ec] = std::from_chars(s.data() + pos, s.data() + pos + len, v);
    if (ec != std::errc() || p != s.data() + pos + len) return std::nullopt;
    return v;
  };
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' ||
      (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  auto year = num(0, 4), mon = num(5, 2), day = num(8, 2), hour = num(11, 2), min = num(14, 2),
       sec = num(17, 2);
  if (!year || !mon || !day || !hour || !min || !sec || *mon < 1 || *mon > 12 || *day < 1 ||
      *day > 31 || *hour > 23 || *min > 59 || *sec > 60) {
    return std::nullopt;
  }
  std::size_t pos = 19;
  std::int64_t millis = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 3) millis = millis * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (int d = digits; d < 3; ++d) millis *= 10;
  }
  std::int64_t offset_s = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    auto oh = num(pos + 1, 2), om = num(pos + 4, 2);
    if (!oh || !om || pos + 3 >= s.size() || s[pos + 3] != ':') return std::nullopt;
    offset_s = (s[pos] == '+' ? 1 : -1) * (std::int64_t{*oh} * 3600 + std::int64_t{*om} * 60);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *mon - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *min;
  tm.tm_sec = *sec;
  const std::int64_t utc = static_cast<std::int64_t>(timegm(&tm));
  return (utc - offset_s) * 1000 + millis;
}

// A record's before/after as one compact cell; "" for none.
std::string JsonCell(const json& j) {
  if (j.is_null()) return "";
  return j.is_string() ? j.get<std::string>() : j.dump();
}

}  // namespace

Result<std::string> AuditTimeQuery(const std::string& text, const std::string& flag) {
  if (text.empty() || AllDigits(text)) return text;
  if (auto d = ParseDurationMs(text); d && *d >= 0) return text;
  if (auto t = ParseRfc3339(text)) return std::to_string(*t);
  return InvalidField(flag, fmt::format("'{}' is neither a duration back from now (1h, 7d), an "
                                        "RFC 3339 time (2026-11-30T05:00:00Z) nor epoch "
                                        "milliseconds",
                                        text));
}

std::string RenderAudit(const json& response) {
  Table table({"SEQ", "TIME", "ACTOR", "ACTION", "OBJECT", "TENANT", "OUTCOME", "REQUEST"});
  for (const auto& r : response.value("records", json::array())) {
    table.AddRow({Str(r, "seq"), FormatTimeMs(r.value("time_ms", std::int64_t{0})),
                  OneLine(Str(r, "actor")), Str(r, "action"), OneLine(Str(r, "object")),
                  Str(r, "tenant").empty() ? "-" : Str(r, "tenant"),
                  Truncate(OneLine(Str(r, "outcome")), 60), Str(r, "request_id")});
  }
  if (table.empty()) return "No audit records match.\n";
  return table.Render();
}

std::string AuditCsv(const json& response) {
  std::string out =
      "seq,time,actor,tenant,action,object,before,after,request_id,source,outcome,prev_hash,"
      "hash\r\n";
  for (const auto& r : response.value("records", json::array())) {
    std::vector<std::string> cells{Str(r, "seq"),
                                   FormatTimeMs(r.value("time_ms", std::int64_t{0})),
                                   Str(r, "actor"),
                                   Str(r, "tenant"),
                                   Str(r, "action"),
                                   Str(r, "object"),
                                   JsonCell(r.value("before", json())),
                                   JsonCell(r.value("after", json())),
                                   Str(r, "request_id"),
                                   Str(r, "source"),
                                   Str(r, "outcome"),
                                   Str(r, "prev_hash"),
                                   Str(r, "hash")};
    out += CsvRow(cells);
  }
  return out;
}

Status ListAudit(ApiClient& api, const AuditQuery& q, const Output& output) {
  // berthd answers the newest records a page at a time, each page oldest
  // first, with the cursor of the older page before it.
  auto all = GetAllPages(api, "/v1/audit",
                         {{"since", q.since},
                          {"until", q.until},
                          {"actor", q.actor},
                          {"tenant", q.tenant},
                          {"action", q.action}},
                         "records", q.limit, PageOrder::kPrepend);
  if (!all) return std::unexpected(all.error());
  const json response{{"records", std::move(*all)}};
  switch (output.format) {
    case OutputFormat::kJson:
      output.out << response.dump(2) << '\n';
      break;
    case OutputFormat::kCsv:
      output.out << AuditCsv(response);
      break;
    case OutputFormat::kTable:
      output.out << RenderAudit(response);
      break;
  }
  return Ok();
}

Status VerifyAudit(ApiClient& api, const Output& output) {
  auto response = api.Get("/v1/audit/verify");
  if (!response) return std::unexpected(response.error());
  const json& v = *response;
  const bool ok = Bool(v, "ok");
  if (output.format == OutputFormat::kJson) {
    output.out << v.dump(2) << '\n';
  } else if (ok) {
    const json head = v.value("head", json::object());
    output.out << fmt::format("audit chain intact: {} records, head record {} ({})\n",
                              v.value("records", 0), head.value("seq", 0),
                              head.value("hash", std::string()));
  }
  if (output.format != OutputFormat::kJson) {
    for (const auto& note : v.value("notes", json::array())) {
      output.out << "note: " << note.get<std::string>() << '\n';
    }
  }
  if (ok) return Ok();
  const json& bad = v.value("first_bad_seq", json());
  return Fail(Code::kFailedPrecondition,
              bad.is_null() ? fmt::format("audit chain broken: {}", v.value("problem", ""))
                            : fmt::format("audit chain broken at record {}: {}", bad.dump(),
                                          v.value("problem", "")));
}

}  // namespace berth::cli
