// `berth svc ...`: inference services (docs/cli.md, "Services"). A service
// is stored and versioned by berthd, and run as replica jobs it owns; the
// status shows them as stored and the service controller's phase.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/table.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

// The tenant a command means: TENANT/NAME's, --tenant, else the caller's
// only tenant (GET /v1/whoami).
Result<std::pair<std::string, std::string>> Resolve(ApiClient& api, const ServiceRef& ref) {
  std::string tenant = ref.tenant;
  std::string name = ref.name;
  if (auto slash = name.find('/'); slash != std::string::npos) {
    tenant = name.substr(0, slash);
    name = name.substr(slash + 1);
  }
  if (tenant.empty()) {
    auto me = api.Get("/v1/whoami");
    if (!me) return std::unexpected(me.error());
    const json* tenants = Field(*me, "tenants");
    if (tenants == nullptr || !tenants->is_object() || tenants->size() != 1) {
      std::vector<std::string> names;
      if (tenants != nullptr && tenants->is_object()) {
        for (const auto& item : tenants->items()) names.push_back(item.key());
      }
      return Fail(
          Code::kInvalidArgument,
          fmt::format("say which tenant's service: --tenant TENANT or TENANT/{} (you are "
                      "a member of {})",
                      name,
                      names.empty() ? "no tenant" : fmt::format("{}", fmt::join(names, ", "))),
          "tenant");
    }
    tenant = tenants->begin().key();
  }
  return std::pair{tenant, name};
}

std::string Path(const std::pair<std::string, std::string>& ref, std::string_view action = {}) {
  return action.empty() ? fmt::format("/v1/services/{}/{}", ref.first, ref.second)
                        : fmt::format("/v1/services/{}/{}/{}", ref.first, ref.second, action);
}

std::string Bounds(const json& s, std::string_view key) {
  return fmt::format("{}..{}", IntText(s, fmt::format("{}.min", key)),
                     IntText(s, fmt::format("{}.max", key)));
}

std::string StatusLine(const json& s) {
  std::string line = fmt::format(
      "desired {}, ready {}, not ready {}, starting {}, stopping {} ({})",
      IntText(s, "status.desired"), IntText(s, "status.ready"), IntText(s, "status.not_ready"),
      IntText(s, "status.starting"), IntText(s, "status.stopping"), Text(s, "status.phase"));
  if (auto until = Int(s, "status.backoff_until_ms")) {
    line += fmt::format("; {} crashes lately, next replica after {}",
                        IntText(s, "status.recent_crashes"), FormatTimeMs(*until));
  }
  const std::string refused = Text(s, "status.refused");
  if (!refused.empty() && refused != "-") line += "; replica refused: " + refused;
  const std::string waiting = Text(s, "status.waiting");
  if (!waiting.empty() && waiting != "-") line += "; waiting: " + waiting;
  return line;
}

// A duration the gateway measured, rounded for reading: "850ms", "1.2s",
// "3m12s".
std::string ServiceDuration(double ms) {
  if (ms < 1000) return fmt::format("{:.0f}ms", ms);
  if (ms < 60'000) return fmt::format("{:.1f}s", ms / 1000);
  return FormatAge(static_cast<std::int64_t>(ms));
}

// A number of the status, or nullopt when absent, null or not a number
// (the gateway's percentiles are estimates, not integers).
std::optional<double> ServiceNumber(const json& s, std::string_view path) {
  const json* v = Field(s, path);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

// The last window's p50/p95/p99 ("p50 12ms, p95 40ms, p99 81ms"), or ""
// when the window had no request (or the status has none).
std::string ServiceWindowLatency(const json& s) {
  if (Int(s, "status.traffic.window.requests").value_or(0) <= 0) return "";
  auto p50 = ServiceNumber(s, "status.traffic.window.p50_ms");
  auto p95 = ServiceNumber(s, "status.traffic.window.p95_ms");
  auto p99 = ServiceNumber(s, "status.traffic.window.p99_ms");
  if (!p50 || !p95 || !p99) return "";
  return fmt::format("p50 {}, p95 {}, p99 {}", ServiceDuration(*p50), ServiceDuration(*p95),
                     ServiceDuration(*p99));
}

// What the gateway sees now and has counted: "3 in flight, 1 queued, 0
// held; 1520 requests, 4 5xx; last window 120 requests: p50 12ms, ...".
std::string ServiceTrafficLine(const json& s) {
  std::string line =
      fmt::format("{} in flight, {} queued, {} held; {} requests, {} 5xx",
                  IntText(s, "status.traffic.in_flight"), IntText(s, "status.traffic.queued"),
                  IntText(s, "status.traffic.held"), IntText(s, "status.traffic.requests_total"),
                  IntText(s, "status.traffic.responses_5xx"));
  if (auto requests = Int(s, "status.traffic.window.requests")) {
    const std::string latency = ServiceWindowLatency(s);
    line += latency.empty() ? "; no request in the last window"
                            : fmt::format("; last window {} requests: {}", *requests, latency);
  }
  return line;
}

// Replicas in the gateway's route and leaving it, then the scale from zero
// under way or the last one measured.
std::string ServiceRoutingLine(const json& s) {
  std::string line = fmt::format("{} replicas routed, {} draining", IntText(s, "status.routed"),
                                 IntText(s, "status.draining"));
  if (auto since = Int(s, "status.cold_start_since_ms")) {
    line += fmt::format("; cold start under way since {}", FormatTimeMs(*since));
  } else if (auto ms = Int(s, "status.last_cold_start.duration_ms")) {
    auto at = Int(s, "status.last_cold_start.at_ms");
    line += fmt::format("; cold start {} at {}, replica job {}",
                        ServiceDuration(static_cast<double>(*ms)), at ? FormatTimeMs(*at) : "-",
                        IntText(s, "status.last_cold_start.job"));
  }
  return line;
}

}  // namespace

Status ApplyService(ApiClient& api, const std::string& spec, const Output& output) {
  auto applied = api.Post("/v1/services", spec, "application/yaml");
  return Show(applied, output, [](const json& s) {
    return fmt::format("service {}/{} {} (revision {})\nstatus: {}\n", Text(s, "tenant"),
                       Text(s, "name"), Text(s, "applied"), IntText(s, "revision"), StatusLine(s));
  });
}

std::string RenderServices(const json& response) {
  Table table({"NAME", "TENANT", "QUEUE", "REV", "REPLICAS", "DESIRED", "READY", "P95", "UPDATED"});
  for (const auto& s : Array(response, "services")) {
    auto updated = Int(s, "updated_ms");
    // The gateway's last window, when it had requests.
    auto p95 = ServiceNumber(s, "status.traffic.window.p95_ms");
    const bool answered = Int(s, "status.traffic.window.requests").value_or(0) > 0;
    table.AddRow({Text(s, "name"), Text(s, "tenant"), Text(s, "queue"), IntText(s, "revision"),
                  Bounds(s, "spec.replicas"), IntText(s, "status.desired"),
                  IntText(s, "status.ready"), p95 && answered ? ServiceDuration(*p95) : "-",
                  updated ? FormatTimeMs(*updated) : "-"});
  }
  if (table.empty()) return "No services.\n";
  return table.Render();
}

Status ListServices(ApiClient& api, const std::string& tenant, const Output& output) {
  auto list =
      GetAllPages(api, "/v1/services", {{"tenant", tenant}}, "services", 0, PageOrder::kAppend);
  if (!list) return std::unexpected(list.error());
  return Show(json{{"services", std::move(*list)}}, output, RenderServices);
}

namespace {

// When a session ends if nothing else happens: its lifetime's end or its
// idle window's, whichever comes first, and which.
std::string SessionEnds(const json& s) {
  auto expires = Int(s, "status.session.expires_ms");
  auto idle = Int(s, "status.session.idle_ends_ms");
  if (idle && (!expires || *idle < *expires)) return FormatTimeMs(*idle) + " (idle)";
  return expires ? FormatTimeMs(*expires) + " (lifetime)" : "-";
}

}  // namespace

std::string RenderService(const json& s) {
  std::string out;
  auto line = [&](std::string_view k, const std::string& v) {
    out += fmt::format("{:<11}{}\n", std::string(k) + ":", v);
  };
  line("Service", fmt::format("{}/{}", Text(s, "tenant"), Text(s, "name")));
  line("Queue", Text(s, "queue"));
  line("Revision", IntText(s, "revision"));
  std::string image = Text(s, "spec.image");
  if (!image.empty() && image != "-") line("Image", image);
  std::string model = Text(s, "spec.model.name");
  if (!model.empty() && model != "-") {
    line("Model", fmt::format("{} {}", model, Text(s, "spec.model.version")));
  }
  line("Replicas", Bounds(s, "spec.replicas"));
  line("Status", StatusLine(s));
  // The gateway's view: null endpoint means this berthd runs none.
  const json* endpoint = Field(s, "status.endpoint");
  line("Endpoint",
       endpoint != nullptr && endpoint->is_string() ? endpoint->get<std::string>() : "no gateway");
  // Who may call it there (docs/services.md, "Who may call a service").
  if (const std::string access = Text(s, "spec.access"); access != "-") {
    line("Access", access == "public"
                       ? "public: anyone who reaches the gateway"
                       : fmt::format("members of {}, with a Berth token", Text(s, "tenant")));
  }
  if (const std::string hold = Text(s, "spec.gateway.hold_timeout"); hold != "-") {
    line("Hold", hold == "0s" || hold == "0" ? "none: 503 at once without a ready replica"
                                             : fmt::format("up to {} for a ready replica", hold));
  }
  if (Text(s, "spec.kind") == "session") {
    std::string session = "ends " + SessionEnds(s);
    if (auto idle = Int(s, "status.session.idle_since_ms")) {
      session += fmt::format("; last active {}", FormatTimeMs(*idle));
    }
    line("Session", session);
  }
  const std::string autoscale = Text(s, "status.autoscale.reason");
  if (autoscale != "-") {
    line("Autoscale",
         fmt::format("desired {}; {}", IntText(s, "status.autoscale.desired"), autoscale));
  }
  if (Field(s, "status.traffic") != nullptr) line("Traffic", ServiceTrafficLine(s));
  if (endpoint != nullptr && Field(s, "status.routed") != nullptr) {
    line("Routing", ServiceRoutingLine(s));
  }
  auto created = Int(s, "created_ms");
  auto updated = Int(s, "updated_ms");
  line("Created",
       fmt::format("{} by {}", created ? FormatTimeMs(*created) : "-", Text(s, "created_by")));
  line("Updated",
       fmt::format("{} by {}", updated ? FormatTimeMs(*updated) : "-", Text(s, "updated_by")));
  Table revs({"REV", "CHANGE", "RESTORES", "REPLICAS", "IMAGE", "WHEN", "BY"});
  for (const auto& r : Array(s, "revisions")) {
    auto when = Int(r, "created_ms");
    revs.AddRow({IntText(r, "revision"), Text(r, "change"), IntText(r, "restores"),
                 Bounds(r, "replicas"), Text(r, "image"), when ? FormatTimeMs(*when) : "-",
                 Text(r, "created_by")});
  }
  Table replicas({"JOB", "REV", "STATE", "NODE"});
  for (const auto& r : Array(s, "status.replicas")) {
    const bool stopping = Text(r, "stopping") == "true";
    replicas.AddRow({IntText(r, "job"), IntText(r, "revision"),
                     stopping ? Text(r, "state") + " (stopping)" : Text(r, "state"),
                     Text(r, "node")});
  }
  if (!replicas.empty()) out += "\nReplicas (jobs of the service):\n" + replicas.Render();
  if (!revs.empty()) out += "\nRevisions (newest first):\n" + revs.Render();
  return out;
}

Status ShowService(ApiClient& api, const ServiceRef& ref, const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  return Show(api.Get(Path(*resolved)), output, RenderService);
}

std::string RenderServiceWhy(const json& s) {
  const std::string name = fmt::format("{}/{}", Text(s, "tenant"), Text(s, "name"));
  const auto desired = Int(s, "status.desired").value_or(0);
  const auto ready = Int(s, "status.ready").value_or(0);
  std::string out = fmt::format("service {}: {} of {} replicas ready ({})\n", name, ready, desired,
                                Text(s, "status.phase"));
  // Why it wants as many as it does: the autoscaler's reason, with the
  // gateway's numbers behind it.
  const std::string autoscale = Text(s, "status.autoscale.reason");
  if (!autoscale.empty() && autoscale != "-") {
    out += fmt::format("- the autoscaler wants {}: {}\n", IntText(s, "status.autoscale.desired"),
                       autoscale);
  }
  if (auto held = Int(s, "status.traffic.held"); held && *held > 0) {
    const auto since = Int(s, "status.cold_start_since_ms");
    out += fmt::format(
        "- {} request(s) held at the gateway until a replica is ready{}\n", *held,
        since ? fmt::format(" (scaling from zero since {})", FormatTimeMs(*since)) : std::string());
  }
  if (auto until = Int(s, "status.backoff_until_ms")) {
    out += fmt::format(
        "- replicas crashed {} times in the last 10 minutes: the next starts after {} (their "
        "jobs' logs say why: berth logs JOB)\n",
        IntText(s, "status.recent_crashes"), FormatTimeMs(*until));
  }
  const std::string refused = Text(s, "status.refused");
  if (!refused.empty() && refused != "-") {
    out += fmt::format("- a new replica was refused as a job would be: {}\n", refused);
  }
  const std::string held = Text(s, "status.waiting");
  if (!held.empty() && held != "-") out += fmt::format("- waiting: {}\n", held);
  int waiting = 0;
  for (const auto& r : Array(s, "status.replicas")) {
    if (Text(r, "stopping") == "true") {
      out += fmt::format("- replica job {} (revision {}) is stopping\n", IntText(r, "job"),
                         IntText(r, "revision"));
      continue;
    }
    if (Text(r, "state") == "Running") {
      if (Text(r, "ready") == "false") {
        ++waiting;
        const std::string probe = Text(r, "probe");
        out += fmt::format("- replica job {} (revision {}) runs on {} but is not ready{}\n",
                           IntText(r, "job"), IntText(r, "revision"), Text(r, "node"),
                           probe.empty() || probe == "-" ? "" : ": " + probe);
      }
      continue;
    }
    ++waiting;
    out += fmt::format("- replica job {} (revision {}) is {}: {}\n", IntText(r, "job"),
                       IntText(r, "revision"), Text(r, "state"), Text(r, "reason.message"));
  }
  if (ready >= desired && waiting == 0) out += "- nothing is missing\n";
  return out;
}

std::string RenderRolloutStatus(const json& s) {
  const std::string name = fmt::format("{}/{}", Text(s, "tenant"), Text(s, "name"));
  const std::string phase = Text(s, "status.phase");
  const auto revision = Int(s, "revision").value_or(0);
  std::string out = fmt::format("service {}: revision {}", name, revision);
  const json& revisions = Array(s, "revisions");
  if (!revisions.empty()) {
    const json& newest = revisions.front();
    out += fmt::format(" ({} by {} at {}", Text(newest, "change"), Text(newest, "created_by"),
                       FormatTimeMs(Int(newest, "created_ms").value_or(0)));
    if (auto restores = Int(newest, "restores")) out += fmt::format(", restoring {}", *restores);
    out += ")";
  }
  out += "\n";
  // The current revision's replicas against the desired count, and what
  // older revisions still serve.
  std::int64_t current_ready = 0;
  std::int64_t current_starting = 0;
  std::map<std::int64_t, std::int64_t> old_serving;  // revision -> ready, not stopping
  std::int64_t old_stopping = 0;
  for (const auto& r : Array(s, "status.replicas")) {
    const bool stopping = Text(r, "stopping") == "true";
    const bool ready = Text(r, "ready") == "true";
    if (Text(r, "current") == "true") {
      if (stopping) continue;
      if (ready) {
        ++current_ready;
      } else {
        ++current_starting;
      }
    } else if (stopping) {
      ++old_stopping;
    } else if (ready) {
      ++old_serving[Int(r, "revision").value_or(0)];
    }
  }
  const auto desired = Int(s, "status.desired").value_or(0);
  out += fmt::format("- revision {}: {} of {} replicas ready", revision, current_ready, desired);
  if (current_starting > 0) out += fmt::format(", {} starting", current_starting);
  out += "\n";
  for (const auto& [rev, n] : old_serving) {
    out += fmt::format("- revision {}: {} replica{} still serving\n", rev, n, n == 1 ? "" : "s");
  }
  if (old_stopping > 0) {
    out += fmt::format("- {} replica{} of older revisions stopping (drained first)\n", old_stopping,
                       old_stopping == 1 ? "" : "s");
  }
  const json& steps = Array(s, "spec.rollout.canary");
  if (!steps.empty()) {
    std::vector<std::string> parts;
    for (const json& step : steps) {
      const auto pause = Int(step, "pause").value_or(0);
      parts.push_back(fmt::format("{}% {}", IntText(step, "weight"),
                                  pause > 0 ? "for " + FormatDurationMs(pause) : "until resumed"));
    }
    out += fmt::format("- canary steps: {}; then", fmt::join(parts, ", "));
  } else {
    out += "-";
  }
  out +=
      fmt::format(" one step at a time: at most {} above and {} below the desired count\n",
                  IntText(s, "spec.rollout.max_surge"), IntText(s, "spec.rollout.max_unavailable"));
  const std::string waiting = Text(s, "status.waiting");
  if (!waiting.empty() && waiting != "-") out += fmt::format("- waiting: {}\n", waiting);
  if (phase == "rollout_paused") {
    out += fmt::format(
        "paused: revision {} never became ready; the older revision keeps serving. Apply a "
        "fixed spec, or roll back: berth svc rollback {}\n",
        revision, name);
  } else if (phase == "canary") {
    const auto step = IntText(s, "status.canary.step");
    out +=
        Text(s, "status.canary.awaiting_resume") == "true"
            ? fmt::format("canary step {} waits: berth svc rollout resume {} goes on\n", step, name)
            : fmt::format("canary step {} under way\n", step);
  } else if (phase == "rolling_out") {
    out += "rolling out\n";
  } else if (old_serving.empty() && old_stopping == 0 && current_ready >= desired) {
    out += fmt::format("complete: every replica runs revision {}\n", revision);
  } else {
    out += fmt::format("not complete ({})\n", phase);
  }
  return out;
}

// A canary step that waits to be resumed: nothing happens until someone does.
bool AwaitsResume(const json& s) {
  return Text(s, "status.phase") == "canary" && Text(s, "status.canary.awaiting_resume") == "true";
}

bool RolloutSettled(const json& s) {
  const std::string phase = Text(s, "status.phase");
  if (phase == "rollout_paused" || AwaitsResume(s)) return true;
  const std::string out = RenderRolloutStatus(s);
  return out.find("\ncomplete: ") != std::string::npos;
}

Status RolloutStatus(ApiClient& api, const ServiceRef& ref, std::int64_t wait_ms,
                     const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  const TimeMs deadline = output.clock.NowMs() + wait_ms;
  Result<json> service = api.Get(Path(*resolved));
  // --wait: ask once a second until it completes, pauses or the time is up.
  while (service && wait_ms > 0 && !RolloutSettled(*service) && output.clock.NowMs() < deadline) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    service = api.Get(Path(*resolved));
  }
  BERTH_RETURN_IF_ERROR(Show(service, output, RenderRolloutStatus));
  if (wait_ms == 0) return Ok();
  const std::string what = fmt::format("{}/{}", resolved->first, resolved->second);
  if (Text(*service, "status.phase") == "rollout_paused") {
    return std::unexpected(Error{Code::kFailedPrecondition,
                                 fmt::format("the rollout of {} is paused", what), "phase"});
  }
  if (AwaitsResume(*service)) {
    return std::unexpected(
        Error{Code::kFailedPrecondition,
              fmt::format("the rollout of {} waits at canary step {}: berth svc rollout resume {}",
                          what, IntText(*service, "status.canary.step"), what),
              "phase"});
  }
  if (!RolloutSettled(*service)) {
    return std::unexpected(
        Error{Code::kUnavailable,
              fmt::format("the rollout of {} did not complete within --wait", what), "wait"});
  }
  return Ok();
}

Status ServiceLogs(ApiClient& api, const ServiceRef& ref, const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  auto service = api.Get(Path(*resolved));
  if (!service) return std::unexpected(service.error());
  const json& replicas = Array(*service, "status.replicas");
  if (replicas.empty()) {
    output.out << fmt::format("service {}/{} has no live replica\n", resolved->first,
                              resolved->second);
    return Ok();
  }
  for (const auto& r : replicas) {
    auto job = Int(r, "job");
    if (!job) continue;
    output.out << fmt::format("==> replica job {} (revision {}, {}, node {}) <==\n", *job,
                              IntText(r, "revision"), Text(r, "state"), Text(r, "node"));
    output.out.flush();
    BERTH_RETURN_IF_ERROR(
        StreamLogs(api, static_cast<std::uint64_t>(*job), std::nullopt, false, output.out));
  }
  return Ok();
}

Status WhyService(ApiClient& api, const ServiceRef& ref, const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  return Show(api.Get(Path(*resolved)), output, RenderServiceWhy);
}

Status ScaleService(ApiClient& api, const ServiceRef& ref, std::optional<std::int64_t> min,
                    std::optional<std::int64_t> max, const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  std::vector<std::pair<std::string, std::string>> params;
  if (min) params.emplace_back("min", std::to_string(*min));
  if (max) params.emplace_back("max", std::to_string(*max));
  auto scaled = api.Post(Path(*resolved, "scale") + QueryString(params), "", "application/json");
  return Show(scaled, output, [](const json& s) {
    return fmt::format("service {}/{} scaled to replicas {} (revision {})\nstatus: {}\n",
                       Text(s, "tenant"), Text(s, "name"), Bounds(s, "spec.replicas"),
                       IntText(s, "revision"), StatusLine(s));
  });
}

Status RollbackService(ApiClient& api, const ServiceRef& ref, const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  auto rolled = api.Post(Path(*resolved, "rollback"), "", "application/json");
  return Show(rolled, output, [](const json& s) {
    const json& revs = Array(s, "revisions");
    return fmt::format("service {}/{} rolled back: revision {} restores revision {}\n",
                       Text(s, "tenant"), Text(s, "name"), IntText(s, "revision"),
                       revs.empty() ? "-" : IntText(revs.front(), "restores"));
  });
}

Status ResumeRollout(ApiClient& api, const ServiceRef& ref, const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  auto resumed = api.Post(Path(*resolved, "rollout/resume"), "", "application/json");
  return Show(resumed, output, [](const json& s) {
    const auto ended = Int(s, "resumed.step_ended").value_or(0);
    const auto steps = Int(s, "resumed.steps").value_or(0);
    return fmt::format("service {}/{}: canary step {} of {} ended; {} begins\n", Text(s, "tenant"),
                       Text(s, "name"), ended, steps,
                       ended < steps ? fmt::format("step {}", ended + 1)
                                     : std::string("the rolling update of the rest"));
  });
}

Status DeleteService(ApiClient& api, const ServiceRef& ref, const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  auto gone = api.Delete(Path(*resolved));
  return Show(gone, output, [](const json& s) {
    return fmt::format("service {}/{} deleted (it was at revision {})\n", Text(s, "tenant"),
                       Text(s, "name"), IntText(s, "revision"));
  });
}

}  // namespace berth::cli

namespace berth::cli {
namespace {

std::string SessionState(const json& s) {
  if (Int(s, "status.ready").value_or(0) > 0) return "ready";
  if (Int(s, "status.running").value_or(0) > 0) return "starting";
  if (Int(s, "status.starting").value_or(0) > 0) return "waiting";
  return Text(s, "status.phase");
}

}  // namespace

json SessionSpecOf(const SessionArgs& args) {
  json spec{{"kind", "session"}, {"name", args.ref.name}, {"port", args.port}};
  if (!args.ref.tenant.empty()) spec["tenant"] = args.ref.tenant;
  if (!args.queue.empty()) spec["queue"] = args.queue;
  if (!args.image.empty()) spec["image"] = args.image;
  if (!args.command.empty()) spec["command"] = args.command;
  json resources = json::object();
  if (!args.gpus.empty()) resources["gpus"] = args.gpus;
  if (!args.cpu.empty()) resources["cpu"] = args.cpu;
  if (!args.memory.empty()) resources["memory"] = args.memory;
  if (!resources.empty()) spec["resources"] = std::move(resources);
  json limits = json::object();
  if (!args.max_lifetime.empty()) limits["max_lifetime"] = args.max_lifetime;
  if (!args.idle_window.empty()) limits["idle_window"] = args.idle_window;
  if (!limits.empty()) spec["session"] = std::move(limits);
  return spec;
}

Status StartSession(ApiClient& api, const SessionArgs& args, const Output& output) {
  auto resolved = Resolve(api, args.ref);
  if (!resolved) return std::unexpected(resolved.error());
  SessionArgs named = args;
  named.ref.tenant = resolved->first;
  named.ref.name = resolved->second;
  auto started = api.Post("/v1/services", SessionSpecOf(named).dump(), "application/json");
  return Show(started, output, [](const json& s) {
    return fmt::format("session {}/{} {}: {}\nopen it with: berth session open {}/{} --wait 5m\n",
                       Text(s, "tenant"), Text(s, "name"),
                       Text(s, "applied") == "created" ? "started" : Text(s, "applied"),
                       SessionState(s), Text(s, "tenant"), Text(s, "name"));
  });
}

std::string RenderSessions(const json& response) {
  Table table({"NAME", "TENANT", "QUEUE", "OWNER", "STATE", "STARTED", "ENDS"});
  for (const auto& s : Array(response, "services")) {
    auto created = Int(s, "created_ms");
    table.AddRow({Text(s, "name"), Text(s, "tenant"), Text(s, "queue"), Text(s, "created_by"),
                  SessionState(s), created ? FormatTimeMs(*created) : "-", SessionEnds(s)});
  }
  if (table.empty()) return "No sessions.\n";
  return table.Render();
}

Status ListSessions(ApiClient& api, const std::string& tenant, const Output& output) {
  auto list = GetAllPages(api, "/v1/services", {{"tenant", tenant}, {"kind", "session"}},
                          "services", 0, PageOrder::kAppend);
  if (!list) return std::unexpected(list.error());
  return Show(json{{"services", std::move(*list)}}, output, RenderSessions);
}

std::string RenderSessionOpen(const json& s) {
  std::string out;
  auto line = [&](std::string_view k, const std::string& v) {
    out += fmt::format("{:<10}{}\n", std::string(k) + ":", v);
  };
  line("Session",
       fmt::format("{}/{} of {}", Text(s, "tenant"), Text(s, "name"), Text(s, "created_by")));
  line("State", SessionState(s));
  const json* endpoint = Field(s, "status.endpoint");
  const bool gateway = endpoint != nullptr && endpoint->is_string();
  line("URL", gateway ? endpoint->get<std::string>() : "no gateway: berthd runs none");
  line("Access", fmt::format("members of {}, with a Berth token", Text(s, "tenant")));
  line("Ends", SessionEnds(s));
  if (gateway) {
    out += fmt::format("\ncurl -H \"Authorization: Bearer $BERTH_TOKEN\" {}\n",
                       endpoint->get<std::string>());
  }
  if (SessionState(s) == "waiting") {
    for (const auto& r : Array(s, "status.replicas")) {
      const std::string why = Text(r, "reason.message");
      if (!why.empty() && why != "-") out += fmt::format("waiting: {}\n", why);
    }
  }
  return out;
}

Status OpenSession(ApiClient& api, const ServiceRef& ref, std::int64_t wait_ms,
                   const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  const TimeMs deadline = output.clock.NowMs() + wait_ms;
  Result<json> session = api.Get(Path(*resolved));
  while (session && wait_ms > 0 && SessionState(*session) != "ready" &&
         output.clock.NowMs() < deadline) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    session = api.Get(Path(*resolved));
  }
  if (session && Text(*session, "spec.kind") != "session") {
    return std::unexpected(Error{Code::kInvalidArgument,
                                 fmt::format("{}/{} is a service, not a session; see berth svc "
                                             "show",
                                             resolved->first, resolved->second),
                                 "name"});
  }
  BERTH_RETURN_IF_ERROR(Show(session, output, RenderSessionOpen));
  if (wait_ms > 0 && SessionState(*session) != "ready") {
    return std::unexpected(Error{
        Code::kUnavailable,
        fmt::format("session {}/{} was not ready within --wait", resolved->first, resolved->second),
        "wait"});
  }
  return Ok();
}

Status StopSession(ApiClient& api, const ServiceRef& ref, const Output& output) {
  auto resolved = Resolve(api, ref);
  if (!resolved) return std::unexpected(resolved.error());
  auto session = api.Get(Path(*resolved));
  if (!session) return std::unexpected(session.error());
  if (Text(*session, "spec.kind") != "session") {
    return std::unexpected(Error{Code::kInvalidArgument,
                                 fmt::format("{}/{} is a service, not a session; delete it with "
                                             "berth svc delete",
                                             resolved->first, resolved->second),
                                 "name"});
  }
  auto gone = api.Delete(Path(*resolved));
  return Show(gone, output, [](const json& s) {
    return fmt::format("session {}/{} stopped\n", Text(s, "tenant"), Text(s, "name"));
  });
}

}  // namespace berth::cli
