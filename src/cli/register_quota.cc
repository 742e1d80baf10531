// berth quota request|requests|show|approve|reject|withdraw.
#include <string>

#include "cli/registry.h"

namespace berth::cli {
namespace {

struct QuotaFlags {
  QuotaRequestFlags request;
  std::int64_t id = 0;
  std::string comment;
  std::string state;
  std::string tenant;
};

void RegisterRequest(CommandRegistry& r, CLI::App* quota, QuotaFlags& f) {
  auto* request = quota->add_subcommand(
      "request", "ask for a queue's quota of one resource to change (a platform admin decides)");
  request->add_option("QUEUE", f.request.queue, "the queue's path, e.g. vision/training")
      ->required();
  request->add_option("--resource", f.request.resource,
                      "gpus (default), gpus/MODEL, gpu_memory, cpu or memory");
  request->add_option("--guaranteed", f.request.guaranteed,
                      "the new guarantee, as the policy writes it (16, 0.5, 500m, 80Gi)");
  request->add_option("--borrow-limit", f.request.borrow_limit,
                      "how far above the guarantee the queue may borrow");
  request->add_option("--weight", f.request.weight, "share of idle capacity (1-1000)");
  request->add_option("--lending-limit", f.request.lending_limit,
                      "part of the guarantee never lent to other queues");
  request->add_option("--reason", f.request.reason, "why the queue needs it")->required();
  r.OnRun(request, [&f](ApiClient& api, const Output& out) {
    return FileQuotaRequest(api, f.request, out);
  });
  auto* requests = quota->add_subcommand("requests", "list quota requests, newest first");
  requests->add_option("--state", f.state, "Pending, Approved, Rejected or Withdrawn");
  requests->add_option("--tenant", f.tenant, "only this tenant's requests");
  r.OnRun(requests, [&f](ApiClient& api, const Output& out) {
    return ListQuotaRequests(api, f.state, f.tenant, out);
  });
}

void RegisterDecisions(CommandRegistry& r, CLI::App* quota, QuotaFlags& f) {
  auto* show = quota->add_subcommand("show", "one quota request");
  auto* approve = quota->add_subcommand(
      "approve", "make the request's quota a new policy version (berth policy rollback undoes it)");
  auto* reject = quota->add_subcommand("reject", "turn a request down, saying why");
  auto* withdraw = quota->add_subcommand("withdraw", "take back your own pending request");
  for (auto* cmd : {show, approve, reject, withdraw}) {
    cmd->add_option("ID", f.id, "quota request id")->required()->check(CLI::PositiveNumber);
  }
  approve->add_option("--comment", f.comment, "a note for the requester");
  reject->add_option("--comment", f.comment, "why, for the requester")->required();
  r.OnRun(show,
          [&f](ApiClient& api, const Output& out) { return ShowQuotaRequest(api, f.id, out); });
  r.OnRun(approve, [&f](ApiClient& api, const Output& out) {
    return ApproveQuotaRequest(api, f.id, f.comment, out);
  });
  r.OnRun(reject, [&f](ApiClient& api, const Output& out) {
    return RejectQuotaRequest(api, f.id, f.comment, out);
  });
  r.OnRun(withdraw,
          [&f](ApiClient& api, const Output& out) { return WithdrawQuotaRequest(api, f.id, out); });
}

}  // namespace

void RegisterQuotaCommands(CommandRegistry& registry) {
  auto& flags = registry.Keep<QuotaFlags>();
  auto* quota = registry.app().add_subcommand(
      "quota", "ask for a different queue quota, and decide such requests (docs/cli.md)");
  quota->require_subcommand(1);
  RegisterRequest(registry, quota, flags);
  RegisterDecisions(registry, quota, flags);
}

}  // namespace berth::cli
