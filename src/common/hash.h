// FNV-1a (32 bit): a small, stable hash for names that must map to the same
// number on every host and in every version (derived run identities, an
// agent's cgroup scope). Not for security and not for hash tables.
#pragma once

#include <cstdint>
#include <string_view>

namespace berth {

constexpr std::uint32_t Fnv1a32(std::string_view text) {
  std::uint32_t h = 2166136261U;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619U;
  }
  return h;
}

}  // namespace berth
