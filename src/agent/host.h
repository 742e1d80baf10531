// What the agent can learn about its own host without any GPU library: name,
// CPU count and memory. These read the real machine, so they live at the edge
// (agent start-up), never inside logic that tests drive.
#pragma once

#include <cstdint>
#include <string>

#include "model/node.h"

namespace berth::agent {

std::string HostName();           // gethostname(); "localhost" if that fails
std::uint32_t HostCpuCount();     // std::thread::hardware_concurrency(), at least 1
std::uint64_t HostMemoryBytes();  // MemTotal from /proc/meminfo; 0 if unreadable

// This host as a GPU-less node: name and hostname from HostName(), cpus and
// memory from the host. The agent adds GPUs from its provider.
model::NodeInfo LocalHostNode();

}  // namespace berth::agent
