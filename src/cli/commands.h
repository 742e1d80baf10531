// One function per `berth` command: call the API, print the answer. Parsing
// of the command line lives in register_*.cc; these take already-checked values so
// they can be driven directly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "cli/api_client.h"
#include "common/clock.h"
#include "common/status.h"

namespace berth::cli {

// kCsv: only `berth audit` and `berth usage` have a CSV form.
enum class OutputFormat { kTable, kJson, kCsv };

// Where and how a command prints. The clock gives "now" for ages.
struct Output {
  std::ostream& out;
  OutputFormat format = OutputFormat::kTable;
  const Clock& clock;
};

// Prints the response as JSON under -o json (indented, as berthd sent it),
// else what `human` makes of it; a failed response is returned as it is.
Status Show(const Result<nlohmann::json>& response, const Output& output,
            const std::function<std::string(const nlohmann::json&)>& human);

// The document indented, as berthd sent it (what -o json prints).
void PrintJson(const Output& output, const nlohmann::json& doc);

// A record's field as one table cell: a string as it is, anything else as
// compact JSON, "" when absent or null.
std::string Str(const nlohmann::json& record, const char* key);

struct JobFilter {
  std::string states;  // canonical, comma-separated ("Pending,Running") or empty
  std::string queue;
  std::string tenant;
  std::uint64_t array = 0;  // 0: any
  std::uint64_t limit = 0;  // the newest N; 0: every job, page after page
  bool full = false;        // ask for each job's spec and placement (full=true)
};

// "pending,RUNNING" -> "Pending,Running"; unknown names are an error that
// lists the valid ones, so a typo does not silently match nothing.
Result<std::string> NormalizeStates(std::string_view states);

// `spec` is the YAML or JSON text of a job spec, sent as is.
Status SubmitJob(ApiClient& api, const std::string& spec, const Output& output);
Status ListJobs(ApiClient& api, const JobFilter& filter, const Output& output);
Status ShowJob(ApiClient& api, std::uint64_t id, const Output& output);
Status CancelJob(ApiClient& api, std::uint64_t id, const Output& output);
// POST /v1/jobs/ID/checkpoint[?at_ms=T]: the job saved a checkpoint (now, or at T).
Status ReportCheckpoint(ApiClient& api, std::uint64_t id, std::optional<std::int64_t> at_ms,
                        const Output& output);
// `berth cancel --array ID`: POST /v1/arrays/{id}/cancel.
Status CancelArray(ApiClient& api, std::uint64_t id, const Output& output);
// `berth why`: the job's reason in `lang` ("en" or "zh"), its numbers and the
// timeline events that explain it (GET /v1/jobs/{id}/why).
Status ExplainJob(ApiClient& api, std::uint64_t id, const std::string& lang, const Output& output);
// Log text goes to `out` as it arrives; there is no JSON form of logs.
Status StreamLogs(ApiClient& api, std::uint64_t id, std::optional<int> replica, bool follow,
                  std::ostream& out);
// Which run's outputs (docs/jobs.md#outputs): replica 0 unless told, the
// given attempt, else berthd picks the latest attempt that started.
struct OutputSource {
  std::uint32_t replica = 0;
  std::optional<std::uint32_t> attempt;
};
struct CopySpec {
  std::uint64_t job = 0;
  std::string path;  // below the output directory; "" for all of it
};
// "12:model.pt" -> {12, "model.pt"}; InvalidArgument (field source) else.
Result<CopySpec> ParseCopySource(std::string_view text);
// `berth outputs JOB [PATH]`: a directory's entries or a file's size.
Status ListOutputs(ApiClient& api, std::uint64_t id, const OutputSource& src,
                   const std::string& path, const Output& output);
// `berth cp JOB:PATH [DEST] [-r]`: into DEST (a directory: DEST/<name>),
// each file through DEST.part so an interrupted copy never looks complete.
Status CopyOutputs(ApiClient& api, const CopySpec& source, const OutputSource& src,
                   const std::string& dest, bool recursive, const Output& output);
Status ListNodes(ApiClient& api, const Output& output);
Status ListGpus(ApiClient& api, const Output& output);
Status ShowNode(ApiClient& api, const std::string& node, const Output& output);
// `berth status` (commands_status.cc): GET /healthz of every address given,
// each alone; the document -o json prints ({"servers": [...], "leader":
// URL or null, "term"}), its table, and the command, which fails
// (kUnavailable) when no berthd answers as the leader.
nlohmann::json StatusDocument(ApiClient& api);
std::string RenderStatus(const nlohmann::json& doc, std::int64_t now_ms);
Status ShowStatus(ApiClient& api, const Output& output);
// `target` is NODE or NODE/GPU. `action`: "cordon", "drain" (nodes only) or
// "uncordon".
// DELETE /v1/nodes/NAME: the node leaves the inventory, its certificates
// are revoked.
Status RemoveNode(ApiClient& api, const std::string& node, const Output& output);
Status CordonTarget(ApiClient& api, const std::string& action, const std::string& target,
                    const std::string& reason, const Output& output);
// Alerts (commands_alert.cc): the list (--all, --kind), a manual resolve,
// the alert rules and the webhook deliveries.
Status ListAlerts(ApiClient& api, bool all, const std::string& kind, const Output& output);
Status ResolveAlert(ApiClient& api, std::int64_t id, const Output& output);
Status ShowAlertRules(ApiClient& api, const Output& output);
// `base` > 0: refused (409) unless it is still the newest version.
Status ApplyAlertRules(ApiClient& api, const std::string& yaml, const std::string& comment,
                       std::int64_t base, const Output& output);
// GET /v1/alert-deliveries page after page, newest first, until `limit` (0: all).
Status ListAlertDeliveries(ApiClient& api, std::uint64_t limit, const Output& output);
void PrintVersion(const Output& output);

// --- berth policy ---
// The active policy (or `version`): a header and the queue table; with
// `yaml`, the policy text exactly as applied (for editing and re-applying).
Status ShowPolicy(ApiClient& api, std::optional<std::int64_t> version, bool yaml,
                  const Output& output);
Status ListPolicyVersions(ApiClient& api, const Output& output);
// `yaml` is sent as is; berthd validates it.
// `base` > 0: refused unless it is still the active version.
Status ApplyPolicy(ApiClient& api, const std::string& yaml, const std::string& comment,
                   std::int64_t base, const Output& output);
// No versions: the active one against the one before. `from` only: `from`
// against the active one.
Status DiffPolicy(ApiClient& api, std::optional<std::int64_t> from, std::optional<std::int64_t> to,
                  const Output& output);
// What applying `yaml` would change (or why it would be refused), applying
// nothing.
Status PreviewPolicy(ApiClient& api, const std::string& yaml, const Output& output);
Status RollbackPolicy(ApiClient& api, std::int64_t version, const std::string& comment,
                      const Output& output);

// `berth policy preview`: the recent history replayed under the active
// policy and under `yaml` (POST /v1/policy/preview), applying nothing.
// `window` is a duration ("7d"); `prices` the query form of a price file
// (PricesQuery), empty for unpriced.
Status PreviewPolicyChange(ApiClient& api, const std::string& yaml, const std::string& window,
                           const std::string& prices, const std::string& file,
                           const Output& output);
// A price file (YAML: GPU model -> price per GPU-hour, `default` for every
// other model) as the `prices` query parameter: "H100-80GB:3.5,default:2".
Result<std::string> PricesQuery(const std::string& yaml);

// --- berth history ---
// GET /v1/history: the export document, as JSON, to `file` (empty: stdout).
// `since` and `until` are durations back from now or epoch milliseconds.
Status ExportHistory(ApiClient& api, const std::string& since, const std::string& until,
                     const std::string& file, const Output& output);

// --- berth audit ---
struct AuditQuery {
  std::string since;  // as the query wants it: epoch ms or a duration; "" for none
  std::string until;
  std::string actor;
  std::string tenant;
  std::string action;
  std::uint64_t limit = 1000;  // the newest N, page after page; 0: every record
};
// --since/--until as the API takes them: a duration back from now ("1h")
// or epoch milliseconds pass as they are; an RFC 3339 time
// ("2026-11-30T05:00:00Z", "...+02:00", fractions allowed) becomes epoch
// milliseconds.
Result<std::string> AuditTimeQuery(const std::string& text, const std::string& flag);
// GET /v1/audit: SEQ TIME ACTOR ACTION OBJECT TENANT OUTCOME REQUEST, or CSV
// (AuditCsv), or the JSON.
Status ListAudit(ApiClient& api, const AuditQuery& query, const Output& output);
// GET /v1/audit/verify: says whether the chain is intact; a broken one is
// an error naming the first bad record, so the exit code tells too.
Status VerifyAudit(ApiClient& api, const Output& output);
std::string RenderAudit(const nlohmann::json& response);
// RFC 4180: a header row, then one row per record, fields quoted when they
// hold a comma, quote or line break.
std::string AuditCsv(const nlohmann::json& response);

// --- identities and tokens (commands_identity.cc) ---
// The CLI's config file ($BERTH_CONFIG, else ~/.config/berth/config.json):
// where berthd is, the token, the CA to trust. Mode 0600: it holds a secret.
struct CliConfig {
  std::string server;
  std::string token;
  std::string ca;
};
// A missing file is an empty config.
Result<CliConfig> LoadConfig(const std::filesystem::path& path);
Status SaveConfig(const std::filesystem::path& path, const CliConfig& config);

// Checks the token with berthd (POST /v1/login, recorded in the audit trail)
// and only then saves `config` to `config_path`.
Status Login(ApiClient& api, const std::filesystem::path& config_path, CliConfig config,
             const Output& out);
Status WhoAmI(ApiClient& api, const Output& out);
// GET /v1/identities page after page, by name; `limit` stops after N (0: all).
Status ListIdentities(ApiClient& api, std::uint64_t limit, const Output& out);
// `tenants`: tenant -> role ("viewer", "member", "tenant-admin").
Status CreateIdentity(ApiClient& api, const std::string& name, bool service, bool platform_admin,
                      bool metrics_reader, const std::map<std::string, std::string>& tenants,
                      const Output& out);
// `action`: disable, enable, grant-platform-admin, revoke-platform-admin.
Status UpdateIdentity(ApiClient& api, const std::string& name, const std::string& action,
                      const Output& out);
Status ListMembers(ApiClient& api, const std::string& tenant, const Output& out);
Status SetMember(ApiClient& api, const std::string& tenant, const std::string& identity,
                 const std::string& role, const Output& out);
Status RemoveMember(ApiClient& api, const std::string& tenant, const std::string& identity,
                    const Output& out);
// Prints the token once, on a line of its own (for scripts: `| head -1`).
Status CreateToken(ApiClient& api, const std::string& identity, const std::string& ttl,
                   const std::string& description, const Output& out);
// GET /v1/tokens page after page, newest first; `limit` stops after N (0: all).
Status ListTokens(ApiClient& api, const std::string& identity, std::uint64_t limit,
                  const Output& out);
Status RevokeToken(ApiClient& api, const std::string& id, const Output& out);
// --- berth quota (commands_quota.cc) ---
// Amounts as the policy YAML writes them ("16", "0.5", "500m", "80Gi");
// empty: leave that field of the quota as it is.
struct QuotaRequestFlags {
  std::string queue;  // "vision/training"
  std::string resource = "gpus";
  std::string guaranteed;
  std::string borrow_limit;
  std::string weight;
  std::string lending_limit;
  std::string reason;
};
// POST /v1/quota-requests.
Status FileQuotaRequest(ApiClient& api, const QuotaRequestFlags& flags, const Output& output);
// GET /v1/quota-requests: ID STATE QUEUE RESOURCE CHANGE FILED BY POLICY REASON.
Status ListQuotaRequests(ApiClient& api, const std::string& state, const std::string& tenant,
                         const Output& output);
std::string RenderQuotaRequests(const nlohmann::json& response);
Status ShowQuotaRequest(ApiClient& api, std::int64_t id, const Output& output);
std::string RenderQuotaRequest(const nlohmann::json& request);
// Prints the policy version the approval made and the rollback that undoes it.
Status ApproveQuotaRequest(ApiClient& api, std::int64_t id, const std::string& comment,
                           const Output& output);
Status RejectQuotaRequest(ApiClient& api, std::int64_t id, const std::string& comment,
                          const Output& output);
Status WithdrawQuotaRequest(ApiClient& api, std::int64_t id, const Output& output);
// --- berth svc (commands_services.cc, docs/services.md) ---
// Which service a command names: NAME, or TENANT/NAME; the tenant is
// --tenant, else the one tenant the caller is a member of.
struct ServiceRef {
  std::string name;
  std::string tenant;
};
// POST /v1/services with the spec's text (YAML or JSON).
Status ApplyService(ApiClient& api, const std::string& spec, const Output& output);
// GET /v1/services: NAME TENANT QUEUE REV REPLICAS DESIRED READY UPDATED.
Status ListServices(ApiClient& api, const std::string& tenant, const Output& output);
std::string RenderServices(const nlohmann::json& response);
Status ShowService(ApiClient& api, const ServiceRef& ref, const Output& output);
// `berth svc logs`: each live replica's log so far, under a header naming
// its job, revision and node.
Status ServiceLogs(ApiClient& api, const ServiceRef& ref, const Output& output);
// `berth svc why`: why a service has fewer ready replicas than it wants.
Status WhyService(ApiClient& api, const ServiceRef& ref, const Output& output);
std::string RenderServiceWhy(const nlohmann::json& service);
// `berth svc rollout status`: the current revision's replicas against the
// desired count, what older revisions still serve, and whether the rollout
// is complete, under way or paused. wait_ms > 0: asks again each second
// until it completes (Ok), pauses (kFailedPrecondition) or wait_ms passes
// (kUnavailable).
Status RolloutStatus(ApiClient& api, const ServiceRef& ref, std::int64_t wait_ms,
                     const Output& output);
std::string RenderRolloutStatus(const nlohmann::json& service);
std::string RenderService(const nlohmann::json& service);
// min/max: nullopt keeps that bound.
Status ScaleService(ApiClient& api, const ServiceRef& ref, std::optional<std::int64_t> min,
                    std::optional<std::int64_t> max, const Output& output);
Status RollbackService(ApiClient& api, const ServiceRef& ref, const Output& output);
// Ends the current canary step of a service's rollout (the next step, or
// the rolling update of the rest, begins).
Status ResumeRollout(ApiClient& api, const ServiceRef& ref, const Output& output);
Status DeleteService(ApiClient& api, const ServiceRef& ref, const Output& output);
// --- berth session (commands_services.cc, docs/services.md) ---
// What `berth session start` asks for; empty fields take the spec's
// defaults (docs/services.md, "Interactive sessions").
struct SessionArgs {
  ServiceRef ref;
  std::string queue;
  std::string image;
  std::vector<std::string> command;
  std::uint32_t port = 8888;
  std::string gpus;  // "1", "0.5"
  std::string cpu;
  std::string memory;
  std::string max_lifetime;
  std::string idle_window;
};
// The spec `berth session start` applies (JSON, kind session).
nlohmann::json SessionSpecOf(const SessionArgs& args);
// POST /v1/services with SessionSpecOf(args), under the resolved tenant.
Status StartSession(ApiClient& api, const SessionArgs& args, const Output& output);
// GET /v1/services?kind=session: NAME TENANT QUEUE OWNER STATUS STARTED ENDS.
Status ListSessions(ApiClient& api, const std::string& tenant, const Output& output);
std::string RenderSessions(const nlohmann::json& response);
// Where the session is reached and how long it lives; wait_ms > 0: asks
// again each second until its replica is ready (Ok) or wait_ms passes
// (kUnavailable).
Status OpenSession(ApiClient& api, const ServiceRef& ref, std::int64_t wait_ms,
                   const Output& output);
std::string RenderSessionOpen(const nlohmann::json& session);
Status StopSession(ApiClient& api, const ServiceRef& ref, const Output& output);
// --- berth report ops (commands_report.cc, docs/metering.md) ---
struct OpsReportArgs {
  std::string from;  // as the API takes it (UsageTimeQuery); "" for the default
  std::string to;
  std::string format = "markdown";  // markdown, html or json
  std::string out_file;             // "" for stdout
};
// GET /v1/reports/ops rendered as Markdown, one self-contained HTML page, or
// the JSON; written to out_file when given.
Status ShowOpsReport(ApiClient& api, const OpsReportArgs& args, const Output& output);
std::string RenderOpsMarkdown(const nlohmann::json& report);
std::string RenderOpsHtml(const nlohmann::json& report);

// --- berth usage, price, budget (commands_usage.cc, docs/metering.md) ---
struct UsageQuery {
  std::string by;  // "tenant,day"; "" for the server's default (tenant)
  std::string from;
  std::string to;
  std::string tenant;
};
// AuditTimeQuery, plus a date alone ("2026-11-01": its UTC midnight).
Result<std::string> UsageTimeQuery(const std::string& text, const std::string& flag);
// GET /v1/usage: one row per group with GPU-hours, used and idle ("—" until
// telemetry exists), cost and runs, then the total; or CSV, or the JSON.
Status ShowUsage(ApiClient& api, const UsageQuery& query, const Output& output);
// `base` > 0: refused (409) unless it is still the newest version.
Status ApplyPrices(ApiClient& api, const std::string& yaml, const std::string& comment,
                   std::int64_t base, const Output& output);
Status ShowPrices(ApiClient& api, std::optional<std::int64_t> version, const Output& output);
struct BudgetArgs {
  std::string tenant;
  std::string gpu_hours;  // one of gpu_hours and amount, as typed
  std::string amount;
  std::string alerts;  // "50,80,100"; "" for the server's default
  bool enforce = false;
};
Status SetBudget(ApiClient& api, const BudgetArgs& args, const Output& output);
Status ListBudgets(ApiClient& api, const Output& output);
// berth queues [--tenant T]: each queue's GPU quota against what it holds.
Status ListQueues(ApiClient& api, const std::string& tenant, const Output& output);

}  // namespace berth::cli
