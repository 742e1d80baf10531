#include "gateway/request_log.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>

namespace berth::gateway {

namespace {

// A bounded, printable quote of a datagram for an error message.
std::string RequestLogQuote(std::string_view s) {
  constexpr std::size_t kMax = 160;
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > kMax) out += "...";
  return out;
}

bool RequestLogDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "Mmm dd hh:mm:ss " (rfc3164's timestamp, day padded with a space).
bool RequestLogIsBsdTime(std::string_view s) {
  if (s.size() < 16) return false;
  auto alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return alpha(s[0]) && alpha(s[1]) && alpha(s[2]) && s[3] == ' ' && (s[4] == ' ' || digit(s[4])) &&
         digit(s[5]) && s[6] == ' ' && digit(s[7]) && digit(s[8]) && s[9] == ':' && digit(s[10]) &&
         digit(s[11]) && s[12] == ':' && digit(s[13]) && digit(s[14]) && s[15] == ' ';
}

// "YYYY-MM-DDT" opening an ISO 8601 timestamp.
bool RequestLogIsIsoTime(std::string_view s) {
  return s.size() > 11 && RequestLogDigits(s.substr(0, 4)) && s[4] == '-' &&
         RequestLogDigits(s.substr(5, 2)) && s[7] == '-' && RequestLogDigits(s.substr(8, 2)) &&
         s[10] == 'T';
}

// Drops `n` space-terminated words from the front of `s`; false if fewer.
bool RequestLogSkipWords(std::string_view& s, int n) {
  for (int i = 0; i < n; ++i) {
    const auto sp = s.find(' ');
    if (sp == std::string_view::npos) return false;
    s.remove_prefix(sp + 1);
  }
  return true;
}

// The message inside whatever header HAProxy's `log ... format` added.
// Unknown shapes are left as they are: the tag check then fails.
std::string_view RequestLogMessage(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == '\0')) {
    s.remove_suffix(1);
  }
  // <PRI>: rfc3164, local, rfc5424, priority, short and timed open with it.
  if (s.size() > 2 && s[0] == '<') {
    const auto close = s.find('>');
    if (close != std::string_view::npos && close >= 2 && close <= 4 &&
        RequestLogDigits(s.substr(1, close - 1))) {
      s.remove_prefix(close + 1);
    }
  }
  const auto tagged = [](std::string_view m) {
    return m.starts_with(kRequestLogTag) && m.size() > kRequestLogTag.size() &&
           m[kRequestLogTag.size()] == ' ';
  };
  if (tagged(s)) return s;  // raw, priority, short
  if (s.starts_with("1 ")) {
    // rfc5424: VERSION TIMESTAMP HOSTNAME APP-NAME PROCID MSGID SD MSG.
    std::string_view rest = s.substr(2);
    if (!RequestLogSkipWords(rest, 5)) return s;
    if (rest.starts_with("- ")) return rest.substr(2);
    if (rest.starts_with("[")) {
      const auto end = rest.find("] ");
      if (end != std::string_view::npos) return rest.substr(end + 2);
    }
    return s;
  }
  if (RequestLogIsBsdTime(s)) {
    // rfc3164 ("host tag: msg"), local ("tag: msg") or timed (msg).
    std::string_view rest = s.substr(16);
    if (tagged(rest)) return rest;
    const auto colon = rest.find(": ");
    return colon == std::string_view::npos ? s : rest.substr(colon + 2);
  }
  if (RequestLogIsIsoTime(s)) {
    std::string_view rest = s;
    if (RequestLogSkipWords(rest, 1)) return rest;
  }
  return s;
}

}  // namespace

Result<RequestLogEntry> ParseRequestLog(std::string_view datagram) {
  const std::string_view msg = RequestLogMessage(datagram);
  constexpr std::size_t kFields = 14;
  static constexpr std::array<const char*, kFields> kNames = {
      "tag", "backend", "server", "status",    "Tq",       "Tw",          "Tc",
      "Tr",  "Ta",      "Tt",     "bytes_out", "bytes_in", "termination", "held_ms"};
  std::array<std::string_view, kFields> f;
  std::size_t n = 0;
  std::size_t start = 0;
  while (start <= msg.size()) {
    auto sp = msg.find(' ', start);
    if (sp == std::string_view::npos) sp = msg.size();
    if (n == kFields) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("request log: more than {} fields in '{}'", kFields,
                              RequestLogQuote(datagram)),
                  "request_log");
    }
    f[n++] = msg.substr(start, sp - start);
    start = sp + 1;
  }
  if (n == 0 || f[0] != kRequestLogTag) {
    return Fail(
        Code::kInvalidArgument,
        fmt::format("request log: no '{}' line in '{}'", kRequestLogTag, RequestLogQuote(datagram)),
        "tag");
  }
  if (n != kFields) {
    return Fail(Code::kInvalidArgument,
                fmt::format("request log: {} fields where {} were expected in '{}'", n, kFields,
                            RequestLogQuote(datagram)),
                kNames[n < kFields ? n : 0]);
  }
  auto bad = [&](std::size_t i, std::string_view why) {
    return Fail(Code::kInvalidArgument,
                fmt::format("request log: {} '{}' {} in '{}'", kNames[i], RequestLogQuote(f[i]),
                            why, RequestLogQuote(datagram)),
                kNames[i]);
  };
  // An integer, -1 or above ("-1": HAProxy's "did not happen").
  auto number = [&](std::size_t i, std::int64_t& out) -> bool {
    const std::string_view v = f[i];
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && ptr == v.data() + v.size() && out >= -1;
  };
  RequestLogEntry e;
  if (f[1].empty()) return bad(1, "is empty");
  e.backend = std::string(f[1]);
  if (const auto colon = f[1].find(':'); colon != std::string_view::npos) {
    e.tenant = std::string(f[1].substr(0, colon));
    e.service = std::string(f[1].substr(colon + 1));
    if (e.tenant.empty() || e.service.empty() || e.service.find(':') != std::string::npos) {
      return bad(1, "is not <tenant>:<service>");
    }
  }
  if (f[2].empty()) return bad(2, "is empty");
  e.server = std::string(f[2]);
  std::int64_t status = 0;
  if (!number(3, status) || status > 999) return bad(3, "is not an HTTP status");
  e.status = static_cast<int>(status);
  std::int64_t* timers[] = {&e.tq_ms, &e.tw_ms, &e.tc_ms, &e.tr_ms, &e.ta_ms, &e.tt_ms};
  for (std::size_t i = 0; i < 6; ++i) {
    if (!number(4 + i, *timers[i])) return bad(4 + i, "is not a time in ms");
  }
  if (!number(10, e.bytes_out) || e.bytes_out < 0) return bad(10, "is not a byte count");
  if (!number(11, e.bytes_in) || e.bytes_in < 0) return bad(11, "is not a byte count");
  if (f[12].size() != 2) return bad(12, "is not a two-letter termination state");
  e.termination = std::string(f[12]);
  if (f[13] != "-" && (!number(13, e.held_ms) || e.held_ms < 0)) {
    return bad(13, "is neither '-' nor a time in ms");
  }
  return e;
}

}  // namespace berth::gateway
