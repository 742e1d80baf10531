#include "agent/gpu_model.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>

namespace berth::agent {
namespace {

// Memory sizes (GB) GPUs are labelled with. Rounding to the nearest label
// rather than to the nearest GiB keeps "H100-80GB" stable across driver
// versions that reserve slightly different amounts.
constexpr std::array<int, 27> kMarketingGb{1,  2,  3,   4,   5,   6,   8,   10,  11,
                                           12, 16, 20,  24,  32,  40,  48,  64,  80,
                                           94, 96, 128, 141, 144, 180, 192, 256, 288};

std::vector<std::string> SplitWords(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

bool IsBrandWord(std::string_view w) {
  return w == "NVIDIA" || w == "Tesla" || w == "GeForce" || w == "Quadro";
}

int MarketingGb(std::uint64_t bytes) {
  double gib = static_cast<double>(bytes) / static_cast<double>(1ULL << 30);
  if (gib > kMarketingGb.back() * 1.1) return static_cast<int>(std::lround(gib));
  int best = kMarketingGb.front();
  for (int gb : kMarketingGb) {
    if (std::abs(gib - gb) < std::abs(gib - best)) best = gb;
  }
  return best;
}

}  // namespace

std::string NormaliseGpuModel(std::string_view name, std::uint64_t memory_bytes) {
  std::vector<std::string> words = SplitWords(name);
  std::size_t i = 0;
  while (i < words.size() && IsBrandWord(words[i])) ++i;
  std::string family;
  if (i < words.size()) {
    family = words[i];
    // "RTX 4090", "RTX A6000": the series word alone would merge unlike cards.
    if ((family == "RTX" || family == "GTX" || family == "TITAN") && i + 1 < words.size()) {
      family += words[i + 1];
    }
    // "A100-SXM4-40GB": the family ends at the first dash.
    family = family.substr(0, family.find('-'));
  }
  if (family.empty()) family = "unknown";
  if (memory_bytes == 0) return family;
  return family + "-" + std::to_string(MarketingGb(memory_bytes)) + "GB";
}

void AssignNvlinkIslands(std::vector<model::Gpu>& gpus) {
  std::map<std::uint32_t, std::size_t> pos;  // GPU index -> position in `gpus`
  for (std::size_t p = 0; p < gpus.size(); ++p) pos[gpus[p].index] = p;
  std::vector<std::size_t> parent(gpus.size());
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](std::size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (std::size_t p = 0; p < gpus.size(); ++p) {
    for (const auto& peer : gpus[p].nvlink_peers) {
      auto it = pos.find(peer.index);
      if (it == pos.end()) continue;
      std::size_t a = find(p);
      std::size_t b = find(it->second);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  }
  std::map<std::size_t, std::uint32_t> island_of_root;
  for (std::size_t p = 0; p < gpus.size(); ++p) {
    auto [it, inserted] =
        island_of_root.try_emplace(find(p), static_cast<std::uint32_t>(island_of_root.size()));
    gpus[p].nvlink_island = it->second;
  }
}

}  // namespace berth::agent
