// `berth quota ...`: quota requests (docs/cli.md, "Quota requests"). A
// tenant files one; a platform admin approves it, which makes a new policy
// version that `berth policy rollback` undoes, or rejects it.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/json_view.h"
#include "cli/table.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

// "guaranteed 16, borrow_limit 8": the fields the request changes.
std::string Change(const json& r) {
  std::string out;
  for (const char* f : {"guaranteed", "borrow_limit", "weight", "lending_limit"}) {
    const json* v = Field(r, f);
    if (v == nullptr) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", f, ValueText(*v));
  }
  return out.empty() ? "-" : out;
}

std::string Path(std::int64_t id, std::string_view action = {}) {
  return action.empty() ? fmt::format("/v1/quota-requests/{}", id)
                        : fmt::format("/v1/quota-requests/{}/{}", id, action);
}

}  // namespace

Status FileQuotaRequest(ApiClient& api, const QuotaRequestFlags& flags, const Output& output) {
  json body{{"queue", flags.queue}, {"resource", flags.resource}, {"reason", flags.reason}};
  if (!flags.guaranteed.empty()) body["guaranteed"] = flags.guaranteed;
  if (!flags.borrow_limit.empty()) body["borrow_limit"] = flags.borrow_limit;
  if (!flags.weight.empty()) body["weight"] = flags.weight;
  if (!flags.lending_limit.empty()) body["lending_limit"] = flags.lending_limit;
  auto filed = api.Post("/v1/quota-requests", body.dump(), "application/json");
  return Show(filed, output, [](const json& r) {
    return fmt::format(
        "quota request {} filed: {} {} {} ({})\na platform admin decides it: berth quota approve "
        "{} | berth quota reject {} --comment TEXT\n",
        IntText(r, "id"), Text(r, "queue"), Text(r, "resource"), Change(r), Text(r, "state"),
        IntText(r, "id"), IntText(r, "id"));
  });
}

std::string RenderQuotaRequests(const json& response) {
  Table table({"ID", "STATE", "QUEUE", "RESOURCE", "CHANGE", "FILED", "BY", "POLICY", "REASON"});
  for (const auto& r : Array(response, "requests")) {
    auto filed = Int(r, "filed_ms");
    auto version = Int(r, "policy_version");
    table.AddRow({IntText(r, "id"), Text(r, "state"), Text(r, "queue"), Text(r, "resource"),
                  Change(r), filed ? FormatTimeMs(*filed) : "-", OneLine(Text(r, "filed_by")),
                  version ? fmt::format("v{}", *version) : "-",
                  Truncate(OneLine(Text(r, "reason")), 50)});
  }
  if (table.empty()) return "No quota requests match.\n";
  return table.Render();
}

Status ListQuotaRequests(ApiClient& api, const std::string& state, const std::string& tenant,
                         const Output& output) {
  auto list = GetAllPages(api, "/v1/quota-requests", {{"state", state}, {"tenant", tenant}},
                          "requests", 0, PageOrder::kAppend);
  if (!list) return std::unexpected(list.error());
  return Show(json{{"requests", std::move(*list)}}, output, RenderQuotaRequests);
}

std::string RenderQuotaRequest(const json& r) {
  std::string out;
  auto line = [&](std::string_view k, const std::string& v) {
    out += fmt::format("{:<15}{}\n", std::string(k) + ":", v);
  };
  line("Request", IntText(r, "id"));
  line("State", Text(r, "state"));
  line("Queue", Text(r, "queue"));
  line("Tenant", Text(r, "tenant"));
  line("Resource", Text(r, "resource"));
  line("Change", Change(r));
  line("Reason", OneLine(Text(r, "reason")));
  auto filed = Int(r, "filed_ms");
  line("Filed", fmt::format("{} by {}", filed ? FormatTimeMs(*filed) : "-", Text(r, "filed_by")));
  if (auto decided = Int(r, "decided_ms")) {
    line("Decided", fmt::format("{} by {}", FormatTimeMs(*decided), Text(r, "decided_by")));
    std::string comment = Text(r, "comment");
    if (!comment.empty() && comment != "-") line("Comment", OneLine(comment));
  }
  if (auto v = Int(r, "policy_version")) line("Policy", fmt::format("v{}", *v));
  return out;
}

Status ShowQuotaRequest(ApiClient& api, std::int64_t id, const Output& output) {
  return Show(api.Get(Path(id)), output, RenderQuotaRequest);
}

Status ApproveQuotaRequest(ApiClient& api, std::int64_t id, const std::string& comment,
                           const Output& output) {
  auto approved =
      api.Post(Path(id, "approve") + QueryString({{"comment", comment}}), "", "application/json");
  return Show(approved, output, [&](const json& r) {
    auto v = Int(r, "policy_version").value_or(0);
    return fmt::format(
        "quota request {} approved: policy v{} is active ({} {} {})\nto undo it: berth policy "
        "rollback {}\n",
        id, v, Text(r, "queue"), Text(r, "resource"), Change(r), v - 1);
  });
}

Status RejectQuotaRequest(ApiClient& api, std::int64_t id, const std::string& comment,
                          const Output& output) {
  auto rejected =
      api.Post(Path(id, "reject") + QueryString({{"comment", comment}}), "", "application/json");
  return Show(rejected, output, [&](const json& r) {
    return fmt::format("quota request {} rejected: {}\n", id, OneLine(Text(r, "comment")));
  });
}

Status WithdrawQuotaRequest(ApiClient& api, std::int64_t id, const Output& output) {
  auto withdrawn = api.Post(Path(id, "withdraw"), "", "application/json");
  return Show(withdrawn, output,
              [&](const json&) { return fmt::format("quota request {} withdrawn\n", id); });
}

}  // namespace berth::cli
