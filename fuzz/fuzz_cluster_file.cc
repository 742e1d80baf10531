// libFuzzer target: the cluster file parser (agent::ParseSimulatedCluster)
// on arbitrary bytes. A refusal names its field in valid UTF-8. An accepted
// file declares nodes that are what an agent registers with: unique names,
// GPUs indexed 0..n-1 with NVLink peers that exist and link back, a stored
// JSON form that can be written and reads back the same, and a Register
// that survives the wire and that berthd accepts as it is.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "agent/sim_cluster.h"
#include "control/agent_decode.h"
#include "fuzz_check.h"
#include "model/json.h"
#include "proto_convert/node.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto nodes = berth::agent::ParseSimulatedCluster(berth::fuzz::AsText(data, size));
  if (!nodes) {
    berth::fuzz::CheckRefusal(nodes.error());
    return 0;
  }
  FUZZ_REQUIRE(!nodes->empty());
  std::set<std::string> names;
  for (const auto& n : *nodes) {
    FUZZ_REQUIRE(names.insert(n.name).second);
    FUZZ_REQUIRE(n.cpus >= 1 && n.memory_bytes > 0);
    FUZZ_REQUIRE(n.gpus.size() <= 64);
    for (std::size_t i = 0; i < n.gpus.size(); ++i) {
      const auto& g = n.gpus[i];
      FUZZ_REQUIRE(g.index == i);
      for (const auto& p : g.nvlink_peers) {
        FUZZ_REQUIRE(p.index < n.gpus.size() && p.index != g.index);
        bool back = false;
        for (const auto& q : n.gpus[p.index].nvlink_peers) back = back || q.index == g.index;
        FUZZ_REQUIRE(back);
      }
    }
    const auto stored = berth::model::ToJson(n);
    const std::string text = stored.dump();  // throws on a byte that is not UTF-8
    FUZZ_REQUIRE(berth::model::ToJson(
                     berth::model::NodeInfoFromJson(nlohmann::json::parse(text))) == stored);
    // The agent's Register, as bytes and back, is the node berthd keeps.
    berth::v1::NodeInfo wire;
    berth::proto_convert::NodeToProto(n, &wire);
    berth::v1::NodeInfo received;
    FUZZ_REQUIRE(received.ParseFromString(wire.SerializeAsString()));
    const auto kept = berth::proto_convert::NodeFromProto(received);
    FUZZ_REQUIRE(berth::server::CheckNodeInventory(kept).has_value());
    FUZZ_REQUIRE(berth::model::ToJson(kept) == stored);
  }
  return 0;
}
