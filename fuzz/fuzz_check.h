// What every fuzz target asks of its parser beyond not crashing: a refusal
// is kInvalidArgument, and its message and field are valid UTF-8 (berthd
// writes both into a JSON error; any other byte there would make it a 500).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/status.h"
#include "common/utf8.h"

namespace berth::fuzz {

inline std::string_view AsText(const std::uint8_t* data, std::size_t size) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): bytes as text
  return {reinterpret_cast<const char*>(data), size};
}

inline void CheckRefusal(const Error& e) {
  if (e.code == Code::kInvalidArgument && ValidUtf8(e.message) && ValidUtf8(e.field)) return;
  std::fprintf(stderr, "bad refusal: code %d, field '%s', message '%s'\n", static_cast<int>(e.code),
               EscapeInvalidUtf8(e.field).c_str(), EscapeInvalidUtf8(e.message).c_str());
  std::abort();
}

}  // namespace berth::fuzz

// Aborts, naming the invariant and its line, unless `cond` holds.
#define FUZZ_REQUIRE(cond)                                                                \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "invariant failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (false)
