// GET /v1/jobs/{id}/outputs and /outputs/content: a job's outputs, listed
// and downloaded by its tenant (docs/jobs.md#outputs). The files stay on
// the node of the run that wrote them; berthd asks that node's agent for
// each listing and each slice of a file, so nothing is copied to berthd and
// a node that is down answers Unavailable. Who may ask is the route's rule
// (the job's tenant; another tenant's member gets the job's 404); what the
// agent reads is only the run identity's own (agent/outputs.h).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "api/api_util.h"
#include "api/request_decode.h"
#include "model/outputs.h"

namespace berth::server {
namespace {

using nlohmann::json;

struct OutputTarget {
  store::JobRecord job;
  store::RunRecord run;
  std::string path;
};

// A run number from the query (the gate already checked its range).
Result<std::uint32_t> UintParam(const http::Request& req, const std::string& name) {
  auto v =
      ParseIntParam(req.get_param_value(name), name, 0, std::numeric_limits<std::uint32_t>::max());
  if (!v) return std::unexpected(v.error());
  return static_cast<std::uint32_t>(*v);
}

// The run whose outputs are meant: replica 0 unless `replica` says, the
// given `attempt`, else the latest attempt that started (the one whose
// files a user wants after retries), else the latest.
Result<OutputTarget> ResolveTarget(store::Store& store, const http::Request& req) {
  auto id = PathId(req);
  if (!id) return std::unexpected(id.error());
  auto job = store.GetJob(*id);
  if (!job) return std::unexpected(job.error());
  std::uint32_t replica = 0;
  if (req.has_param("replica")) {
    auto r = UintParam(req, "replica");
    if (!r) return std::unexpected(r.error());
    replica = *r;
  }
  std::optional<std::uint32_t> attempt;
  if (req.has_param("attempt")) {
    auto a = UintParam(req, "attempt");
    if (!a) return std::unexpected(a.error());
    attempt = *a;
  }
  const store::RunRecord* best = nullptr;
  for (const auto& r : job->runs) {
    if (r.replica != replica || (attempt && r.attempt != *attempt)) continue;
    auto rank = [](const store::RunRecord& x) {
      return std::pair{x.started_at_ms.has_value(), x.attempt};
    };
    if (best == nullptr || rank(r) > rank(*best)) best = &r;
  }
  if (best == nullptr) {
    if (attempt) {
      return Fail(Code::kNotFound,
                  fmt::format("job {} has no attempt {} of replica {}; `berth job {}` lists its "
                              "runs",
                              *id, *attempt, replica, *id),
                  "attempt");
    }
    return Fail(Code::kNotFound,
                fmt::format("job {} has no run of replica {} yet: its outputs appear once it "
                            "starts (it is {})",
                            *id, replica, model::JobStateName(job->state)),
                "replica");
  }
  OutputTarget t{*job, *best, req.has_param("path") ? req.get_param_value("path") : ""};
  if (auto parts = model::SplitOutputPath(t.path); !parts) return std::unexpected(parts.error());
  return t;
}

// The agent's answer as an error when it is one, worded for the caller.
Status ReplyStatus(const berth::v1::OutputReply& reply, const OutputTarget& t) {
  if (reply.error().empty()) return Ok();
  Code code = Code::kInternal;
  if (reply.code() > static_cast<int>(Code::kOk) &&
      reply.code() <= static_cast<int>(Code::kPermissionDenied)) {
    code = static_cast<Code>(reply.code());
  }
  return Fail(code,
              fmt::format("outputs of job {} (replica {}, attempt {}, on node {}): {}", t.job.id,
                          t.run.replica, t.run.attempt, t.run.node, reply.error()),
              code == Code::kInvalidArgument || code == Code::kNotFound ? "path" : "");
}

json TargetJson(const OutputTarget& t) {
  return json{{"job", t.job.id},     {"replica", t.run.replica}, {"attempt", t.run.attempt},
              {"run", t.run.run_id}, {"node", t.run.node},       {"path", t.path}};
}

}  // namespace

void Api::ListOutputs(const http::Request& req, http::Response& res) {
  auto t = ResolveTarget(store_, req);
  if (!t) return ReplyError(res, t.error());
  berth::v1::OutputRequest ask;
  ask.set_run_id(t->run.run_id);
  ask.set_path(t->path);
  auto reply = controller_.AskOutputs(t->run.node, ask);
  if (!reply) return ReplyError(res, reply.error());
  if (auto st = ReplyStatus(*reply, *t); !st) return ReplyError(res, st.error());
  json out = TargetJson(*t);
  out["modified_ms"] = reply->modified_ms();
  if (reply->is_dir()) {
    out["type"] = "dir";
    json entries = json::array();
    for (const auto& e : reply->entries()) {
      entries.push_back(json{{"name", e.name()},
                             {"type", e.type()},
                             {"size", e.size()},
                             {"modified_ms", e.modified_ms()}});
    }
    out["entries"] = std::move(entries);
    out["truncated"] = reply->truncated();
  } else {
    out["type"] = "file";
    out["size"] = reply->size();
  }
  Reply(res, 200, out);
}

void Api::DownloadOutput(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = fmt::format("job/{}", std::string(req.matches[1]));
  auto t = ResolveTarget(store_, req);
  if (!t) return ReplyError(res, t.error());
  note.tenant = t->job.spec.tenant;
  if (auto parts = model::SplitOutputPath(t->path); parts && parts->empty()) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 "name a file below the job's output directory (`berth cp "
                                 "JOB:PATH`); list the directory with GET /v1/jobs/{id}/outputs "
                                 "or `berth outputs JOB`",
                                 "path"});
  }
  berth::v1::OutputRequest ask;
  ask.set_run_id(t->run.run_id);
  ask.set_path(t->path);
  ask.set_length(model::kMaxOutputChunk);
  auto first = controller_.AskOutputs(t->run.node, ask);
  if (!first) return ReplyError(res, first.error());
  if (auto st = ReplyStatus(*first, *t); !st) return ReplyError(res, st.error());
  if (first->is_dir()) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 fmt::format("{} is a directory; list it with `berth outputs {} "
                                             "{}` or copy it whole with `berth cp -r`",
                                             t->path, t->job.id, t->path),
                                 "path"});
  }
  note.after = json{{"path", t->path}, {"run", t->run.run_id}, {"size", first->size()}};
  res.set_header("X-Berth-Run", t->run.run_id);
  res.set_header("X-Berth-Node", t->run.node);
  res.set_header("X-Berth-Modified-Ms", std::to_string(first->modified_ms()));
  const std::uint64_t size = first->size();
  if (first->data().size() >= size) {
    res.status = 200;
    res.set_content(first->data().substr(0, size), "application/octet-stream");
    return;
  }
  // The rest slice by slice as the client reads it: nothing of the file is
  // held in berthd beyond one slice. A file that shrinks or a node that goes
  // away mid-way ends the body short of its Content-Length, which clients
  // (berth cp, curl) report as a failed download.
  auto held = std::make_shared<std::string>(std::move(*first->mutable_data()));
  auto offset = std::make_shared<std::uint64_t>(0);
  res.set_stream(
      "application/octet-stream",
      [this, held, offset, size, target = *t](std::string& out) -> http::Step {
        if (!held->empty()) {
          out = std::move(*held);
          held->clear();
          *offset = out.size();
          return *offset >= size ? http::Step::kDone : http::Step::kMore;
        }
        berth::v1::OutputRequest next;
        next.set_run_id(target.run.run_id);
        next.set_path(target.path);
        next.set_offset(*offset);
        next.set_length(model::kMaxOutputChunk);
        auto reply = controller_.AskOutputs(target.run.node, next);
        if (!reply || !reply->error().empty() || reply->data().empty()) return http::Step::kAbort;
        const std::size_t n = std::min<std::uint64_t>(reply->data().size(), size - *offset);
        out.assign(reply->data().data(), n);
        *offset += n;
        return *offset >= size ? http::Step::kDone : http::Step::kMore;
      },
      size);
}

}  // namespace berth::server
