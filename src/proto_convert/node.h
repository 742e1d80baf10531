// The node inventory (model/node.h) and its wire form on the agent stream
// (berth.v1.NodeInfo, berth.v1.GpuHealthChanged), both directions in one
// place so the agent and berthd agree on one mapping and one health rule.
#pragma once

#include <string>
#include <string_view>

#include "berth/v1/agent.pb.h"
#include "model/node.h"

namespace berth::proto_convert {

// A GPU health as the wire carries it, read by the one rule: "healthy" and
// "unhealthy" (model::HealthName) are known; anything else, the empty
// string included, is unhealthy, because work must never be placed on a GPU
// whose state berthd cannot read. An agent newer or older than berthd may
// send a value berthd does not know, so `detail` then says so, quoting the
// value, and an operator sees why the GPU takes no work (berth node,
// berth_gpus_unhealthy).
struct WireHealth {
  model::Health health = model::Health::kUnhealthy;
  std::string detail;  // the agent's detail; for an unknown value, why it is unhealthy
  bool known = false;  // the value was "healthy" or "unhealthy"
};
WireHealth HealthFromWire(std::string_view health, std::string_view detail);

// A GPU's health change as the agent reports it (index, uuid, health,
// detail; the caller sets at_ms).
void HealthChangeToProto(const model::Gpu& gpu, v1::GpuHealthChanged* out);

void NodeToProto(const model::NodeInfo& node, v1::NodeInfo* out);

// Every field of `in`, GPUs sorted by index, each GPU's health by the rule
// above. NodeFromProto(NodeToProto(n)) == n for a node whose GPUs are in
// index order.
model::NodeInfo NodeFromProto(const v1::NodeInfo& in);

}  // namespace berth::proto_convert
