// Simulated inventory: a YAML file that declares nodes and their GPUs, so a
// laptop (or CI) can run berthd and agents against an H100 cluster that does
// not exist. The format is documented field by field in docs/inventory.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/node.h"

namespace berth::agent {

// Parses a cluster file. Every error is kInvalidArgument with `field` set to
// the offending path ("nodes[1].gpus.count") and a message that names the line
// and what is allowed. Nothing is returned unless the whole file is valid.
Result<std::vector<model::NodeInfo>> ParseSimulatedCluster(std::string_view yaml);
Result<std::vector<model::NodeInfo>> LoadSimulatedCluster(const std::filesystem::path& path);

// The node called `name`, or the only node when `name` is empty and the
// cluster has exactly one.
Result<model::NodeInfo> SelectSimulatedNode(const std::vector<model::NodeInfo>& nodes,
                                            std::string_view name);

// `count` simulated GPUs of one model: UUID "SIM-<node>-<index>" (stable
// across restarts), bus id "00000000:<index+1>:00.0", health healthy, NUMA
// unknown. Each listed island becomes a clique of NVLink peers (1 link per
// pair); a GPU in no island stands alone.
std::vector<model::Gpu> SimulatedGpus(std::string_view node_name, std::string_view model,
                                      std::uint64_t memory_bytes, std::uint32_t count,
                                      const std::vector<std::vector<std::uint32_t>>& islands);
void LinkIslands(std::vector<model::Gpu>& gpus,
                 const std::vector<std::vector<std::uint32_t>>& islands);

}  // namespace berth::agent
