#include "api/audit.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <optional>

#include "api/auth.h"
#include "api/redact.h"

namespace berth::server {
namespace {

using nlohmann::json;

bool SaneRequestId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (unsigned char c : id) {
    if (std::isalnum(c) == 0 && c != '.' && c != '_' && c != ':' && c != '-') return false;
  }
  return true;
}

std::string Compact(const json& j) {
  return j.is_null() ? std::string() : j.dump();
}

json Parsed(const std::string& text) {
  if (text.empty()) return nullptr;
  auto j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json(text) : j;
}

json HeadJson(const std::optional<store::AuditHead>& h) {
  if (!h) return nullptr;
  return json{{"seq", h->seq}, {"hash", h->hash}};
}

}  // namespace

std::string RequestId(const http::Request& req) {
  if (req.has_header("X-Request-Id")) {
    std::string id = req.get_header_value("X-Request-Id");
    if (SaneRequestId(id)) return id;
  }
  std::array<unsigned char, 12> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    // Unique within this process is enough to tie a record to its request.
    static std::atomic<std::uint64_t> counter{0};
    return fmt::format("req-{:x}-{}", reinterpret_cast<std::uintptr_t>(&req), ++counter);
  }
  std::string id;
  for (unsigned char b : bytes) id += fmt::format("{:02x}", b);
  return id;
}

std::string Actor(const http::Request& req) {
  const Caller& caller = CurrentCaller();
  if (caller.authenticated()) return caller.name;
  return fmt::format("anonymous {}", req.remote_addr);
}

std::string Outcome(const http::Response& res) {
  if (res.status < 400) return "ok";
  auto body = json::parse(res.body, nullptr, false);
  std::string code = "error";
  std::string message = res.body;
  if (!body.is_discarded() && body.is_object() && body.contains("error") &&
      body["error"].is_object()) {
    code = body["error"].value("code", code);
    message = body["error"].value("message", message);
  }
  if (res.status < 500) return fmt::format("denied: {}", code);
  return fmt::format("failed: {}", message);
}

store::AuditEntry MakeAuditEntry(const AuditNote& note, const http::Request& req,
                                 const http::Response& res, TimeMs now) {
  store::AuditEntry e;
  e.time_ms = now;
  e.actor = Actor(req);
  e.tenant = note.tenant;
  e.action = note.action;
  e.object = note.object;
  e.before = Compact(note.before);
  e.after = Compact(note.after);
  e.request_id = res.get_header_value("X-Request-Id");
  e.source = req.remote_addr;
  e.outcome = Outcome(res);
  return e;
}

store::AuditEntry CompleteAuditEntry(store::AuditEntry base, const AuditNote& note) {
  base.tenant = note.tenant;
  base.object = RedactSecrets(note.object);
  base.before = Compact(note.before);
  base.after = Compact(note.after);
  return base;
}

json AuditEntryJson(const store::AuditEntry& e) {
  return json{{"seq", e.seq},
              {"time_ms", e.time_ms},
              {"actor", e.actor},
              {"tenant", e.tenant},
              {"action", e.action},
              {"object", e.object},
              {"before", Parsed(e.before)},
              {"after", Parsed(e.after)},
              {"request_id", e.request_id},
              {"source", e.source},
              {"outcome", e.outcome},
              {"prev_hash", e.prev_hash},
              {"hash", e.hash}};
}

json AuditVerdictJson(const store::AuditVerdict& v) {
  return json{
      {"ok", v.ok},
      {"records", v.records},
      {"head", json{{"seq", v.head.seq}, {"hash", v.head.hash}}},
      {"first_bad_seq", v.first_bad_seq ? json(*v.first_bad_seq) : json(nullptr)},
      {"problem", v.problem},
      {"remembered", json{{"meta", HeadJson(v.meta_head)}, {"file", HeadJson(v.file_head)}}},
      {"notes", v.notes}};
}

}  // namespace berth::server
