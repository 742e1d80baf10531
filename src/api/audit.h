// The API's side of the audit trail (store/audit_log.h): who asked, the
// request id, and the record each mutating request leaves, refused or not.
// Handlers fill an AuditNote (action, object, tenant, before and after);
// the outcome, actor, source and time come from the request and response.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

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

nlohmann::json AuditEntryJson(const store::AuditEntry& e);
nlohmann::json AuditVerdictJson(const store::AuditVerdict& v);

}  // namespace berth::server
