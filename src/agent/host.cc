#include "agent/host.h"

#include <unistd.h>

#include <climits>
#include <fstream>
#include <sstream>
#include <thread>

namespace berth::agent {

std::string HostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::uint32_t HostCpuCount() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

std::uint64_t HostMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    std::uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

model::NodeInfo LocalHostNode() {
  model::NodeInfo node;
  node.name = HostName();
  node.hostname = node.name;
  node.cpus = HostCpuCount();
  node.memory_bytes = HostMemoryBytes();
  return node;
}

}  // namespace berth::agent
