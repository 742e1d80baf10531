// The CLI's version, taken from the CMake project version at build time.
#pragma once

#include <string_view>

namespace berth::cli {

std::string_view Version();

}  // namespace berth::cli
