// Small pieces every REST handler file uses: JSON replies, error replies,
// and points in time from query parameters.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/auth.h"
#include "api/paging.h"
#include "api/render.h"
#include "common/clock.h"
#include "common/status.h"
#include "http/message.h"

namespace berth::server {

void Reply(http::Response& res, int status, const nlohmann::json& body);
// The error as JSON (render.h ErrorJson) with its HTTP status.
void ReplyError(http::Response& res, const Error& e);

// Whose view of `job`'s env `caller` has: the submitter's only for the
// identity that submitted it (by its own token), never for a job token,
// a metrics-reader or another identity, admins included.
EnvView EnvViewOf(const Caller& caller, const store::JobRecord& job);
JobRefs JobRefsOf(const Caller& caller);

// The job id in the path's first capture; InvalidArgument naming `id`.
Result<std::int64_t> PathId(const http::Request& req);

// A point in time from a query parameter: milliseconds since the epoch
// (digits only), or a duration back from `now` ("7d", "12h"). Errors name
// `field`.
Result<TimeMs> TimeParam(const std::string& s, const std::string& field, TimeMs now);

// The refusal of a report or usage window that holds more than `max_rows`
// stored rows (Api::set_report_max_rows): InvalidArgument naming `from`,
// with the window, what it holds and how to get an answer.
// `from_field` and `to_field` are the window's parameters on that route.
Error WindowTooLarge(std::string_view what, TimeMs from, TimeMs to, std::size_t max_rows,
                     std::string_view from_field = "from", std::string_view to_field = "to");

// The `limit` of a paged list (paging.h): 1 to kMaxPageRows, or
// kDefaultPageRows when absent.
Result<std::size_t> PageLimitParam(const http::Request& req);
// The `after` cursor of a paged list keyed by id (paging.h): the id it
// names, nullopt when absent, InvalidArgument naming `after` for a cursor
// of another list or no cursor at all.
Result<std::optional<std::int64_t>> AfterIdParam(const http::Request& req, CursorKind kind);

// The `base_version` query parameter of a versioned apply (policy, prices,
// alert rules): the version the document was written against, or nullopt
// when absent.
Result<std::optional<std::int64_t>> BaseVersion(const http::Request& req);

}  // namespace berth::server
