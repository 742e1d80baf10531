// The all-in-one berthd a benchmark drives (berth-submit-bench,
// berth-list-bench, berth-load-bench): the integration tests' process
// harness, started on its own temp dir and waited on until its simulated
// node is Ready.
#pragma once

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "integration/harness.h"

namespace berth::bench {

// Starts berthd (`binary`, or the one beside the benchmark when empty) with
// `extra_args`. Null when it did not come up: its log is printed and `dir`
// kept for a look.
inline std::unique_ptr<it::Berthd> StartBerthd(it::TempDir& dir, const std::string& binary,
                                               std::vector<std::string> extra_args = {}) {
  using namespace std::chrono_literals;
  it::BerthdOptions options;
  options.binary = binary;
  options.extra_args = std::move(extra_args);
  auto berthd = std::make_unique<it::Berthd>(dir, options);
  if (!berthd->Start() || !berthd->WaitForNode("Ready", 30s)) {
    std::cerr << "berthd did not come up; its log:\n" << berthd->log();
    dir.keep();
    return nullptr;
  }
  return berthd;
}

}  // namespace berth::bench
