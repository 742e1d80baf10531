// `berth usage`, `berth price` and `berth budget`: metering over the API
// (docs/metering.md, docs/cli.md).
#include <fmt/format.h>

#include <charconv>
#include <ctime>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/table.h"
#include "common/text_escape.h"
#include "model/policy.h"
#include "model/reason.h"

namespace berth::cli {
namespace {

using nlohmann::json;

// mGPU-ms as GPU-hours with three decimals (the JSON keeps the exact figure).
std::string Hours(const json& row) {
  const auto mgpu_ms = row.value("mgpu_ms", std::int64_t{0});
  return model::FormatGpuHours(mgpu_ms, 3);
}

// "—" for a figure telemetry does not give yet.
std::string Unknown(const json& row, const char* key) {
  auto it = row.find(key);
  if (it == row.end() || it->is_null()) return "—";
  return fmt::format("{:.3f}", it->get<double>());
}

std::vector<std::string> KeyCells(const json& row, const json& by) {
  std::vector<std::string> cells;
  const json key = row.value("key", json::object());
  for (const auto& k : by) {
    std::string v = key.value(k.get<std::string>(), "");
    cells.push_back(v.empty() ? "-" : v);
  }
  return cells;
}

std::string RenderUsage(const json& r) {
  const json by = r.value("by", json::array());
  std::vector<std::string> headers;
  for (const auto& k : by) {
    std::string h = k.get<std::string>();
    for (auto& c : h) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    headers.push_back(h);
  }
  const std::string currency = r.value("currency", "USD");
  const bool measured = Bool(r, "telemetry");
  for (const char* h : {"GPU-HOURS", "USED", "IDLE"}) headers.emplace_back(h);
  headers.push_back("COST (" + currency + ")");
  headers.emplace_back("IDLE COST");
  headers.emplace_back("RUNS");
  headers.emplace_back("IDLE RUNS");
  Table table(headers);
  auto add = [&](const json& row, std::vector<std::string> cells) {
    cells.push_back(Hours(row));
    cells.push_back(Unknown(row, "used_gpu_hours"));
    cells.push_back(Unknown(row, "idle_gpu_hours"));
    cells.push_back(Str(row, "cost"));
    cells.push_back(measured ? Str(row, "idle_cost") : "—");
    cells.push_back(Str(row, "runs"));
    cells.push_back(measured ? Str(row, "idle_runs") : "—");
    table.AddRow(std::move(cells));
  };
  for (const auto& row : r.value("rows", json::array())) add(row, KeyCells(row, by));
  const json total = r.value("total", json::object());
  std::vector<std::string> total_cells(by.size(), "");
  if (!total_cells.empty()) total_cells[0] = "TOTAL";
  add(total, total_cells);
  if (!measured) {
    return table.Render() +
           "Used and idle GPU-hours need GPU telemetry, which this berthd does not collect.\n";
  }
  const auto window_min = r.value("idle_window_ms", std::int64_t{0}) / 60'000;
  return table.Render() +
         fmt::format(
             "USED weights allocated time by measured GPU utilization; IDLE is allocated "
             "time whose GPUs read under the idle threshold. IDLE RUNS stayed idle for "
             "{} min or more (GET /v1/usage/records marks them \"idle\": true).\n",
             window_min);
}

std::string UsageCsv(const json& r) {
  const json by = r.value("by", json::array());
  std::vector<std::string> header;
  for (const auto& k : by) header.push_back(k.get<std::string>());
  for (const char* column : {"mgpu_ms", "allocated_gpu_hours", "used_mgpu_ms", "idle_mgpu_ms",
                             "cost", "idle_cost", "runs", "idle_runs"}) {
    header.emplace_back(column);
  }
  std::string out = CsvRow(header);
  auto line = [&](const json& row, std::vector<std::string> cells) {
    cells.push_back(Str(row, "mgpu_ms"));
    cells.push_back(Hours(row));
    cells.push_back(Str(row, "used_mgpu_ms"));
    cells.push_back(Str(row, "idle_mgpu_ms"));
    cells.push_back(Str(row, "cost"));
    cells.push_back(Str(row, "idle_cost"));
    cells.push_back(Str(row, "runs"));
    cells.push_back(Str(row, "idle_runs"));
    out += CsvRow(cells);
  };
  for (const auto& row : r.value("rows", json::array())) {
    std::vector<std::string> cells;
    const json key = row.value("key", json::object());
    for (const auto& k : by) cells.push_back(key.value(k.get<std::string>(), ""));
    line(row, cells);
  }
  std::vector<std::string> total(by.size(), "");
  if (!total.empty()) total[0] = "TOTAL";
  line(r.value("total", json::object()), total);
  return out;
}

}  // namespace

Result<std::string> UsageTimeQuery(const std::string& text, const std::string& flag) {
  // A date alone is that day's UTC midnight.
  if (text.size() == 10 && text[4] == '-' && text[7] == '-') {
    return AuditTimeQuery(text + "T00:00:00Z", flag);
  }
  return AuditTimeQuery(text, flag);
}

Status ShowUsage(ApiClient& api, const UsageQuery& q, const Output& output) {
  auto response =
      api.Get("/v1/usage" +
              QueryString({{"by", q.by}, {"from", q.from}, {"to", q.to}, {"tenant", q.tenant}}));
  if (!response) return std::unexpected(response.error());
  switch (output.format) {
    case OutputFormat::kJson:
      output.out << response->dump(2) << '\n';
      break;
    case OutputFormat::kCsv:
      output.out << UsageCsv(*response);
      break;
    case OutputFormat::kTable:
      output.out << RenderUsage(*response);
      break;
  }
  return Ok();
}

Status ApplyPrices(ApiClient& api, const std::string& yaml, const std::string& comment,
                   std::int64_t base, const Output& output) {
  auto applied =
      api.Post("/v1/prices" + QueryString({{"comment", comment},
                                           {"base_version", base > 0 ? std::to_string(base) : ""}}),
               yaml, "application/yaml");
  if (!applied) return std::unexpected(applied.error());
  if (output.format == OutputFormat::kJson) {
    output.out << applied->dump(2) << '\n';
  } else {
    output.out << fmt::format(
        "price table v{} applied; runs are priced with it from now on (berth price show)\n",
        Str(*applied, "version"));
  }
  return Ok();
}

Status ShowPrices(ApiClient& api, std::optional<std::int64_t> version, const Output& output) {
  auto r =
      api.Get("/v1/prices" + QueryString({{"version", version ? std::to_string(*version) : ""}}));
  if (!r) return std::unexpected(r.error());
  if (output.format == OutputFormat::kJson) {
    output.out << r->dump(2) << '\n';
    return Ok();
  }
  const json table = r->value("table", json::object());
  if (r->value("version", json()).is_null()) {
    output.out << "No price table applied yet: every run costs 0. Apply one with "
                  "`berth price apply FILE` (docs/metering.md).\n";
    return Ok();
  }
  output.out << fmt::format("price table v{} ({}), default {} per GPU-hour\n", Str(*r, "version"),
                            table.value("currency", ""), table.value("default", ""));
  Table t({"MODEL", "POOL", "PER GPU-HOUR"});
  for (const auto& p : table.value("prices", json::array())) {
    t.AddRow({Str(p, "model"), Str(p, "pool"), Str(p, "per_gpu_hour")});
  }
  if (!t.empty()) output.out << t.Render();
  return Ok();
}

Status SetBudget(ApiClient& api, const BudgetArgs& args, const Output& output) {
  json body = json::object();
  if (!args.gpu_hours.empty()) body["gpu_hours"] = args.gpu_hours;
  if (!args.amount.empty()) body["amount"] = args.amount;
  if (!args.alerts.empty()) {
    json list = json::array();
    std::size_t pos = 0;
    while (pos <= args.alerts.size()) {
      const std::size_t comma = std::min(args.alerts.find(',', pos), args.alerts.size());
      const std::string part = args.alerts.substr(pos, comma - pos);
      pos = comma + 1;
      std::string digits = part;
      if (!digits.empty() && digits.back() == '%') digits.pop_back();
      int v = 0;
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size()) {
        return InvalidField("--alert", fmt::format("'{}' is not a percentage; write e.g. "
                                                   "--alert 50,80,100",
                                                   part));
      }
      list.push_back(v);
    }
    body["alerts"] = list;
  }
  body["enforce"] = args.enforce;
  auto r = api.Post("/v1/budgets/" + args.tenant, body.dump(), "application/json");
  if (!r) return std::unexpected(r.error());
  if (output.format == OutputFormat::kJson) {
    output.out << r->dump(2) << '\n';
  } else {
    output.out << fmt::format(
        "budget of tenant {} set: {} a month, alerts at {}%{}\n", args.tenant,
        r->contains("gpu_hours") ? Str(*r, "gpu_hours") + " GPU-hours" : Str(*r, "amount"),
        fmt::join(r->value("alerts", std::vector<int>{}), "%, "),
        args.enforce ? "; enforced (low-priority jobs wait when over)" : "");
  }
  return Ok();
}

Status ListBudgets(ApiClient& api, const Output& output) {
  auto r = api.Get("/v1/budgets");
  if (!r) return std::unexpected(r.error());
  if (output.format == OutputFormat::kJson) {
    output.out << r->dump(2) << '\n';
    return Ok();
  }
  Table t({"TENANT", "MONTH", "USED", "BUDGET", "UNIT", "ALERTS", "CROSSED", "ENFORCE", "OVER"});
  for (const auto& b : r->value("budgets", json::array())) {
    const std::string unit = Str(b, "unit") == "gpu_hours" ? "GPU-hours" : Str(b, "currency");
    t.AddRow({Str(b, "tenant"), Str(b, "month"), Str(b, "used"), Str(b, "limit"), unit,
              fmt::format("{}", fmt::join(b.value("alerts", std::vector<int>{}), ",")),
              fmt::format("{}", fmt::join(b.value("crossed", std::vector<int>{}), ",")),
              Bool(b, "enforce") ? "yes" : "no", Bool(b, "over") ? "yes" : "no"});
  }
  if (t.empty()) {
    output.out << "No budgets. Set one with `berth budget set TENANT --gpu-hours N`.\n";
    return Ok();
  }
  output.out << t.Render();
  return Ok();
}

namespace {

// A milli-GPU amount of GET /v1/queues as GPUs ("4", "0.5"); "-" for null.
std::string Gpus(const json& q, const char* key) {
  if (!q.contains(key) || !q[key].is_number_integer()) return "-";
  return model::FormatQuotaAmount(model::ResourceKind::kGpus, q[key].get<std::int64_t>());
}

}  // namespace

Status ListQueues(ApiClient& api, const std::string& tenant, const Output& output) {
  auto r = api.Get("/v1/queues" + QueryString({{"tenant", tenant}}));
  if (!r) return std::unexpected(r.error());
  if (output.format == OutputFormat::kJson) {
    output.out << r->dump(2) << '\n';
    return Ok();
  }
  Table t({"QUEUE", "KIND", "GUARANTEED", "USED", "BORROWED", "IDLE", "LENDABLE", "BORROW LIMIT",
           "JOBS"});
  for (const auto& q : r->value("queues", json::array())) {
    t.AddRow({Str(q, "queue"), Str(q, "kind"), Gpus(q, "guaranteed_mgpu"), Gpus(q, "used_mgpu"),
              Gpus(q, "borrowed_mgpu"), Gpus(q, "idle_guaranteed_mgpu"), Gpus(q, "lendable_mgpu"),
              q.contains("guaranteed_mgpu") && !q["guaranteed_mgpu"].is_null() &&
                      q["borrow_limit_mgpu"].is_null()
                  ? "none"
                  : Gpus(q, "borrow_limit_mgpu"),
              std::to_string(q.value("running_jobs", 0))});
  }
  if (t.empty()) {
    output.out << (tenant.empty()
                       ? "No queues in your tenants.\n"
                       : fmt::format("No queues of tenant {} that you can see.\n", tenant));
    return Ok();
  }
  output.out << t.Render();
  output.out << fmt::format(
      "GPUs under policy v{}; USED counts Scheduled and Running jobs, a queue's children's "
      "included; - : no GPU quota declared\n",
      r->value("policy_version", 0));
  return Ok();
}

}  // namespace berth::cli
