// Quota requests in the SQLite store: filing, listing, and the decisions.
// An approval is a policy change made in the same transaction as the
// decision, so a request is Approved exactly when its policy version exists.
#include <fmt/format.h>

#include <cctype>

#include "model/policy.h"
#include "store/audit_chain.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_scope.h"
#include "store/sqlite_store.h"

namespace berth::store {
namespace {

constexpr std::string_view kQuotaRequestColumns =
    "id, tenant, queue, resource, guaranteed, borrow_limit, weight, lending_limit, reason, state, "
    "filed_by, filed_ms, decided_by, decided_ms, decision_comment, policy_version";

QuotaRequest ReadQuotaRequest(const Statement& st) {
  QuotaRequest r;
  r.id = st.Int(0);
  r.tenant = st.Text(1);
  r.queue = st.Text(2);
  r.resource = st.Text(3);
  r.guaranteed = st.OptInt(4);
  r.borrow_limit = st.OptInt(5);
  r.weight = st.OptInt(6);
  r.lending_limit = st.OptInt(7);
  r.reason = st.Text(8);
  r.state = ParseQuotaRequestState(st.Text(9)).value_or(QuotaRequestState::kPending);
  r.filed_by = st.Text(10);
  r.filed_ms = st.Int(11);
  r.decided_by = st.Text(12);
  r.decided_ms = st.OptInt(13);
  r.decision_comment = st.Text(14);
  r.policy_version = st.OptInt(15);
  return r;
}

}  // namespace

std::string_view QuotaRequestStateName(QuotaRequestState state) {
  switch (state) {
    case QuotaRequestState::kPending:
      return "Pending";
    case QuotaRequestState::kApproved:
      return "Approved";
    case QuotaRequestState::kRejected:
      return "Rejected";
    case QuotaRequestState::kWithdrawn:
      return "Withdrawn";
  }
  return "Pending";
}

std::optional<QuotaRequestState> ParseQuotaRequestState(std::string_view name) {
  for (auto s : {QuotaRequestState::kPending, QuotaRequestState::kApproved,
                 QuotaRequestState::kRejected, QuotaRequestState::kWithdrawn}) {
    std::string_view n = QuotaRequestStateName(s);
    if (n.size() != name.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < n.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(n[i])) !=
          std::tolower(static_cast<unsigned char>(name[i]))) {
        same = false;
      }
    }
    if (same) return s;
  }
  return std::nullopt;
}

Result<QuotaRequest> SqliteStore::FileQuotaRequest(const QuotaRequest& request,
                                                   const std::string& by, TimeMs now,
                                                   const AuditOf<QuotaRequest>& audit) {
  std::lock_guard lock(mu_);
  auto active = Active();
  if (!active) return std::unexpected(active.error());
  const model::Policy& policy = (*active)->policy;
  if (request.queue.empty()) {
    return InvalidField("queue", "is required: the queue's path, e.g. vision/training");
  }
  if (policy.FindQueue(request.queue) == nullptr) {
    auto slash = request.queue.find('/');
    std::string tenant = request.queue.substr(0, slash);
    std::string rest = slash == std::string::npos ? "" : request.queue.substr(slash + 1);
    return InvalidField("queue", UnknownQueueMessage(policy, tenant, rest));
  }
  if (!model::ParseResourceKey(request.resource)) {
    return InvalidField("resource",
                        fmt::format("'{}' is not a quota resource; write gpus, gpus/MODEL "
                                    "(gpus/H100-80GB), gpu_memory, cpu or memory",
                                    request.resource));
  }
  if (!request.guaranteed && !request.borrow_limit && !request.weight && !request.lending_limit) {
    return InvalidField("guaranteed",
                        "the request asks for no change; give at least one of guaranteed, "
                        "borrow_limit, weight, lending_limit");
  }
  if (request.reason.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidField("reason", "is required: say why the queue needs this quota");
  }
  QuotaRequest r = request;
  r.id = 0;
  r.tenant = policy.FindQueue(request.queue)->tenant;
  r.state = QuotaRequestState::kPending;
  r.filed_by = by;
  r.filed_ms = now;
  r.decided_by.clear();
  r.decided_ms.reset();
  r.decision_comment.clear();
  r.policy_version.reset();
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto ins = db_.Prepare(
      "INSERT INTO quota_requests(tenant, queue, resource, guaranteed, borrow_limit, weight, "
      "lending_limit, reason, state, filed_by, filed_ms) VALUES(?,?,?,?,?,?,?,?,?,?,?)");
  if (!ins) return std::unexpected(ins.error());
  BERTH_RETURN_IF_ERROR(ins->Bind(1, r.tenant)
                            .Bind(2, r.queue)
                            .Bind(3, r.resource)
                            .Bind(4, r.guaranteed)
                            .Bind(5, r.borrow_limit)
                            .Bind(6, r.weight)
                            .Bind(7, r.lending_limit)
                            .Bind(8, r.reason)
                            .Bind(9, QuotaRequestStateName(r.state))
                            .Bind(10, r.filed_by)
                            .Bind(11, r.filed_ms)
                            .Run());
  r.id = db_.LastInsertId();
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, r));
  return r;
}

Result<std::vector<QuotaRequest>> SqliteStore::ListQuotaRequests(const QuotaRequestFilter& filter) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      fmt::format("SELECT {} FROM quota_requests WHERE (?1 = '' OR state = ?1) AND (?2 = '' OR "
                  "tenant = ?2) AND (?4 = 0 OR id < ?4){} ORDER BY id DESC LIMIT ?3",
                  kQuotaRequestColumns, ScopeSql(filter.tenants, "tenant", 5)));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, filter.state ? QuotaRequestStateName(*filter.state) : std::string_view())
      .Bind(2, filter.tenant)
      .Bind(3, SqlLimit(filter.limit))
      .Bind(4, filter.before_id.value_or(0));
  BindScope(*st, 5, filter.tenants);
  std::vector<QuotaRequest> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(ReadQuotaRequest(*st));
  }
  return out;
}

Result<QuotaRequest> SqliteStore::LoadQuotaRequest(std::int64_t id) {
  auto st =
      db_.Prepare(fmt::format("SELECT {} FROM quota_requests WHERE id=?", kQuotaRequestColumns));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) {
    return Fail(Code::kNotFound, fmt::format("quota request {} not found", id));
  }
  return ReadQuotaRequest(*st);
}

Result<QuotaRequest> SqliteStore::GetQuotaRequest(std::int64_t id) {
  std::lock_guard lock(mu_);
  return LoadQuotaRequest(id);
}

Status SqliteStore::DecideQuotaRequest(const QuotaRequest& request, QuotaRequestState to,
                                       const std::string& by, const std::string& comment,
                                       std::optional<std::int64_t> policy_version, TimeMs now) {
  if (request.state != QuotaRequestState::kPending) {
    std::string when = request.decided_by.empty() ? "" : fmt::format(" by {}", request.decided_by);
    return Fail(Code::kFailedPrecondition,
                fmt::format("quota request {} is {}{}; only a Pending request can be decided",
                            request.id, QuotaRequestStateName(request.state), when));
  }
  auto up = db_.Prepare(
      "UPDATE quota_requests SET state=?, decided_by=?, decided_ms=?, decision_comment=?, "
      "policy_version=? WHERE id=? AND state='Pending'");
  if (!up) return std::unexpected(up.error());
  return up->Bind(1, QuotaRequestStateName(to))
      .Bind(2, by)
      .Bind(3, now)
      .Bind(4, comment)
      .Bind(5, policy_version)
      .Bind(6, request.id)
      .Run();
}

Result<QuotaRequest> SqliteStore::ApproveQuotaRequest(
    std::int64_t id, const std::string& by, const std::string& comment,
    const QuotaApproval& approve, TimeMs now, const AuditOf<QuotaRequest, QuotaRequest>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto request = LoadQuotaRequest(id);
  if (!request) return std::unexpected(request.error());
  if (request->state != QuotaRequestState::kPending) {
    // The same error DecideQuotaRequest gives, before touching the policy.
    BERTH_RETURN_IF_ERROR(
        DecideQuotaRequest(*request, QuotaRequestState::kApproved, by, comment, std::nullopt, now));
  }
  auto active = Active();
  if (!active) return std::unexpected(active.error());
  const std::int64_t from = (*active)->version;
  auto policy = approve((*active)->policy, from, *request);
  if (!policy) return std::unexpected(policy.error());
  // The new version's text is the policy as Berth prints it: the same
  // validation and guard as `berth policy apply` run on it.
  auto v = AddPolicyVersion(model::PolicyToYaml(*policy), by,
                            fmt::format("quota request #{}: {}", id, request->reason), std::nullopt,
                            std::nullopt, now);
  if (!v) {
    Error e = v.error();
    e.message = fmt::format("approving quota request {} would make policy v{} invalid: {}", id,
                            from, e.message);
    return std::unexpected(std::move(e));
  }
  BERTH_RETURN_IF_ERROR(
      DecideQuotaRequest(*request, QuotaRequestState::kApproved, by, comment, v->version, now));
  auto decided = LoadQuotaRequest(id);
  if (!decided) return std::unexpected(decided.error());
  if (auto st = CommitAudited(tx, db_, audit_head_, audit, *request, *decided); !st) {
    active_.reset();
    return std::unexpected(st.error());
  }
  active_ = std::move(*v);
  return decided;
}

Result<QuotaRequest> SqliteStore::RejectQuotaRequest(
    std::int64_t id, const std::string& by, const std::string& comment, TimeMs now,
    const AuditOf<QuotaRequest, QuotaRequest>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto request = LoadQuotaRequest(id);
  if (!request) return std::unexpected(request.error());
  BERTH_RETURN_IF_ERROR(
      DecideQuotaRequest(*request, QuotaRequestState::kRejected, by, comment, std::nullopt, now));
  auto decided = LoadQuotaRequest(id);
  if (!decided) return std::unexpected(decided.error());
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, *request, *decided));
  return decided;
}

Result<QuotaRequest> SqliteStore::WithdrawQuotaRequest(
    std::int64_t id, const std::string& by, TimeMs now,
    const AuditOf<QuotaRequest, QuotaRequest>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto request = LoadQuotaRequest(id);
  if (!request) return std::unexpected(request.error());
  BERTH_RETURN_IF_ERROR(
      DecideQuotaRequest(*request, QuotaRequestState::kWithdrawn, by, "", std::nullopt, now));
  auto decided = LoadQuotaRequest(id);
  if (!decided) return std::unexpected(decided.error());
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, *request, *decided));
  return decided;
}

}  // namespace berth::store
