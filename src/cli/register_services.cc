// berth svc apply|list|show|logs|why|scale|rollout status|resume|rollback|delete, and
// berth session start|list|open|stop.
#include <fmt/format.h>

#include <optional>
#include <string>

#include "cli/registry.h"
#include "common/units.h"

namespace berth::cli {
namespace {

struct ServiceFlags {
  std::string spec_path;
  std::string spec;
  ServiceRef ref;
  std::int64_t min = 0;
  std::int64_t max = 0;
  std::string wait;
};

void AddRef(CLI::App* cmd, ServiceRef& ref) {
  cmd->add_option("NAME", ref.name, "the name, or TENANT/NAME")->required();
  cmd->add_option("--tenant", ref.tenant,
                  "its tenant (default: the one tenant you are a member of)");
}

void AddRef(CLI::App* cmd, ServiceFlags& f) {
  AddRef(cmd, f.ref);
}

// --wait DURATION (at most a day); "" is 0: ask once.
Result<std::int64_t> WaitMs(const std::string& wait) {
  if (wait.empty()) return 0;
  auto parsed = ParseDurationMs(wait, std::int64_t{24} * 3600 * 1000);
  if (!parsed) {
    return std::unexpected(Error{Code::kInvalidArgument,
                                 fmt::format("--wait '{}': {}", wait, parsed.error().message),
                                 "wait"});
  }
  return *parsed;
}

struct SessionFlags {
  SessionArgs args;
  ServiceRef ref;
  std::string wait;
};

void RegisterSessionCommands(CommandRegistry& registry) {
  auto& f = registry.Keep<SessionFlags>();
  auto* session = registry.app().add_subcommand(
      "session",
      "interactive sessions (notebooks, dev boxes): start, list, open, stop (docs/services.md)");
  session->require_subcommand(1);

  auto* start = session->add_subcommand(
      "start",
      "start a session in an interactive queue: berth session start NAME --queue Q "
      "--image IMG [-- COMMAND...]");
  start->add_option("NAME", f.args.ref.name, "the session's name, or TENANT/NAME")->required();
  start->add_option("--tenant", f.args.ref.tenant,
                    "the session's tenant (default: the one tenant you are a member of)");
  start->add_option("--queue", f.args.queue, "an interactive queue of the tenant")->required();
  start->add_option("--image", f.args.image, "the OCI image it runs");
  start->add_option("--port", f.args.port, "the port it serves on (default 8888)")
      ->check(CLI::Range(1, 65535));
  start->add_option("--gpus", f.args.gpus, "whole GPUs (2) or a slice of one (0.5)");
  start->add_option("--cpu", f.args.cpu, "CPU cores (0.5, 4)");
  start->add_option("--memory", f.args.memory, "memory (16Gi)");
  start->add_option("--max-lifetime", f.args.max_lifetime,
                    "ended this long after it starts, waiting included (default 12h)");
  start->add_option("--idle", f.args.idle_window,
                    "ended after this long without a request or a busy GPU (default 1h; 0: "
                    "never)");
  start->add_option("COMMAND", f.args.command, "what it runs (with --image: the image's command)");
  registry.OnCheck(start, [&registry, &f] {
    if (f.args.image.empty() && f.args.command.empty()) {
      return registry.Fail(kExitUsage,
                           "berth session start: give --image IMAGE, a command after --, or both");
    }
    return kExitOk;
  });
  registry.OnRun(
      start, [&f](ApiClient& api, const Output& out) { return StartSession(api, f.args, out); });

  auto* list = session->add_subcommand("list", "the sessions you can see, newest first");
  list->add_option("--tenant", f.ref.tenant, "only this tenant's sessions");
  registry.OnRun(list, [&f](ApiClient& api, const Output& out) {
    return ListSessions(api, f.ref.tenant, out);
  });

  auto* open = session->add_subcommand(
      "open", "where a session is reached through the gateway, how to call it, when it ends");
  AddRef(open, f.ref);
  open->add_option("--wait", f.wait,
                   "ask again each second until it is ready (exit 0) or this long passes (e.g. "
                   "5m; exit non-zero)");
  registry.OnRun(open, [&f](ApiClient& api, const Output& out) -> Status {
    auto wait_ms = WaitMs(f.wait);
    if (!wait_ms) return std::unexpected(wait_ms.error());
    return OpenSession(api, f.ref, *wait_ms, out);
  });

  auto* stop = session->add_subcommand("stop", "stop a session: its replica ends, its GPUs free");
  AddRef(stop, f.ref);
  registry.OnRun(stop,
                 [&f](ApiClient& api, const Output& out) { return StopSession(api, f.ref, out); });
}

}  // namespace

void RegisterServiceCommands(CommandRegistry& registry) {
  auto& f = registry.Keep<ServiceFlags>();
  auto* svc = registry.app().add_subcommand(
      "svc", "inference services: apply, list, show, scale, roll back, delete (docs/services.md)");
  svc->require_subcommand(1);

  auto* apply = svc->add_subcommand(
      "apply", "create a service from its spec, or make a changed spec its new revision");
  apply->add_option("-f,--file", f.spec_path, "service spec file (YAML or JSON); - reads stdin")
      ->required();
  registry.ReadsDocument(apply, f.spec_path, "service spec", f.spec);
  registry.OnRun(
      apply, [&f](ApiClient& api, const Output& out) { return ApplyService(api, f.spec, out); });

  auto* list = svc->add_subcommand("list", "list the services you can see, newest first");
  list->add_option("--tenant", f.ref.tenant, "only this tenant's services");
  registry.OnRun(list, [&f](ApiClient& api, const Output& out) {
    return ListServices(api, f.ref.tenant, out);
  });

  auto* show = svc->add_subcommand("show", "one service: spec, status and revisions");
  AddRef(show, f);
  registry.OnRun(show,
                 [&f](ApiClient& api, const Output& out) { return ShowService(api, f.ref, out); });

  auto* logs = svc->add_subcommand(
      "logs", "each live replica's output so far (berth logs JOB -f follows one replica)");
  AddRef(logs, f);
  registry.OnRun(logs,
                 [&f](ApiClient& api, const Output& out) { return ServiceLogs(api, f.ref, out); });

  auto* why = svc->add_subcommand(
      "why", "why a service has fewer ready replicas than it wants: each waiting replica's reason");
  AddRef(why, f);
  registry.OnRun(why,
                 [&f](ApiClient& api, const Output& out) { return WhyService(api, f.ref, out); });

  auto* scale = svc->add_subcommand("scale", "set a service's replica bounds (a new revision)");
  AddRef(scale, f);
  auto* min_opt = scale->add_option("--min", f.min, "the fewest replicas (0 or more)")
                      ->check(CLI::NonNegativeNumber);
  auto* max_opt = scale->add_option("--max", f.max, "the most replicas (1 or more)")
                      ->check(CLI::PositiveNumber);
  registry.OnCheck(scale, [&registry, min_opt, max_opt] {
    if (min_opt->count() == 0 && max_opt->count() == 0) {
      return registry.Fail(kExitUsage, "berth svc scale: give --min, --max or both");
    }
    return kExitOk;
  });
  registry.OnRun(scale, [&f, min_opt, max_opt](ApiClient& api, const Output& out) {
    return ScaleService(
        api, f.ref, min_opt->count() > 0 ? std::optional<std::int64_t>(f.min) : std::nullopt,
        max_opt->count() > 0 ? std::optional<std::int64_t>(f.max) : std::nullopt, out);
  });

  auto* rollout =
      svc->add_subcommand("rollout", "a service's rollout: berth svc rollout status|resume");
  rollout->require_subcommand(1);
  auto* rollout_status = rollout->add_subcommand(
      "status", "whether the current revision has replaced the older ones, is under way or paused");
  AddRef(rollout_status, f);
  rollout_status->add_option(
      "--wait", f.wait,
      "ask again each second until the rollout completes (exit 0), pauses or this long passes "
      "(e.g. 5m; exit non-zero)");
  registry.OnRun(rollout_status, [&f](ApiClient& api, const Output& out) -> Status {
    auto wait_ms = WaitMs(f.wait);
    if (!wait_ms) return std::unexpected(wait_ms.error());
    return RolloutStatus(api, f.ref, *wait_ms, out);
  });

  auto* resume = rollout->add_subcommand(
      "resume",
      "end the current canary step now: the next step (or the rest of the rollout) goes on");
  AddRef(resume, f);
  registry.OnRun(
      resume, [&f](ApiClient& api, const Output& out) { return ResumeRollout(api, f.ref, out); });

  auto* rollback = svc->add_subcommand(
      "rollback", "make the revision before the current one current again (a new revision)");
  AddRef(rollback, f);
  registry.OnRun(rollback, [&f](ApiClient& api, const Output& out) {
    return RollbackService(api, f.ref, out);
  });

  auto* del = svc->add_subcommand("delete", "delete a service and its revisions");
  AddRef(del, f);
  registry.OnRun(
      del, [&f](ApiClient& api, const Output& out) { return DeleteService(api, f.ref, out); });

  RegisterSessionCommands(registry);
}

}  // namespace berth::cli
