// Conversions between the inventory value types (model/node.h) and their wire
// form on the agent stream (berth.v1.NodeInfo). Both directions live here so
// berthd and the agent agree on one mapping.
#pragma once

#include "berth/v1/agent.pb.h"
#include "model/node.h"

namespace berth::agent {

void ToProto(const model::NodeInfo& node, v1::NodeInfo* out);
model::NodeInfo FromProto(const v1::NodeInfo& node);

}  // namespace berth::agent
