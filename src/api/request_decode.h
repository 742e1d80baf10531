// Strict decoding of REST requests: every route declares the query
// parameters it accepts (name, kind, range) and the body it reads. A request
// with an unknown, repeated or malformed parameter is refused before any
// handler runs, with an error naming the parameter and the accepted ones.
//
// This library links no gRPC, no store and no HTTP server, so a libFuzzer
// target (fuzz/fuzz_rest_decode.cc) can push arbitrary bytes through exactly
// the code berthd runs. Query strings arrive here already split into pairs.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace berth::server {

// What a query parameter's value must look like.
enum class ParamKind {
  kText,      // any bytes up to max_len
  kInt,       // decimal digits, min..max
  kBool,      // true, false, 1 or 0
  kTime,      // ms since the epoch, or a duration back from now ("7d")
  kDuration,  // a positive duration ("7d", "12h")
};

struct ParamRule {
  std::string_view name;
  ParamKind kind = ParamKind::kText;
  std::int64_t min = 0;
  std::int64_t max = std::numeric_limits<std::int64_t>::max();
  std::size_t max_len = 1024;  // kText only
};

// What a route reads from its body.
enum class BodyKind {
  kNone,         // the body is ignored
  kJobSpec,      // model::ParseJobSpec (YAML or JSON)
  kPolicy,       // model::ParsePolicy (YAML)
  kServiceSpec,  // model::ParseServiceSpec (YAML or JSON)
};

struct RouteRule {
  std::string_view method;
  std::string_view pattern;  // the regex api.cc registers the handler under
  std::vector<ParamRule> params;
  BodyKind body = BodyKind::kNone;
};

// Query parameters as the HTTP server hands them over (http::Params).
using QueryParams = std::multimap<std::string, std::string>;

// Every route berthd serves, in registration order.
const std::vector<RouteRule>& RouteRules();

// The rule for `method path`, or null when no route matches (a 404).
const RouteRule* MatchRoute(std::string_view method, std::string_view path);

// Checks every query parameter against the route's rules: unknown, repeated
// and malformed parameters are errors whose `field` names the parameter.
Status CheckQuery(const RouteRule& route, const QueryParams& params, TimeMs now);

// The decoded path and every query name and value are UTF-8 text; an error
// names the part that is not (`path`, the parameter, or `query`).
Status CheckRequestText(const std::string& path, const QueryParams& params);

// Parses the body the way the route's handler will (no side effects).
Status CheckBody(const RouteRule& route, std::string_view body);

// A point in time: milliseconds since the epoch (digits only), or a duration
// back from `now` ("7d", "12h"). Errors name `field`.
Result<TimeMs> ParseTimeParam(std::string_view s, std::string_view field, TimeMs now);

// A decimal integer from min to max. Errors name `field`.
Result<std::int64_t> ParseIntParam(std::string_view s, std::string_view field, std::int64_t min,
                                   std::int64_t max);

// true/1 or false/0. Errors name `field`.
Result<bool> ParseBoolParam(std::string_view s, std::string_view field);

// Splits "a=1&b=x%20y" into pairs, percent- and plus-decoded, as an HTTP
// server does before routing. For the fuzzer and tests; never fails.
QueryParams ParseQueryString(std::string_view query);

}  // namespace berth::server
