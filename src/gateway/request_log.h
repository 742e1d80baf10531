// HAProxy's per-request log, as Berth's gateway receives it: one datagram
// per request on the unix socket `state_dir/log.sock`, in a compact format
// of Berth's own (kRequestLogFormat) that config.cc puts in haproxy.cfg.
// HAProxy 2.6's `show stat` has only averages; these lines carry each
// request's timings, which is where the gateway's latency percentiles come
// from (latency.h). Pure: tested on lines captured from HAProxy.
//
// Every field of the format is HAProxy's own (names, numbers, status): no
// request header, path or other client-chosen text is logged, so a client
// cannot shape a line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace berth::gateway {

// The first word of every line; the version of the format. A change of the
// format changes the word (and so the configuration's shape: a reload).
inline constexpr std::string_view kRequestLogTag = "berth1";

// HAProxy's log-format for it: tag, backend, server, status, Tq Tw Tc Tr Ta
// Tt, bytes read from the replica (response), bytes from the client, the
// termination state, and the ms a request was held at zero (the hold
// action sets txn.berth_held_ms; "-" when it was not held).
inline constexpr std::string_view kRequestLogFormat =
    "berth1 %b %s %ST %Tq %Tw %Tc %Tr %Ta %Tt %B %U %ts %[var(txn.berth_held_ms)]";

struct RequestLogEntry {
  // HAProxy's backend: "<tenant>:<service>" for a Berth route; the
  // frontend's own name ("berth") for a request it answered itself (404 for
  // a path under no route, a bad request).
  std::string backend;
  std::string tenant;   // from backend; empty when it names no route
  std::string service;  // from backend; empty when it names no route
  std::string server;   // the replica's id; "<NOSRV>" when none took it
  int status = -1;      // HTTP status sent to the client; -1: none (aborted)
  // HAProxy's timers in ms (docs: "Timing events"); -1 where the request
  // never reached that stage. tq: from the connection's accept (or the end
  // of the previous request on it) to the full request received, so it
  // includes a keep-alive connection's idle time. tw: queued for a server
  // slot. tc: connecting to the replica. tr: the replica's response
  // headers. ta: "active" time, from the request's first byte to the last
  // byte of the response (no idle, no handshake): the request's latency as
  // its client sees it, hold at zero included. tt: the whole of it.
  std::int64_t tq_ms = -1;
  std::int64_t tw_ms = -1;
  std::int64_t tc_ms = -1;
  std::int64_t tr_ms = -1;
  std::int64_t ta_ms = -1;
  std::int64_t tt_ms = -1;
  std::int64_t bytes_out = 0;  // response bytes, headers included
  std::int64_t bytes_in = 0;   // request bytes, headers included
  std::string termination;     // HAProxy's two-letter termination state ("--" when normal)
  std::int64_t held_ms = -1;   // held at zero for this long; -1: not held

  bool has_route() const { return !tenant.empty(); }
  // The latency the gateway's histograms record: ta_ms.
  std::int64_t latency_ms() const { return ta_ms; }
};

// Parses one datagram. Strips the syslog header HAProxy adds in any of its
// `log ... format` choices (rfc3164, local, rfc5424, priority, short,
// timed, iso, raw) and a trailing newline, then reads the fields of
// kRequestLogFormat. An error (kInvalidArgument) names the field that did
// not parse and quotes a bounded part of the line; field "tag" when the
// line is no request's at all (HAProxy's own messages, such as "Proxy berth
// stopped", share the log target).
Result<RequestLogEntry> ParseRequestLog(std::string_view datagram);

}  // namespace berth::gateway
