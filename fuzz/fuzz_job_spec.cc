// libFuzzer target: model::ParseJobSpec on arbitrary bytes (YAML, and JSON,
// which is YAML). It must return a spec or an error, never crash, hang or
// trip a sanitizer; a refusal names its field in valid UTF-8; an accepted
// spec must satisfy the parser's own limits, its stored JSON form must be
// writable (no byte that is not UTF-8) and read back to the same spec (the
// load profile included) and print the same again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "model/job.h"
#include "model/json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto spec = berth::model::ParseJobSpec(berth::fuzz::AsText(data, size));
  if (!spec) {
    berth::fuzz::CheckRefusal(spec.error());
    return 0;
  }
  using namespace berth::model;
  FUZZ_REQUIRE(spec->replicas >= 1 && spec->replicas <= kMaxReplicas);
  FUZZ_REQUIRE(!spec->name.empty());
  FUZZ_REQUIRE(spec->load.util_pct <= 100 && spec->load.idle_util_pct <= 100 &&
               spec->load.memory_pct <= 100);
  const Resources& r = spec->resources;
  FUZZ_REQUIRE(r.gpus <= kMaxGpusPerReplica && r.cpu_millis <= kMaxCpuMillis);
  FUZZ_REQUIRE(r.memory_bytes <= kMaxMemoryBytes && r.gpu_memory_bytes <= kMaxMemoryBytes &&
               r.gpu_share_bytes <= kMaxMemoryBytes && r.gpu_share_millis < 1000);
  FUZZ_REQUIRE(spec->max_runtime_ms >= 0 && spec->max_runtime_ms <= kMaxDurationMs);
  FUZZ_REQUIRE(spec->load.idle_after_ms >= 0 && spec->load.idle_after_ms <= kMaxDurationMs);
  const auto printed = ToJson(*spec);
  const std::string stored = printed.dump();  // throws (type_error 316) on a byte that is not UTF-8
  const auto again = JobSpecFromJson(nlohmann::json::parse(stored));
  FUZZ_REQUIRE(again.load == spec->load && ToJson(again) == printed);
  return 0;
}
