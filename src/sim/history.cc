#include "sim/history.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "model/job_record.h"
#include "model/json.h"

namespace berth::sim {
namespace {

using nlohmann::json;

std::unexpected<Error> Bad(const std::string& where, const std::string& what) {
  return Fail(Code::kInvalidArgument, fmt::format("history: {}: {}", where, what), where);
}

// A required integer member.
Result<std::int64_t> Int(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) {
    return Bad(fmt::format("{}.{}", where, key), "missing or not an integer");
  }
  return it->get<std::int64_t>();
}

// An optional integer member: absent or null is nullopt.
Result<std::optional<std::int64_t>> OptInt(const json& obj, const char* key,
                                           const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::int64_t>{};
  if (!it->is_number_integer()) {
    return Bad(fmt::format("{}.{}", where, key), "not an integer");
  }
  return std::optional<std::int64_t>(it->get<std::int64_t>());
}

struct Attempt {
  std::optional<TimeMs> start;
  std::optional<TimeMs> end;
  bool running = false;  // a replica started and has not finished
  bool evicted = false;
};

Result<History> Read(const json& doc) {
  if (!doc.is_object()) return Bad("document", "not a JSON object");
  std::string format = doc.value("format", "");
  if (format != kHistoryFormat) {
    return Bad("format", fmt::format("'{}' is not {}; export it with berth history export", format,
                                     kHistoryFormat));
  }
  History h;
  auto since = Int(doc, "since_ms", "window");
  auto until = Int(doc, "until_ms", "window");
  auto exported = Int(doc, "exported_ms", "document");
  if (!since) return std::unexpected(since.error());
  if (!until) return std::unexpected(until.error());
  if (!exported) return std::unexpected(exported.error());
  h.since_ms = *since;
  h.until_ms = *until;
  h.exported_ms = *exported;
  if (auto p = doc.find("policy"); p != doc.end() && p->is_object()) {
    h.policy_version = p->value("version", std::int64_t{0});
    h.policy_yaml = p->value("yaml", "");
  }
  std::map<std::string, std::map<std::uint32_t, std::string>> models;  // node -> gpu -> model
  for (const auto& n : doc.value("nodes", json::array())) {
    sched::NodeView v = sched::NodeViewOf(model::NodeInfoFromJson(n), true);
    if (v.name.empty()) return Bad("nodes", "a node without a name");
    for (const auto& g : v.gpus) models[v.name][g.index] = g.model;
    h.nodes.push_back(std::move(v));
  }

  auto jobs = doc.find("jobs");
  if (jobs == doc.end() || !jobs->is_array()) return Bad("jobs", "missing or not an array");
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    const json& j = (*jobs)[i];
    const std::string where = fmt::format("jobs[{}]", i);
    if (!j.is_object()) return Bad(where, "not an object");
    auto id = Int(j, "id", where);
    auto submitted = Int(j, "submitted_ms", where);
    if (!id) return std::unexpected(id.error());
    if (!submitted) return std::unexpected(submitted.error());
    SimJob s;
    s.name = std::to_string(*id);
    s.tenant = j.value("tenant", "default");
    s.queue = j.value("queue", "default");
    s.submit_ms = *submitted;
    s.replicas = j.value("replicas", 1U);
    if (s.replicas == 0) return Bad(where + ".replicas", "must be at least 1");
    auto priority = model::ParsePriority(j.value("priority", "normal"));
    if (!priority) return Bad(where + ".priority", "not one of low, normal, high, critical");
    s.priority = *priority;
    if (auto p = j.find("preemptible"); p != j.end() && p->is_boolean()) {
      s.preemptible = p->get<bool>();
    }
    s.max_runtime_ms = j.value("max_runtime_ms", std::int64_t{0});
    if (auto r = j.find("resources"); r != j.end() && r->is_object()) {
      s.resources = model::ResourcesFromJson(*r);
    }

    std::map<std::int64_t, Attempt> attempts;
    std::string last_model;
    TimeMs last_start = -1;
    auto runs = j.find("runs");
    if (runs != j.end() && !runs->is_array()) return Bad(where + ".runs", "not an array");
    const json empty = json::array();
    const json& run_list = runs == j.end() ? empty : *runs;
    for (std::size_t k = 0; k < run_list.size(); ++k) {
      const json& r = run_list[k];
      const std::string rwhere = fmt::format("{}.runs[{}]", where, k);
      if (!r.is_object()) return Bad(rwhere, "not an object");
      auto attempt = Int(r, "attempt", rwhere);
      auto start = OptInt(r, "started_ms", rwhere);
      auto end = OptInt(r, "finished_ms", rwhere);
      if (!attempt) return std::unexpected(attempt.error());
      if (!start) return std::unexpected(start.error());
      if (!end) return std::unexpected(end.error());
      if (!*start) continue;  // never started: no work
      if (*end && **end < **start) return Bad(rwhere, "finished_ms is before started_ms");
      Attempt& a = attempts[*attempt];
      a.start = a.start ? std::min(*a.start, **start) : **start;
      if (*end) {
        a.end = a.end ? std::max(*a.end, **end) : **end;
      } else {
        a.running = true;
      }
      const auto why = model::ParseStopCause(r.value("stopped_for", ""));
      if (why == model::StopCause::kPreempted || why == model::StopCause::kReclaimed) {
        a.evicted = true;
      }
      if (**start >= last_start) {
        last_start = **start;
        auto gpus = r.value("gpus", std::vector<std::uint32_t>{});
        std::string node = r.value("node", "");
        last_model.clear();
        if (!gpus.empty()) {
          if (auto m = models.find(node); m != models.end()) {
            if (auto g = m->second.find(gpus.front()); g != m->second.end()) last_model = g->second;
          }
        }
      }
    }
    if (attempts.empty()) {
      ++h.never_ran;
      continue;
    }
    bool running = false;
    for (const auto& [n, a] : attempts) {
      TimeMs end = a.end.value_or(*a.start);
      if (a.running) {
        end = std::max(end, h.exported_ms);
        running = true;
      }
      if (!a.evicted) s.duration_ms += std::max<TimeMs>(0, end - *a.start);
    }
    if (running) ++h.still_running;
    s.id = static_cast<std::int64_t>(h.jobs.size()) + 1;
    h.gpu_model[s.id] = last_model;
    h.jobs.push_back(std::move(s));
  }
  // Submit order (the export's order already, but a hand-made file may not be).
  std::stable_sort(h.jobs.begin(), h.jobs.end(),
                   [](const SimJob& a, const SimJob& b) { return a.submit_ms < b.submit_ms; });
  std::map<std::int64_t, std::string> models_by_new_id;
  for (std::size_t i = 0; i < h.jobs.size(); ++i) {
    models_by_new_id[static_cast<std::int64_t>(i) + 1] = h.gpu_model[h.jobs[i].id];
    h.jobs[i].id = static_cast<std::int64_t>(i) + 1;
  }
  h.gpu_model = std::move(models_by_new_id);
  return h;
}

}  // namespace

Result<History> ReadHistory(const json& doc) {
  // nlohmann::json throws on a member of the wrong type (say a string where
  // a number belongs); no exception leaves this module.
  try {
    return Read(doc);
  } catch (const json::exception& e) {
    return Fail(Code::kInvalidArgument, fmt::format("history: malformed document: {}", e.what()));
  }
}

Result<History> ReadHistoryFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Fail(Code::kNotFound, fmt::format("cannot read {}", path.string()));
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return Fail(Code::kInvalidArgument, fmt::format("{}: not a JSON document", path.string()));
  }
  auto h = ReadHistory(doc);
  if (!h) {
    return Fail(h.error().code, fmt::format("{}: {}", path.string(), h.error().message),
                h.error().field);
  }
  return h;
}

}  // namespace berth::sim
