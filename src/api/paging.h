// Cursor paging of the long lists (GET /v1/jobs, /v1/audit,
// /v1/usage/records, /v1/alerts, /v1/alert-deliveries, /v1/quota-requests,
// /v1/identities, /v1/tokens, /v1/services;
// docs/api.md "Pages"): the page sizes and the cursors.
//
// A cursor is a position in one list's order, nothing more: the `next` of a
// page is the key of its last row (a job id, an audit sequence number, a
// usage record's start and run id), and the next page is the rows after that
// key (keyset paging, never OFFSET), so rows added meanwhile neither shift
// nor repeat a later page. A forged cursor only moves the position: every
// page is filtered by the same authorization as the first
// (Authorizer::ScopeOf, the request's tenant scope), so it shows nothing the caller could not list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace berth::server {

// Rows per page when `limit` is absent, and the most a caller may ask for
// (a larger `limit` is refused with 400 naming `limit`).
inline constexpr std::size_t kDefaultPageRows = 500;
inline constexpr std::size_t kMaxPageRows = 5000;

// Which list a cursor belongs to: a cursor of one list is refused by another.
enum class CursorKind : char {
  kJobs = 'j',
  kAudit = 'a',
  kUsageRecords = 'u',
  kAlerts = 'l',
  kAlertDeliveries = 'd',
  kQuotaRequests = 'q',
  kIdentities = 'i',  // key: the page's last identity name
  kTokens = 't',      // key: the page's last token's "<created_ms>:<id>"
  kServices = 's',    // key: the page's last service's id
};

// The opaque text of a position: the kind's letter, then `key`.
std::string EncodeCursor(CursorKind kind, std::string_view key);
// The key of a cursor of `kind` (the `after` query parameter);
// InvalidArgument naming `after` for any other text.
Result<std::string> DecodeCursor(CursorKind kind, std::string_view cursor);
// A cursor whose key is a positive integer (jobs, audit).
Result<std::int64_t> DecodeIdCursor(CursorKind kind, std::string_view cursor);

}  // namespace berth::server
