// The test model server's engine: how an LLM serving engine's latency and
// queue behave under load, reduced to what an autoscaler and a gateway see.
// At most `max_batch` requests decode at once; the rest wait in arrival
// order. A request's time is its time to first token (the prompt's prefill)
// plus one inter-token latency per output token, and every token is slower
// the fuller the batch is (decode steps share the GPU), as vLLM's are.
//
// Pure arithmetic here (docs/services.md, "The test model server"); the
// server in model_server_main.cc keeps the counts and sleeps for the time.
#pragma once

#include <cstdint>
#include <string>

namespace berth::modelserver {

struct EngineParams {
  std::uint32_t max_batch = 8;             // requests decoding at once
  std::int64_t ttft_ms = 20;               // time to first token with an empty batch
  std::int64_t prefill_us_per_token = 50;  // more prompt, longer first token
  std::int64_t itl_ms = 5;                 // per output token with an empty batch
  // How much slower a token is in a full batch than alone, in percent:
  // 100 means twice as slow at max_batch.
  std::uint32_t full_batch_slowdown_pct = 100;
  // KV-cache capacity in tokens: what `vllm:gpu_cache_usage_perc` divides by.
  std::uint64_t kv_cache_tokens = 65'536;
};

// The time, in ms, that a request of `prompt_tokens` in and `output_tokens`
// out takes once admitted beside `running - 1` others (running >= 1).
std::int64_t ServiceTimeMs(const EngineParams& p, std::uint32_t running,
                           std::uint32_t prompt_tokens, std::uint32_t output_tokens);

// The share of the KV cache the running requests hold, 0..1.
double KvCacheUsage(const EngineParams& p, std::uint64_t tokens_held);

// Prompt tokens of a text, as the engine counts them: about four bytes to a
// token, at least one.
std::uint32_t PromptTokens(const std::string& prompt);

}  // namespace berth::modelserver
