// RenderWhy: the `berth why ID` view. The sentence comes from berthd, already
// in the asked language; the numbers are printed under their API names so a
// reader can match them to `-o json`.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "cli/json_view.h"
#include "cli/render.h"
#include "cli/table.h"
#include "common/units.h"

namespace berth::cli {

using nlohmann::json;

std::string RenderWhy(const json& why) {
  std::string out;
  std::string message = Text(why, "reason.message");
  if (message == "-" || message.empty()) message = Text(why, "reason.code");
  out += OneLine(message) + "\n";
  // A failure says what to do, with its evidence (a log line, an exit code).
  if (std::string failure = Text(why, "failure.message"); failure != "-" && !failure.empty()) {
    out += OneLine(failure) + "\n";
  }
  out += "\n";

  std::vector<std::pair<std::string, std::string>> lines;
  lines.reserve(32);  // the fields and the counts; GCC 12 at -O3 misreads growth from empty
  lines.emplace_back("job", fmt::format("{} ({})", IntText(why, "id"), Text(why, "name")));
  if (Field(why, "tenant") != nullptr || Field(why, "queue") != nullptr) {
    lines.emplace_back("queue", Text(why, "tenant") + "/" + Text(why, "queue"));
  }
  lines.emplace_back("state", Text(why, "state"));
  lines.emplace_back("code", Text(why, "reason.code"));
  if (std::string cls = Text(why, "failure.class"); cls != "-" && !cls.empty()) {
    lines.emplace_back("failure", cls);
    lines.emplace_back("evidence", Text(why, "failure.evidence"));
  }
  if (const json* counts = Field(why, "reason.counts"); counts != nullptr && counts->is_object()) {
    for (const auto& item : counts->items())
      lines.emplace_back(item.key(), ValueText(item.value()));
  }
  if (std::string detail = Text(why, "reason.detail"); detail != "-" && !detail.empty()) {
    lines.emplace_back("detail", detail);
  }
  std::size_t width = 0;
  for (const auto& [key, value] : lines) width = std::max(width, key.size() + 1);
  for (const auto& [key, value] : lines) {
    out += fmt::format("{:<{}}  {}\n", key + ":", width, OneLine(value));
  }

  const json& timeline = Array(why, "timeline");
  if (!timeline.empty()) {
    Table table({"TIME", "EVENT", "MESSAGE"});
    for (const auto& entry : timeline) {
      auto time = Int(entry, "time_ms");
      table.AddRow({time ? FormatTimeMs(*time) : "-", Text(entry, "event"),
                    OneLine(Text(entry, "message"))});
    }
    out += '\n' + table.Render();
  }
  return out;
}

}  // namespace berth::cli
