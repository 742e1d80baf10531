#include "proto_convert/probe.h"

namespace berth::proto_convert {

void ProbeToProto(const model::Probe& probe, v1::Probe* out) {
  switch (probe.kind) {
    case model::ProbeKind::kNone:
      return;
    case model::ProbeKind::kHttp:
      out->set_http_path(probe.http_path);
      break;
    case model::ProbeKind::kTcp:
      out->set_tcp_port(probe.tcp_port);
      break;
    case model::ProbeKind::kCommand:
      for (const auto& a : probe.command) out->mutable_command()->add_argv(a);
      break;
  }
  out->set_period_ms(probe.period_ms);
  out->set_timeout_ms(probe.timeout_ms);
  out->set_success_threshold(probe.success_threshold);
  out->set_failure_threshold(probe.failure_threshold);
}

model::Probe ProbeFromProto(const v1::Probe& in) {
  model::Probe p;
  switch (in.check_case()) {
    case v1::Probe::kHttpPath:
      p.kind = model::ProbeKind::kHttp;
      p.http_path = in.http_path();
      break;
    case v1::Probe::kTcpPort:
      p.kind = model::ProbeKind::kTcp;
      p.tcp_port = in.tcp_port();
      break;
    case v1::Probe::kCommand:
      p.kind = model::ProbeKind::kCommand;
      p.command.assign(in.command().argv().begin(), in.command().argv().end());
      break;
    case v1::Probe::CHECK_NOT_SET:
      return p;
  }
  // Bounds as the service spec's, so that a bad message cannot make the
  // agent probe in a busy loop or never.
  if (in.period_ms() >= 100) p.period_ms = std::min<std::int64_t>(in.period_ms(), 3'600'000);
  if (in.timeout_ms() >= 1) p.timeout_ms = std::min(in.timeout_ms(), p.period_ms);
  if (in.success_threshold() >= 1) p.success_threshold = std::min(in.success_threshold(), 100U);
  if (in.failure_threshold() >= 1) p.failure_threshold = std::min(in.failure_threshold(), 100U);
  return p;
}

}  // namespace berth::proto_convert
