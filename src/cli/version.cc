#include "cli/version.h"

namespace berth::cli {

std::string_view Version() {
  return BERTH_VERSION;
}

}  // namespace berth::cli
