#include "modelserver/engine.h"

#include <algorithm>

namespace berth::modelserver {

std::int64_t ServiceTimeMs(const EngineParams& p, std::uint32_t running,
                           std::uint32_t prompt_tokens, std::uint32_t output_tokens) {
  const std::uint32_t batch = std::max<std::uint32_t>(p.max_batch, 1);
  const std::uint32_t others = std::min(std::max<std::uint32_t>(running, 1), batch) - 1;
  // Slowdown in per-mille: 1000 alone, 1000 + slowdown at a full batch.
  const std::int64_t slow_permille =
      1000 + (batch > 1
                  ? static_cast<std::int64_t>(p.full_batch_slowdown_pct) * 10 * others / (batch - 1)
                  : 0);
  const std::int64_t first = p.ttft_ms + p.prefill_us_per_token * prompt_tokens / 1000;
  const std::int64_t decode = p.itl_ms * static_cast<std::int64_t>(output_tokens);
  return (first + decode) * slow_permille / 1000;
}

double KvCacheUsage(const EngineParams& p, std::uint64_t tokens_held) {
  if (p.kv_cache_tokens == 0) return 1.0;
  return std::min(1.0, static_cast<double>(tokens_held) / static_cast<double>(p.kv_cache_tokens));
}

std::uint32_t PromptTokens(const std::string& prompt) {
  return std::max<std::uint32_t>(1, static_cast<std::uint32_t>((prompt.size() + 3) / 4));
}

}  // namespace berth::modelserver
