// GET /v1/events (docs/api.md "Live changes"): the change feed
// (store/change_feed.h) as server-sent events, narrowed to what the caller
// may read: jobs of its tenants, the inventory, alerts for platform
// admins. An event says what changed, never more than the caller could
// read with GET; the watcher reads the rest through the API.
//
// A stream holds no thread while it waits (http::Step::kWait). It checks
// its caller again every events_recheck_ms_: a revoked token, an expired
// console session or a disabled identity ends it with an `end` event, and
// a membership gained or lost changes which jobs it tells of.
#include <fmt/format.h>

#include <memory>
#include <set>

#include "api/api.h"
#include "api/api_util.h"

namespace berth::server {
namespace {

using nlohmann::json;
using store::Topic;

// Changes read from the feed per call of the producer.
constexpr std::size_t kBatch = 256;
// A comment line this often keeps proxies from closing an idle stream.
constexpr std::int64_t kKeepAliveMs = 15'000;
// How long a browser waits before it reconnects.
constexpr int kRetryMs = 3'000;

Result<std::set<Topic>> TopicsParam(const http::Request& req, bool admin) {
  std::set<Topic> topics{Topic::kJob, Topic::kNode};
  if (admin) topics.insert(Topic::kAlert);
  if (!req.has_param("topics")) return topics;
  topics.clear();
  const std::string text = req.get_param_value("topics");
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    if (name == "job") {
      topics.insert(Topic::kJob);
    } else if (name == "node") {
      topics.insert(Topic::kNode);
    } else if (name == "alert") {
      if (!admin) {
        return std::unexpected(Error{Code::kPermissionDenied,
                                     "alerts are for platform admins; leave 'alert' out of topics",
                                     "topics"});
      }
      topics.insert(Topic::kAlert);
    } else {
      return InvalidField(
          "topics",
          fmt::format("unknown topic '{}'; use job, node or alert, comma-separated", name));
    }
  }
  if (topics.empty()) return InvalidField("topics", "name at least one of job, node or alert");
  return topics;
}

json ChangeJson(const store::Change& c) {
  switch (c.topic) {
    case Topic::kJob: {
      std::int64_t id = 0;
      std::from_chars(c.id.data(), c.id.data() + c.id.size(), id);
      return json{{"id", id}, {"tenant", c.tenant}, {"queue", c.queue}, {"state", c.state}};
    }
    case Topic::kNode:
      return json{{"node", c.id}, {"change", c.state}};
    case Topic::kAlert: {
      std::int64_t id = 0;
      std::from_chars(c.id.data(), c.id.data() + c.id.size(), id);
      return json{{"id", id}, {"state", c.state}};
    }
  }
  return json::object();
}

void Event(std::string& out, std::string_view id, std::string_view name, const json& data) {
  if (!id.empty()) out += fmt::format("id: {}\n", id);
  out += fmt::format("event: {}\ndata: {}\n\n", name, data.dump());
}

}  // namespace

void Api::Events(const http::Request& req, http::Response& res, const model::TenantScope& scope) {
  store::ChangeFeed* feed = store_.change_feed();
  if (feed == nullptr) {
    return ReplyError(res, Error{Code::kUnavailable, "this berthd keeps no change feed", {}});
  }
  const bool admin = scope.all();
  auto topics = TopicsParam(req, admin);
  if (!topics) return ReplyError(res, topics.error());

  struct Stream {
    http::Request who;  // the request's credentials, to check them again
    model::TenantScope scope;
    bool admin = false;
    std::set<Topic> topics;
    std::uint64_t pos = 0;
    std::string opening;  // retry, hello, and a reset when one is due
    TimeMs recheck_at = 0;
    TimeMs keep_alive_at = 0;
  };
  auto s = std::make_shared<Stream>();
  s->who.method = req.method;
  s->who.path = req.path;
  s->who.headers = req.headers;
  s->who.remote_addr = req.remote_addr;
  s->who.remote_port = req.remote_port;
  s->scope = scope;
  s->admin = admin;
  s->topics = std::move(*topics);
  const TimeMs now = clock_.NowMs();
  s->recheck_at = now + events_recheck_ms_;
  s->keep_alive_at = now + kKeepAliveMs;

  // Where the watcher left off: the browser's Last-Event-ID on a
  // reconnection, or `after` for a client that keeps its own. Replayed
  // from there when the feed still holds it, else a reset: refetch.
  s->opening = fmt::format("retry: {}\n\n", kRetryMs);
  std::string last = req.get_header_value("Last-Event-ID");
  if (last.empty()) last = req.get_param_value("after");
  bool reset = false;
  if (last.empty()) {
    s->pos = feed->last();
  } else if (auto seq = feed->ParsePosition(last)) {
    s->pos = *seq;
    if (feed->Since(*seq, 0).gap) {
      reset = true;
      s->pos = feed->last();
    }
  } else {
    reset = true;  // another berthd's position, or none Berth gave
    s->pos = feed->last();
  }
  Event(s->opening, feed->Position(s->pos), "hello",
        json{{"epoch", feed->epoch()}, {"seq", s->pos}});
  if (reset) Event(s->opening, "", "reset", json::object());

  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  res.set_stream("text/event-stream; charset=utf-8", [this, feed, s](std::string& out) {
    if (!s->opening.empty()) {
      out = std::move(s->opening);
      s->opening.clear();
      return http::Step::kMore;
    }
    const TimeMs t = clock_.NowMs();
    if (t >= s->recheck_at) {
      s->recheck_at = t + events_recheck_ms_;
      auto caller = auth_.Authenticate(s->who);
      if (!caller) {
        Event(out, "", "end", json{{"reason", caller.error().message}});
        return http::Step::kDone;
      }
      s->scope = Authorizer::ScopeOf(*caller);
      s->admin = caller->platform_admin;
    }
    auto read = feed->Since(s->pos, kBatch);
    if (read.gap) {
      // The watcher fell further behind than the feed keeps.
      s->pos = feed->last();
      Event(out, feed->Position(s->pos), "reset", json::object());
      return http::Step::kMore;
    }
    for (const auto& c : read.changes) {
      s->pos = c.seq;
      if (!s->topics.contains(c.topic)) continue;
      if (c.topic == Topic::kJob && !s->scope.Contains(c.tenant)) continue;
      if (c.topic == Topic::kAlert && !s->admin) continue;
      Event(out, feed->Position(c.seq), store::TopicName(c.topic), ChangeJson(c));
    }
    if (!out.empty() || read.changes.size() == kBatch) {
      s->keep_alive_at = t + kKeepAliveMs;
      return http::Step::kMore;
    }
    if (t >= s->keep_alive_at) {
      s->keep_alive_at = t + kKeepAliveMs;
      out += ": keep-alive\n\n";
      return http::Step::kMore;
    }
    return http::Step::kWait;
  });
}

}  // namespace berth::server
