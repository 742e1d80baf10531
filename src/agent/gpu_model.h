// Provider-independent GPU inventory rules: how a marketing name becomes the
// normalised model the scheduler matches on, and how NVLink peer lists become
// island ids. Pure functions, so both providers and the tests share them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/node.h"

namespace berth::agent {

// "NVIDIA H100 80GB HBM3", 80 GiB -> "H100-80GB"; "Tesla V100-SXM2-32GB" ->
// "V100-32GB". Drops the vendor/brand words, keeps the family token and
// appends the memory rounded to the nearest size GPUs are sold with (NVML
// reports a little less than the label: 79.6 GiB for an 80 GB card). A zero
// memory size yields the family alone.
std::string NormaliseGpuModel(std::string_view name, std::uint64_t memory_bytes);

// Sets nvlink_island on every GPU: connected components over nvlink_peers
// (peers name GPUs by index). Ids are dense, numbered in GPU order; a GPU
// without NVLink gets an island of its own.
void AssignNvlinkIslands(std::vector<model::Gpu>& gpus);

}  // namespace berth::agent
