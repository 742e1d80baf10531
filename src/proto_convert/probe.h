// A service's probe (model/service.h) and its wire form on the agent stream
// (berth.v1.Probe in StartRun): berthd writes it, the agent reads it back.
#pragma once

#include "berth/v1/agent.pb.h"
#include "model/service.h"

namespace berth::proto_convert {

// A probe of kind kNone leaves `out` unset.
void ProbeToProto(const model::Probe& probe, v1::Probe* out);
// An unset probe reads as kind kNone.
model::Probe ProbeFromProto(const v1::Probe& in);

}  // namespace berth::proto_convert
