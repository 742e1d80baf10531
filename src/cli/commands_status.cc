// `berth status`: the control plane as each of its berthd sees it. The CLI
// asks every address it was given (--server URL,URL,..., $BERTH_SERVER or
// the login's) for GET /healthz, one after the other and never anywhere
// else, and prints who leads, at which term and since when, how current
// each standby's view of the lease is (a standby holds no state of its
// own: its lag is the age of its last read of the lease), and which
// berthd did not answer. It fails (exit code of "unavailable") when no
// berthd answers as the one serving the API, so that a script or a probe
// can use it.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/table.h"

namespace berth::cli {

using nlohmann::json;

namespace {

std::string Seconds(const json& ms) {
  if (!ms.is_number()) return "-";
  return fmt::format("{:.1f}s", ms.get<double>() / 1000.0);
}

// The server that serves the API: the leader of the highest term (a
// deposed one may still say "leader" for a moment), or a single berthd.
const json* Serving(const json& servers) {
  const json* best = nullptr;
  for (const auto& s : servers) {
    const std::string role = s.value("role", "");
    if (role != "leader" && role != "single") continue;
    if (best == nullptr || s.value("term", 0) > best->value("term", 0)) best = &s;
  }
  return best;
}

}  // namespace

json StatusDocument(ApiClient& api) {
  json servers = json::array();
  for (std::size_t i = 0; i < api.urls().size(); ++i) {
    json row{{"server", api.urls()[i].text}};
    auto health = api.GetFrom(i, "/healthz");
    if (!health) {
      row["reachable"] = false;
      row["error"] = health.error().message;
    } else {
      row["reachable"] = true;
      for (const char* key : {"role", "term", "leader", "leading_since", "lease_age_ms",
                              "lease_expires_in_ms", "database_error"}) {
        if (health->contains(key)) row[key] = (*health)[key];
      }
      if (!row.contains("role")) row["role"] = "single";  // a berthd before leadership
    }
    servers.push_back(std::move(row));
  }
  json doc{{"servers", servers}, {"leader", nullptr}};
  if (const json* s = Serving(doc["servers"])) {
    doc["leader"] = s->at("server");
    doc["term"] = s->value("term", 0);
  }
  return doc;
}

std::string RenderStatus(const json& doc, std::int64_t now_ms) {
  std::string text;
  const json* serving = Serving(doc.at("servers"));
  if (serving == nullptr) {
    text += "no berthd answers as the leader\n\n";
  } else if (serving->value("role", "") == "single") {
    text += fmt::format("{} serves alone (embedded state, no standbys)\n\n",
                        serving->value("server", ""));
  } else {
    const json since = serving->value("leading_since", json());
    text += fmt::format(
        "leader: {} at term {}, for {}\n\n", serving->value("server", ""),
        serving->value("term", 0),
        AgeSince(now_ms, since.is_number_integer() ? std::optional(since.get<std::int64_t>())
                                                   : std::nullopt));
  }
  Table table({"SERVER", "ROLE", "TERM", "LEASE SEEN", "LEASE LEFT", "NOTE"});
  for (const auto& s : doc.at("servers")) {
    if (!Bool(s, "reachable")) {
      table.AddRow({s.value("server", ""), "-", "-", "-", "-",
                    Truncate(OneLine("unreachable: " + s.value("error", "")), 100)});
      continue;
    }
    const std::string role = s.value("role", "");
    std::string note;
    if (s.contains("database_error")) {
      note = "database: " + s.value("database_error", "");
    } else if (role == "standby") {
      note = serving != nullptr && serving->value("term", 0) == s.value("term", 0)
                 ? "ready to take over"
                 : fmt::format("sees {} lead", s.value("leader", std::string("nobody")));
    } else if (role == "leader" && serving != &s) {
      note = "deposed: a later term leads";
    }
    const bool leased = role != "single";
    table.AddRow({s.value("server", ""), role,
                  leased ? std::to_string(s.value("term", 0)) : std::string("-"),
                  leased ? Seconds(s.value("lease_age_ms", json())) + " ago" : std::string("-"),
                  leased ? Seconds(s.value("lease_expires_in_ms", json())) : std::string("-"),
                  Truncate(OneLine(note), 100)});
  }
  return text + table.Render();
}

Status ShowStatus(ApiClient& api, const Output& output) {
  const json doc = StatusDocument(api);
  if (output.format == OutputFormat::kJson) {
    PrintJson(output, doc);
  } else {
    output.out << RenderStatus(doc, output.clock.NowMs());
  }
  if (doc.at("leader").is_null()) {
    return Fail(Code::kUnavailable,
                fmt::format("no berthd of the {} given leads: a takeover may be under way (it "
                            "takes about --leader-ttl), or none can reach the database",
                            api.urls().size()));
  }
  return Ok();
}

}  // namespace berth::cli
