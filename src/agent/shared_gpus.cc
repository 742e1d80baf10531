#include "agent/shared_gpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace berth::agent {

Result<SharedGpus> ParseSharedGpus(std::string_view text) {
  SharedGpus out;
  if (text == "all") {
    out.all = true;
    return out;
  }
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    std::uint32_t index = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size()) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("'{}' is not a GPU index; write all, or indices such as 0,1", item));
    }
    out.indices.insert(index);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

Status MarkShared(const SharedGpus& shared, std::vector<model::Gpu>& gpus) {
  for (std::uint32_t i : shared.indices) {
    if (std::none_of(gpus.begin(), gpus.end(), [&](const model::Gpu& g) { return g.index == i; })) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("GPU {} is not on this node ({} GPUs)", i, gpus.size()));
    }
  }
  for (auto& g : gpus) g.sharing = shared.all || shared.indices.contains(g.index);
  return Ok();
}

}  // namespace berth::agent
