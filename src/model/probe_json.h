// A service's probe in JSON (ms and counts; {} for none), as a replica's
// job spec and the agent's order record keep it. Header-only, so that
// berth-shim, which links no model library, reads order records too.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/service.h"

namespace berth::model {

inline nlohmann::json ToJson(const Probe& p) {
  using nlohmann::json;
  json j{{"period_ms", p.period_ms},
         {"timeout_ms", p.timeout_ms},
         {"success_threshold", p.success_threshold},
         {"failure_threshold", p.failure_threshold}};
  switch (p.kind) {
    case ProbeKind::kHttp:
      j["http"] = p.http_path;
      break;
    case ProbeKind::kTcp:
      j["tcp"] = p.tcp_port;
      break;
    case ProbeKind::kCommand:
      j["command"] = p.command;
      break;
    case ProbeKind::kNone:
      return json::object();
  }
  return j;
}

inline Probe ProbeFromJson(const nlohmann::json& j) {
  Probe p;
  if (!j.is_object()) return p;
  if (auto h = j.find("http"); h != j.end() && h->is_string()) {
    p.kind = ProbeKind::kHttp;
    p.http_path = h->get<std::string>();
  } else if (auto t = j.find("tcp"); t != j.end() && t->is_number_unsigned()) {
    p.kind = ProbeKind::kTcp;
    p.tcp_port = t->get<std::uint32_t>();
  } else if (auto c = j.find("command"); c != j.end() && c->is_array()) {
    p.kind = ProbeKind::kCommand;
    p.command = c->get<std::vector<std::string>>();
  } else {
    return p;
  }
  p.period_ms = j.value("period_ms", p.period_ms);
  p.timeout_ms = j.value("timeout_ms", p.timeout_ms);
  p.success_threshold = j.value("success_threshold", p.success_threshold);
  p.failure_threshold = j.value("failure_threshold", p.failure_threshold);
  return p;
}

}  // namespace berth::model
