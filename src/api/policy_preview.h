// Policy preview (POST /v1/policy/preview, `berth policy preview`): replays
// the recent job history through berth-sim's engine and the scheduling core
// twice on one virtual clock, under the active policy and under a proposed
// one, on the current node inventory, and compares per tenant what each
// would have given: queueing delay, completion time, GPU-hours and cost.
// Pure: it reads its inputs and writes nothing.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sched/snapshot.h"
#include "sim/history.h"
#include "store/store.h"

namespace berth::server {

// Price per GPU-hour by GPU model, and for any other model. Berth has no
// price table yet; until it does, a preview is priced only when asked.
struct GpuPrices {
  std::map<std::string, double> per_model;
  std::optional<double> fallback;  // "default"
  bool empty() const { return per_model.empty() && !fallback; }
};

// The `prices` query parameter: "H100-80GB:3.5,A100-80GB:2,default:1.2".
Result<GpuPrices> ParsePrices(std::string_view text);

struct PreviewInputs {
  const sim::History* history = nullptr;  // the window to replay
  std::vector<sched::NodeView> nodes;     // the current inventory
  const store::PolicyVersion* current = nullptr;
  const store::PolicyVersion* proposed = nullptr;  // validated, not applied
  GpuPrices prices;
  std::string window;  // as asked ("7d"), for the answer
};

// The replay step, fine enough that a job placed in a pass of berthd (every
// 200 ms, or at once on submit) and in the replay start at nearly the same
// time.
inline constexpr TimeMs kPreviewCycleMs = 1'000;

// The answer of POST /v1/policy/preview (docs/api.md#policy-preview).
Result<nlohmann::json> PreviewPolicyChange(const PreviewInputs& in);

}  // namespace berth::server
