// RenderPolicy, RenderPolicyVersions, RenderPolicyDiff, RenderPolicyPreview:
// the `berth policy` views.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/render.h"
#include "cli/table.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

constexpr std::size_t kCommentWidth = 60;

// "5m ago", or "-" when berthd did not say.
std::string Ago(const json& v, std::int64_t now_ms) {
  std::string age = AgeSince(now_ms, Int(v, "applied_at_ms"));
  return age == "-" ? age : age + " ago";
}

// "applied 5m ago by alice: vision team"
std::string Applied(const json& v, std::int64_t now_ms) {
  std::string out = fmt::format("applied {} by {}", Ago(v, now_ms), Text(v, "applied_by"));
  std::string comment = Text(v, "comment");
  if (comment != "-" && !comment.empty()) out += ": " + OneLine(comment);
  return out;
}

std::string Milli(std::int64_t milli) {
  if (milli % 1000 == 0) return std::to_string(milli / 1000);
  std::string out = fmt::format("{}.{:03}", milli / 1000, milli % 1000);
  while (out.ends_with('0')) out.pop_back();
  return out;
}

}  // namespace

std::string QuotaAmount(std::string_view resource, const json& amount) {
  if (amount.is_null()) return "none";
  if (!amount.is_number_integer()) return ValueText(amount);
  auto v = amount.get<std::int64_t>();
  if (resource == "gpus" || resource.starts_with("gpus/")) return Milli(v);
  if (resource == "cpu") return FormatCpuMillis(v);
  if ((resource == "memory" || resource == "gpu_memory") && v >= 0) {
    return FormatMemory(static_cast<std::uint64_t>(v));
  }
  return std::to_string(v);
}

std::string RenderPolicy(const json& v, std::int64_t now_ms) {
  std::string out = fmt::format(
      "Policy v{}{}, {}\n", IntText(v, "version"),
      Field(v, "active") != nullptr && v["active"] == true ? " (active)" : "", Applied(v, now_ms));
  if (auto restores = Int(v, "restores")) {
    out += fmt::format("Rollback: restores the text of v{} (v{} was active before)\n", *restores,
                       IntText(v, "rolled_back_from"));
  }
  Table table({"QUEUE", "KIND", "POOLS", "RESOURCE", "GUARANTEED", "BORROW LIMIT", "WEIGHT",
               "LENDING LIMIT"});
  for (const auto& q : Array(v, "policy.queues")) {
    std::string pools = Join(Array(q, "pools"), ",");
    if (pools == "-") pools = "all";
    const json* quota = Field(q, "quota");
    if (quota == nullptr || !quota->is_object() || quota->empty()) {
      table.AddRow({Text(q, "path"), Text(q, "kind"), pools, "-", "-", "-", "-", "-"});
      continue;
    }
    // One row per resource, the queue repeated so each row stands alone.
    for (const auto& [resource, amounts] : quota->items()) {
      const json* borrow = Field(amounts, "borrow_limit");
      table.AddRow({Text(q, "path"), Text(q, "kind"), pools, resource,
                    QuotaAmount(resource, amounts.value("guaranteed", json(nullptr))),
                    QuotaAmount(resource, borrow == nullptr ? json(nullptr) : *borrow),
                    IntText(amounts, "weight"),
                    QuotaAmount(resource, amounts.value("lending_limit", json(0)))});
    }
  }
  out += "\n" + table.Render();
  return out;
}

std::string RenderPolicyVersions(const json& response, std::int64_t now_ms) {
  const json& versions = Array(response, "versions");
  if (versions.empty()) return "No policy versions.\n";
  Table table({"VERSION", "ACTIVE", "APPLIED", "BY", "COMMENT"});
  for (const auto& v : versions) {
    std::string comment = Text(v, "comment");
    if (comment == "-") comment = "";
    if (auto restores = Int(v, "restores")) {
      std::string note = fmt::format("restores v{}", *restores);
      if (comment.find(fmt::format("v{}", *restores)) == std::string::npos) {
        if (comment.empty()) {
          comment = note;
        } else {
          comment.append(" (").append(note).append(")");
        }
      }
    }
    table.AddRow({IntText(v, "version"),
                  Field(v, "active") != nullptr && v["active"] == true ? "*" : "", Ago(v, now_ms),
                  Text(v, "applied_by"),
                  Truncate(OneLine(comment.empty() ? "-" : comment), kCommentWidth)});
  }
  return table.Render();
}

std::string RenderPolicyDiff(const json& response) {
  std::string from = IntText(response, "from");
  std::string to = IntText(response, "to");
  std::string diff = Text(response, "diff");
  bool dry_run = Field(response, "dry_run") != nullptr && response["dry_run"] == true;
  if (diff == "-" || diff.empty()) {
    return dry_run ? fmt::format("no changes: the file matches the active policy v{}\n", from)
                   : fmt::format("policy v{} and v{} are the same\n", from, to);
  }
  std::string out = diff;
  if (!out.ends_with('\n')) out += '\n';
  std::vector<std::string> lines;
  for (const auto& q : Array(response, "changes.queues_added")) {
    lines.push_back(fmt::format("  + queue {}", ValueText(q)));
  }
  for (const auto& q : Array(response, "changes.queues_removed")) {
    lines.push_back(fmt::format("  - queue {}", ValueText(q)));
  }
  for (const auto& c : Array(response, "changes.quota_changes")) {
    std::string resource = Text(c, "resource");
    lines.push_back(fmt::format("  ~ {} {} {}: {} -> {}", Text(c, "queue"), resource,
                                Text(c, "field"),
                                QuotaAmount(resource, c.value("from", json(nullptr))),
                                QuotaAmount(resource, c.value("to", json(nullptr)))));
  }
  for (const auto& c : Array(response, "changes.queue_changes")) {
    auto value = [&](std::string_view key) {
      const json* v = Field(c, key);
      if (v == nullptr) return std::string("-");
      if (v->is_array()) return v->empty() ? std::string("all") : Join(*v, ",");
      return ValueText(*v);
    };
    lines.push_back(fmt::format("  ~ {} {}: {} -> {}", Text(c, "queue"), Text(c, "field"),
                                value("from"), value("to")));
  }
  for (const auto& s : Array(response, "changes.settings_changed")) {
    lines.push_back(fmt::format("  ~ {} changed", ValueText(s)));
  }
  out += fmt::format("\nSummary v{} -> v{}{}:\n", from, to, dry_run ? " (not applied)" : "");
  if (lines.empty()) lines.emplace_back("  no queue or quota changes (formatting only)");
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace berth::cli

namespace berth::cli {
namespace {

// Seconds as people read a wait: "4m58s", "0s"; a change is signed.
std::string Seconds(double s, bool sign = false) {
  auto ms = static_cast<std::int64_t>(std::llround(s)) * 1000;
  std::string text = FormatDurationMs(ms < 0 ? -ms : ms);
  if (ms < 0) return "-" + text;
  return sign && ms > 0 ? "+" + text : text;
}

// Two decimals; a value too small to show is "<0.01", not "0.00".
std::string Number(double v, bool sign = false) {
  const char* plus = sign && v > 0 ? "+" : "";
  if (v != 0 && std::fabs(v) < 0.005) return fmt::format("{}{}<0.01", plus, v < 0 ? "-" : "");
  std::string text = fmt::format("{:.2f}", v);
  if (text == "-0.00") text = "0.00";
  return text == "0.00" ? text : plus + text;
}

// "5m47s -> 2m27s (-3m20s)"; "-" when berthd sent no number (unpriced cost).
std::string Cell(const json& row, const char* key, bool duration) {
  const json* from = Field(row, std::string("current.") + key);
  const json* to = Field(row, std::string("proposed.") + key);
  const json* change = Field(row, std::string("change.") + key);
  if (from == nullptr || to == nullptr || !from->is_number() || !to->is_number()) return "-";
  auto f = [&](const json* v, bool sign) {
    double d = v != nullptr && v->is_number() ? v->get<double>() : 0.0;
    return duration ? Seconds(d, sign) : Number(d, sign);
  };
  return fmt::format("{} -> {} ({})", f(from, false), f(to, false), f(change, true));
}

}  // namespace

std::string RenderPolicyPreview(const json& r, const std::string& file) {
  std::string window = Text(r, "window.duration");
  if (Field(r, "message") != nullptr) return Text(r, "message") + "\n";
  std::string out = fmt::format(
      "Policy preview: v{} (active) -> v{} (not applied), replaying {} jobs submitted in the last "
      "{} on {} GPUs ({} node{})\n\n",
      IntText(r, "from"), IntText(r, "to"), IntText(r, "jobs"), window, IntText(r, "cluster_gpus"),
      IntText(r, "nodes"), Int(r, "nodes") == 1 ? "" : "s");
  Table table({"TENANT", "JOBS", "MEAN WAIT", "P95 WAIT", "MEAN JCT", "GPU-HOURS", "COST"});
  auto add = [&](const json& row, const std::string& name) {
    table.AddRow({name, IntText(row, "current.jobs"), Cell(row, "mean_wait_s", true),
                  Cell(row, "p95_wait_s", true), Cell(row, "mean_jct_s", true),
                  Cell(row, "gpu_hours", false), Cell(row, "cost", false)});
  };
  for (const auto& row : Array(r, "tenants")) add(row, Text(row, "tenant"));
  if (const json* all = Field(r, "overall")) add(*all, "(all)");
  out += table.Render();
  out +=
      "\nEach cell: current -> proposed (change). Wait is submit to first start; JCT is "
      "submit to end.\n";
  if (Field(r, "priced") == nullptr || r["priced"] != true) {
    const json& missing = Array(r, "unpriced_models");
    out +=
        missing.empty()
            ? "Cost: unpriced (Berth has no price table yet); pass --prices FILE with a price "
              "per GPU-hour by GPU model.\n"
            : fmt::format("Cost: unpriced: no price for {} and no default.\n", Join(missing, ", "));
  }
  auto now = Int(r, "overall.current.evictions").value_or(0);
  auto then = Int(r, "overall.proposed.evictions").value_or(0);
  if (now > 0 || then > 0) {
    out += fmt::format(
        "Evictions (reclaim and preemption): {} -> {}; work lost: {} -> {} GPU-hours.\n", now, then,
        Number(Field(r, "overall.current.lost_gpu_hours") != nullptr
                   ? r["overall"]["current"]["lost_gpu_hours"].get<double>()
                   : 0.0),
        Number(Field(r, "overall.proposed.lost_gpu_hours") != nullptr
                   ? r["overall"]["proposed"]["lost_gpu_hours"].get<double>()
                   : 0.0));
  }
  if (auto n = Int(r, "never_ran"); n && *n > 0) {
    out += fmt::format("Not replayed: {} job(s) in the window never started (no run time).\n", *n);
  }
  if (auto n = Int(r, "still_running"); n && *n > 0) {
    out += fmt::format("{} job(s) still running count their run time so far.\n", *n);
  }
  if (auto n = Int(r, "never_started.proposed"); n && *n > 0) {
    out += fmt::format("Under v{}, {} job(s) would never start.\n", IntText(r, "to"), *n);
  }
  out += fmt::format("Nothing was applied. To apply: berth policy apply {}\n",
                     file.empty() ? "FILE" : file);
  return out;
}

}  // namespace berth::cli
