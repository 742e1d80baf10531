// What every request passes before its handler: the caller's rate limit,
// then the route's declared query parameters. Apart from api.cc so limits
// and decoding change without touching the handlers.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "server/api.h"
#include "server/api_util.h"
#include "server/request_decode.h"

namespace berth::server {

bool Api::Gate(const httplib::Request& req, httplib::Response& res) {
  if (req.path == "/healthz") return false;  // probes are never limited
  if (limiter_ != nullptr) {
    auto key = RateLimitKey(req.get_header_value("Authorization"), req.remote_addr);
    auto decision = limiter_->Admit(key);
    if (!decision.allowed) {
      const auto& c = limiter_->config();
      const std::int64_t retry_s =
          std::max<std::int64_t>(1, (decision.retry_after_ms + 999) / 1000);
      res.set_header("Retry-After", std::to_string(retry_s));
      ReplyError(res,
                 Error{Code::kResourceExhausted,
                       fmt::format("rate limit exceeded: at most {} requests per second "
                                   "(bursts of {}) per token or address; retry after {} s. "
                                   "Operators set it with berthd --rate-limit and --rate-burst",
                                   c.per_second, c.burst, retry_s),
                       "rate_limit"});
      return true;
    }
  }
  // An unknown route is left to the router, which answers 404.
  const RouteRule* route = MatchRoute(req.method, req.path);
  if (route == nullptr) return false;
  if (auto st = CheckQuery(*route, req.params, clock_.NowMs()); !st) {
    ReplyError(res, st.error());
    return true;
  }
  return false;
}

}  // namespace berth::server
