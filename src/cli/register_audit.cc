// berth audit [verify]: the audit trail and its hash chain.
#include <string>

#include "cli/api_error.h"
#include "cli/registry.h"

namespace berth::cli {

void RegisterAuditCommands(CommandRegistry& registry) {
  auto& query = registry.Keep<AuditQuery>();
  auto* audit = registry.app().add_subcommand(
      "audit", "who changed what: the audit trail of API changes and refusals, oldest first");
  audit->require_subcommand(0, 1);
  audit->add_option("--since", query.since,
                    "from: a duration back from now (1h, 7d), an RFC 3339 time or epoch ms");
  audit->add_option("--until", query.until, "until (exclusive), as --since; default now");
  audit->add_option("--actor", query.actor, "only records of this actor");
  audit->add_option("--tenant", query.tenant, "only records about this tenant");
  audit->add_option("--action", query.action,
                    "only this action (job.submit), or a family ending in '.' (job.)");
  audit
      ->add_option("--limit", query.limit,
                   "the newest N records, fetched page after page (default 1000; 0: all)")
      ->check(CLI::NonNegativeNumber);
  registry.AllowFormat(audit, "csv");
  registry.OnCheck(audit, [&registry, &query] {
    for (auto* t : {&query.since, &query.until}) {
      auto q = AuditTimeQuery(*t, t == &query.since ? "--since" : "--until");
      if (!q) return registry.Fail(kExitUsage, FormatError(q.error()));
      *t = std::move(*q);
    }
    return kExitOk;
  });
  registry.OnRun(
      audit, [&query](ApiClient& api, const Output& out) { return ListAudit(api, query, out); });
  auto* verify = audit->add_subcommand(
      "verify", "recompute the audit chain and name the first edited, missing or reordered record");
  registry.OnRun(verify, [](ApiClient& api, const Output& out) { return VerifyAudit(api, out); });
}

}  // namespace berth::cli
