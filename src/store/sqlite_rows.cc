// Row readers of the SQLite store (sqlite_rows.h).
#include "store/sqlite_rows.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "model/json.h"

namespace berth::store {
namespace {

using nlohmann::json;

model::RunState RunStateFrom(std::string_view s) {
  if (s == "Running") return model::RunState::kRunning;
  if (s == "Exited") return model::RunState::kExited;
  return model::RunState::kStarting;
}

std::optional<std::int32_t> OptInt32(std::optional<std::int64_t> v) {
  if (!v) return std::nullopt;
  return static_cast<std::int32_t>(*v);
}

}  // namespace

std::string ReasonText(const model::Reason& r) {
  auto j = model::ToJson(r);
  j.erase("message");  // rendered at read time, in the reader's language
  return j.dump();
}

RunRecord ReadRun(const Statement& st) {
  RunRecord r;
  r.run_id = st.Text(0);
  r.job_id = st.Int(1);
  r.replica = static_cast<std::uint32_t>(st.Int(2));
  r.attempt = static_cast<std::uint32_t>(st.Int(3));
  r.node = st.Text(4);
  r.gpu_indices = json::parse(st.Text(5)).get<std::vector<std::uint32_t>>();
  r.gpu_uuids = json::parse(st.Text(6)).get<std::vector<std::string>>();
  r.state = RunStateFrom(st.Text(7));
  r.pid = st.Int(8);
  r.started_at_ms = st.OptInt(9);
  r.finished_at_ms = st.OptInt(10);
  r.exit_code = OptInt32(st.OptInt(11));
  r.signal = OptInt32(st.OptInt(12));
  // A name a newer Berth wrote: stopped, for a cause this version cannot tell.
  r.stopped_for = model::ParseStopCause(st.Text(13)).value_or(model::StopCause::kUnknown);
  r.start_error = st.Text(14);
  r.stop_requested = st.Int(15) != 0;
  r.gpu_share_millis = static_cast<std::uint32_t>(st.Int(16));
  r.gpu_share_bytes = static_cast<std::uint64_t>(st.Int(17));
  r.last_checkpoint_ms = st.OptInt(18);
  if (auto c = st.OptInt(19)) r.clean_stop = *c != 0;
  r.failure_class = st.Text(20);
  r.stop_detail = st.Text(21);
  r.port = static_cast<std::uint32_t>(st.Int(22));
  if (auto ready = st.OptInt(23)) r.ready = *ready != 0;
  r.probe_detail = st.Text(24);
  r.ready_changed_ms = st.OptInt(25);
  return r;
}

namespace {

// Parsed specs kept at most; past it the cache starts again empty.
constexpr std::size_t kSpecCacheEntries = 50'000;

}  // namespace

JobRecord ReadJob(const Statement& st, std::unordered_map<std::int64_t, model::JobSpec>* specs) {
  JobRecord j;
  j.id = st.Int(0);
  const model::JobSpec* cached = nullptr;
  if (specs != nullptr) {
    if (auto it = specs->find(j.id); it != specs->end()) cached = &it->second;
  }
  if (cached != nullptr) {
    j.spec = *cached;
  } else {
    j.spec = model::JobSpecFromJson(json::parse(st.Text(1)));
    if (specs != nullptr) {
      if (specs->size() >= kSpecCacheEntries) specs->clear();
      specs->emplace(j.id, j.spec);
    }
  }
  j.state = model::ParseJobState(st.Text(2)).value_or(model::JobState::kPending);
  j.reason = model::ReasonFromJson(json::parse(st.Text(3)));
  j.submitted_at_ms = st.Int(4);
  j.started_at_ms = st.OptInt(5);
  j.finished_at_ms = st.OptInt(6);
  j.exit_code = OptInt32(st.OptInt(7));
  j.signal = OptInt32(st.OptInt(8));
  j.cancel_requested = st.Int(9) != 0;
  j.policy_version = st.OptInt(10);
  j.failures = static_cast<std::uint32_t>(st.Int(11));
  j.retry_after_ms = st.OptInt(12);
  j.submitted_by = st.Text(13);
  j.cancelled_by = st.Text(14);
  j.attempts = static_cast<std::uint32_t>(st.Int(15));
  return j;
}

Status LoadRunsOf(Database& db, std::vector<JobRecord>& jobs) {
  constexpr std::size_t kChunk = 1000;
  std::unordered_map<std::int64_t, JobRecord*> by_id;
  by_id.reserve(jobs.size());
  for (auto& j : jobs) by_id[j.id] = &j;
  auto st =
      db.Prepare(fmt::format("SELECT {} FROM runs WHERE job_id IN ({}) "
                             "ORDER BY job_id, attempt, replica",
                             kRunColumns, SqlJsonInts(db.dialect(), "?")));
  if (!st) return std::unexpected(st.error());
  for (std::size_t at = 0; at < jobs.size(); at += kChunk) {
    json ids = json::array();
    for (std::size_t i = at; i < jobs.size() && i < at + kChunk; ++i) ids.push_back(jobs[i].id);
    st->Bind(1, ids.dump());
    for (;;) {
      auto row = st->Step();
      if (!row) return std::unexpected(row.error());
      if (!*row) break;
      RunRecord run = ReadRun(*st);
      if (auto it = by_id.find(run.job_id); it != by_id.end()) {
        it->second->runs.push_back(std::move(run));
      }
    }
    st->Reset();
  }
  return Ok();
}

}  // namespace berth::store
