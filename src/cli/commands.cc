#include "cli/commands.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "cli/json_view.h"
#include "cli/render.h"
#include "cli/version.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

// Jobs asked for per page with --limit (berthd's default page without).

constexpr std::array<std::string_view, 6> kStates{"Pending",   "Scheduled", "Running",
                                                  "Succeeded", "Failed",    "Cancelled"};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string JobPath(std::uint64_t id) {
  return fmt::format("/v1/jobs/{}", id);
}

}  // namespace

void PrintJson(const Output& output, const json& doc) {
  output.out << doc.dump(2) << '\n';
}

std::string Str(const json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

Status Show(const Result<json>& response, const Output& output,
            const std::function<std::string(const json&)>& human) {
  if (!response) return std::unexpected(response.error());
  if (output.format == OutputFormat::kJson) {
    PrintJson(output, *response);
  } else {
    output.out << human(*response);
  }
  return Ok();
}

Result<std::string> NormalizeStates(std::string_view states) {
  std::string out;
  while (!states.empty()) {
    std::size_t comma = states.find(',');
    std::string_view name = states.substr(0, comma);
    states.remove_prefix(comma == std::string_view::npos ? states.size() : comma + 1);
    if (name.empty()) continue;
    auto it = std::find_if(kStates.begin(), kStates.end(),
                           [&](std::string_view known) { return EqualsIgnoreCase(known, name); });
    if (it == kStates.end()) {
      return InvalidField("--state", fmt::format("unknown state '{}'; use one or more of {}", name,
                                                 fmt::join(kStates, ", ")));
    }
    if (!out.empty()) out += ',';
    out += *it;
  }
  return out;
}

Status SubmitJob(ApiClient& api, const std::string& spec, const Output& output) {
  auto job = api.Post("/v1/jobs", spec, "application/yaml");
  return Show(job, output, [&](const json& r) {
    if (r.contains("array") && r["array"].is_object()) {
      return fmt::format("array {} submitted ({}): {} jobs, {} to {}\n", IntText(r, "id"),
                         Text(r, "name"), IntText(r, "array.size"), IntText(r, "array.jobs.first"),
                         IntText(r, "array.jobs.last"));
    }
    return fmt::format("job {} submitted ({})\n", IntText(r, "id"), Text(r, "name"));
  });
}

Status ListJobs(ApiClient& api, const JobFilter& filter, const Output& output) {
  // berthd answers a page at a time (GET /v1/jobs, newest first) with the
  // cursor of the next one.
  auto jobs =
      GetAllPages(api, "/v1/jobs",
                  {{"state", filter.states},
                   {"queue", filter.queue},
                   {"tenant", filter.tenant},
                   {"array", filter.array == 0 ? std::string() : std::to_string(filter.array)},
                   {"full", filter.full ? "true" : ""}},
                  "jobs", filter.limit, PageOrder::kAppend);
  if (!jobs) return std::unexpected(jobs.error());
  return Show(json{{"jobs", std::move(*jobs)}}, output,
              [&](const json& r) { return RenderJobs(r, output.clock.NowMs()); });
}

Status ShowJob(ApiClient& api, std::uint64_t id, const Output& output) {
  auto job = api.Get(JobPath(id));
  return Show(job, output, [&](const json& r) { return RenderJob(r, output.clock.NowMs()); });
}

Status ExplainJob(ApiClient& api, std::uint64_t id, const std::string& lang, const Output& output) {
  auto why = api.Get(JobPath(id) + "/why" + QueryString({{"lang", lang}}));
  const model::Lang words = model::ParseLang(lang).value_or(model::Lang::kEn);
  return Show(why, output, [words](const json& r) { return RenderWhy(r, words); });
}

Status CancelJob(ApiClient& api, std::uint64_t id, const Output& output) {
  auto job = api.Post(JobPath(id) + "/cancel", "", "application/json");
  if (!job) return std::unexpected(job.error());
  if (output.format == OutputFormat::kJson) {
    PrintJson(output, *job);
    return Ok();
  }
  // Cancelling a running job takes a grace period; berthd answers at once
  // with the state it has, which is terminal only if nothing was running.
  std::string state = Text(*job, "state");
  if (state == "Cancelled") {
    output.out << fmt::format("job {} cancelled\n", id);
  } else if (state == "Succeeded" || state == "Failed") {
    output.out << fmt::format("job {} already {}\n", id, state);
  } else {
    output.out << fmt::format("job {} cancelling\n", id);
  }
  return Ok();
}

Status ReportCheckpoint(ApiClient& api, std::uint64_t id, std::optional<std::int64_t> at_ms,
                        const Output& output) {
  auto done = api.Post(
      JobPath(id) + "/checkpoint" + QueryString({{"at_ms", at_ms ? std::to_string(*at_ms) : ""}}),
      "", "application/json");
  return Show(done, output, [&](const json& r) {
    const std::int64_t at = r.value("checkpoint_at_ms", std::int64_t{0});
    return fmt::format("job {}: checkpoint at {} recorded for {} run(s)\n", id, FormatTimeMs(at),
                       IntText(r, "runs"));
  });
}

Status CancelArray(ApiClient& api, std::uint64_t id, const Output& output) {
  auto done = api.Post(fmt::format("/v1/arrays/{}/cancel", id), "", "application/json");
  return Show(done, output, [&](const json& r) {
    return fmt::format("array {}: {} cancelled, {} stopping\n", id, IntText(r, "cancelled"),
                       IntText(r, "stopping"));
  });
}

Status StreamLogs(ApiClient& api, std::uint64_t id, std::optional<int> replica, bool follow,
                  std::ostream& out) {
  std::string path = JobPath(id) + "/logs" +
                     QueryString({{"replica", replica ? std::to_string(*replica) : ""},
                                  {"follow", follow ? "true" : "false"}});
  return api.Stream(
      path,
      [&](std::string_view chunk) {
        out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        out.flush();
        return out.good();
      },
      follow);
}

Status ListNodes(ApiClient& api, const Output& output) {
  auto nodes = api.Get("/v1/nodes");
  return Show(nodes, output, [&](const json& r) { return RenderNodes(r, output.clock.NowMs()); });
}

Status ListGpus(ApiClient& api, const Output& output) {
  auto gpus = api.Get("/v1/gpus");
  return Show(gpus, output, [&](const json& r) { return RenderGpus(r); });
}

Status ShowNode(ApiClient& api, const std::string& node, const Output& output) {
  auto n = api.Get("/v1/nodes/" + node);
  return Show(n, output, [&](const json& r) { return RenderNode(r, output.clock.NowMs()); });
}

Status RemoveNode(ApiClient& api, const std::string& node, const Output& output) {
  auto r = api.Delete("/v1/nodes/" + node);
  if (!r) return std::unexpected(r.error());
  if (output.format == OutputFormat::kJson) {
    PrintJson(output, *r);
  } else {
    output.out << fmt::format(
        "node {} removed; its certificates {} are revoked and its agent is disconnected. "
        "`berthd cert node {}` issues a new one to add it back\n",
        node, r->value("certificates_revoked", std::string("issued until now")), node);
  }
  return Ok();
}

Status CordonTarget(ApiClient& api, const std::string& action, const std::string& target,
                    const std::string& reason, const Output& output) {
  std::string node = target;
  std::string path;
  if (auto slash = target.find('/'); slash != std::string::npos) {
    node = target.substr(0, slash);
    const std::string gpu = target.substr(slash + 1);
    if (action == "drain") {
      return InvalidField("target",
                          fmt::format("drain applies to whole nodes; `berth cordon {}` holds one "
                                      "GPU, `berth drain {}` empties the node",
                                      target, node));
    }
    if (gpu.empty() ||
        !std::all_of(gpu.begin(), gpu.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return InvalidField(
          "target", fmt::format("'{}' is not NODE or NODE/GPU-INDEX (e.g. node-a/3)", target));
    }
    path = fmt::format("/v1/nodes/{}/gpus/{}/{}", node, gpu, action);
  } else {
    path = fmt::format("/v1/nodes/{}/{}", node, action);
  }
  if (node.empty()) return InvalidField("target", "name a node: NODE or NODE/GPU-INDEX");
  path += QueryString({{"reason", reason}});
  auto r = api.Post(path, "", "application/json");
  if (!r) return std::unexpected(r.error());
  if (output.format == OutputFormat::kJson) {
    PrintJson(output, *r);
  } else if (action == "uncordon") {
    output.out << (Bool(*r, "uncordoned")
                       ? fmt::format("{} uncordoned: new work may be placed there\n", target)
                       : fmt::format("{} was not cordoned; nothing changed\n", target));
  } else if (action == "drain") {
    output.out << fmt::format(
        "node {} draining: nothing new is placed there, and its jobs are stopped and queued "
        "again\n",
        target);
  } else {
    output.out << fmt::format("{} cordoned: nothing new is placed there; running jobs continue\n",
                              target);
  }
  return Ok();
}

Status ShowPolicy(ApiClient& api, std::optional<std::int64_t> version, bool yaml,
                  const Output& output) {
  auto policy = api.Get(version ? fmt::format("/v1/policy/versions/{}", *version) : "/v1/policy");
  if (!policy) return std::unexpected(policy.error());
  if (yaml) {
    std::string text = Text(*policy, "yaml");
    output.out << text;
    if (!text.ends_with('\n')) output.out << '\n';
  } else if (output.format == OutputFormat::kJson) {
    PrintJson(output, *policy);
  } else {
    output.out << RenderPolicy(*policy, output.clock.NowMs());
  }
  return Ok();
}

Status ListPolicyVersions(ApiClient& api, const Output& output) {
  auto versions = api.Get("/v1/policy/versions");
  return Show(versions, output,
              [&](const json& r) { return RenderPolicyVersions(r, output.clock.NowMs()); });
}

Status ApplyPolicy(ApiClient& api, const std::string& yaml, const std::string& comment,
                   std::int64_t base, const Output& output) {
  auto applied =
      api.Post("/v1/policy" + QueryString({{"comment", comment},
                                           {"base_version", base > 0 ? std::to_string(base) : ""}}),
               yaml, "application/yaml");
  return Show(applied, output, [&](const json& r) {
    return fmt::format("policy v{} applied; see what changed with: berth policy diff\n",
                       IntText(r, "version"));
  });
}

Status DiffPolicy(ApiClient& api, std::optional<std::int64_t> from, std::optional<std::int64_t> to,
                  const Output& output) {
  auto diff = api.Get("/v1/policy/diff" + QueryString({{"from", from ? std::to_string(*from) : ""},
                                                       {"to", to ? std::to_string(*to) : ""}}));
  return Show(diff, output, [&](const json& r) { return RenderPolicyDiff(r); });
}

Status PreviewPolicy(ApiClient& api, const std::string& yaml, const Output& output) {
  auto diff = api.Post("/v1/policy?dry_run=true", yaml, "application/yaml");
  return Show(diff, output, [&](const json& r) { return RenderPolicyDiff(r); });
}

Status RollbackPolicy(ApiClient& api, std::int64_t version, const std::string& comment,
                      const Output& output) {
  auto applied = api.Post(
      "/v1/policy/rollback" + QueryString({{"to", std::to_string(version)}, {"comment", comment}}),
      "", "application/json");
  return Show(applied, output, [&](const json& r) {
    return fmt::format("policy v{} applied: rollback to v{}\n", IntText(r, "version"), version);
  });
}

Status PreviewPolicyChange(ApiClient& api, const std::string& yaml, const std::string& window,
                           const std::string& prices, const std::string& file,
                           const Output& output) {
  auto preview =
      api.Post("/v1/policy/preview" + QueryString({{"window", window}, {"prices", prices}}), yaml,
               "application/yaml");
  return Show(preview, output, [&](const json& r) { return RenderPolicyPreview(r, file); });
}

Result<std::string> PricesQuery(const std::string& text) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return berth::Fail(Code::kInvalidArgument, fmt::format("prices: not YAML: {}", e.what()),
                       "prices");
  }
  if (!doc.IsMap()) {
    return berth::Fail(Code::kInvalidArgument,
                       "prices: expected a map of GPU model to price per GPU-hour, e.g. "
                       "'H100-80GB: 3.5' and 'default: 2'",
                       "prices");
  }
  std::string out;
  for (const auto& kv : doc) {
    std::string model = kv.first.as<std::string>("");
    double price = -1;
    try {
      price = kv.second.as<double>();
    } catch (const YAML::Exception&) {
      price = -1;
    }
    if (model.empty() || model.find_first_of(",:") != std::string::npos || price < 0) {
      return berth::Fail(Code::kInvalidArgument,
                         fmt::format("prices: '{}' needs a price per GPU-hour of at least 0",
                                     model.empty() ? "?" : model),
                         "prices");
    }
    if (!out.empty()) out += ',';
    out += fmt::format("{}:{}", model, price);
  }
  return out;
}

Status ExportHistory(ApiClient& api, const std::string& since, const std::string& until,
                     const std::string& file, const Output& output) {
  auto history = api.Get("/v1/history" + QueryString({{"since", since}, {"until", until}}));
  if (!history) return std::unexpected(history.error());
  if (file.empty() || file == "-") {
    PrintJson(output, *history);
    return Ok();
  }
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << history->dump(2) << '\n';
  out.close();
  if (!out) {
    return berth::Fail(Code::kInvalidArgument, fmt::format("cannot write '{}'", file));
  }
  output.out << fmt::format("wrote {} jobs submitted {} .. {} to {}\n",
                            Array(*history, "jobs").size(),
                            FormatTimeMs(Int(*history, "since_ms").value_or(0)),
                            FormatTimeMs(Int(*history, "until_ms").value_or(0)), file);
  return Ok();
}

void PrintVersion(const Output& output) {
  if (output.format == OutputFormat::kJson) {
    PrintJson(output, json{{"version", Version()}});
  } else {
    output.out << fmt::format("berth {}\n", Version());
  }
}

}  // namespace berth::cli
