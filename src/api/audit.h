// The API's side of the audit trail (store/audit_log.h): who asked, the
// request id, and the record each mutating request leaves, refused or not.
// Handlers fill an AuditNote (action, object, tenant, before and after);
// the outcome, actor, source and time come from the request and response.
// A change that can commits its record in its own transaction
// (RecordInChange); Api::AuditedRun appends the others after the handler.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>

#include "common/clock.h"
#include "http/message.h"
#include "store/audit_log.h"

namespace berth::server {

// What a handler knows about the change it made (or was asked to make).
struct AuditNote {
  std::string action;  // "job.submit", ...; set by the route, refined by the handler
  std::string object;  // "job/12"; "job" when the request named none that exists
  std::string tenant;
  nlohmann::json before;  // null for none
  nlohmann::json after;
  // A request that changes nothing (a policy dry run) leaves no record.
  bool skip = false;
  // The record was committed with the change (RecordInChange): a
  // successful answer adds no second one.
  bool recorded = false;
};

// The X-Request-Id a request carries when it is sane (1-128 characters of
// letters, digits and ._:-), else a fresh random one.
std::string RequestId(const http::Request& req);

// Who asked: the authenticated caller's identity (api/auth.h), else
// "anonymous <address>" for a request that presented no valid token.
std::string Actor(const http::Request& req);

// "ok" for a 2xx/3xx answer; "denied: <code>" for a 4xx (the request was
// refused: invalid, not found, in the wrong state); "failed: <message>" for
// a 5xx.
std::string Outcome(const http::Response& res);

store::AuditEntry MakeAuditEntry(const AuditNote& note, const http::Request& req,
                                 const http::Response& res, TimeMs now);
// `base` with the note's tenant, object (secrets redacted), before and
// after.
store::AuditEntry CompleteAuditEntry(store::AuditEntry base, const AuditNote& note);

// The note's record as committed with a change: the note as the handler
// has filled it so far, completed by `fill` from what the change made (the
// ids, the job before and after), outcome "ok". Actor, request id, source
// and time are taken now, on the request's thread, so the record may be
// made on another (a group commit's leader) while this one waits; `note`
// is updated to the record's fields and marked recorded.
template <typename... Made>
store::AuditOf<Made...> RecordInChange(
    AuditNote& note, const http::Request& req, const http::Response& res, TimeMs now,
    std::type_identity_t<std::function<void(AuditNote&, const Made&...)>> fill) {
  store::AuditEntry base = MakeAuditEntry(note, req, res, now);
  base.outcome = "ok";
  return [&note, base = std::move(base),
          fill = std::move(fill)](const Made&... made) -> std::optional<store::AuditEntry> {
    AuditNote filled = note;
    fill(filled, made...);
    filled.recorded = true;
    note = filled;
    return CompleteAuditEntry(base, filled);
  };
}

nlohmann::json AuditEntryJson(const store::AuditEntry& e);
nlohmann::json AuditVerdictJson(const store::AuditVerdict& v);

}  // namespace berth::server
