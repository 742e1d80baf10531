// berth-model-server: the model server Berth ships for tests and demos of
// inference services. It answers completions over HTTP on its port with an
// LLM engine's behaviour under load (modelserver/engine.h: a bounded batch,
// a waiting queue, latency that grows with the batch and the tokens), says
// when it is ready after a model-load time, and exposes the gauges vLLM
// exposes (`vllm:num_requests_waiting`, ...) in Prometheus format, so the
// gateway, the probes and the autoscaler meet what a real engine gives them.
//
//   GET  /health          200 once loaded; 503 while loading (or never,
//                         with --never-ready: a version whose rollout must
//                         pause)
//   GET  /v1/models       the model served, OpenAI-style
//   POST /v1/completions  {"prompt": "...", "max_tokens": 16}
//   GET  /metrics         engine gauges and counters
//
// On a GPU host the same service spec runs a real engine (vLLM's OpenAI
// server answers the same routes): docs/services.md.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "http/server.h"
#include "modelserver/engine.h"

namespace {

using berth::modelserver::EngineParams;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// The engine's counts: requests decoding and waiting, tokens held, outcomes.
class Engine {
 public:
  explicit Engine(EngineParams p) : p_(p) {}

  // Waits for a slot in the batch; the number decoding once admitted.
  std::uint32_t Admit(std::uint64_t tokens) {
    std::unique_lock lock(mu_);
    ++waiting_;
    slot_free_.wait(lock, [&] { return running_ < p_.max_batch; });
    --waiting_;
    ++running_;
    tokens_held_ += tokens;
    return running_;
  }

  void Finish(std::uint64_t tokens) {
    {
      std::lock_guard lock(mu_);
      --running_;
      tokens_held_ -= tokens;
      ++succeeded_;
    }
    slot_free_.notify_one();
  }

  void CountFailure() {
    std::lock_guard lock(mu_);
    ++failed_;
  }

  std::string Metrics(const std::string& model, const std::string& version) const {
    std::lock_guard lock(mu_);
    const std::string label = fmt::format("model_name=\"{}\"", Escape(model));
    std::string out;
    auto gauge = [&](std::string_view name, std::string_view help, auto value) {
      out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0}{{{2}}} {3}\n", name, help, label,
                         value);
    };
    auto counter = [&](std::string_view name, std::string_view help, std::uint64_t value) {
      out += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0}{{{2}}} {3}\n", name, help, label,
                         value);
    };
    gauge("vllm:num_requests_running", "Requests decoding now.", running_);
    gauge("vllm:num_requests_waiting", "Requests waiting for a place in the batch.", waiting_);
    gauge("vllm:gpu_cache_usage_perc", "Share of the KV cache held, 0 to 1.",
          berth::modelserver::KvCacheUsage(p_, tokens_held_));
    counter("vllm:request_success_total", "Requests answered.", succeeded_);
    counter("berth_model_server_request_failures_total", "Requests refused as malformed.", failed_);
    out += fmt::format(
        "# HELP berth_model_server_info The model and version served.\n"
        "# TYPE berth_model_server_info gauge\n"
        "berth_model_server_info{{model=\"{}\",version=\"{}\"}} 1\n",
        Escape(model), Escape(version));
    return out;
  }

  const EngineParams& params() const { return p_; }

 private:
  // A Prometheus label value: backslash, quote and newline escaped.
  static std::string Escape(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '\\' || c == '"') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    return out;
  }

  EngineParams p_;
  mutable std::mutex mu_;
  std::condition_variable slot_free_;
  std::uint32_t running_ = 0;
  std::uint32_t waiting_ = 0;
  std::uint64_t tokens_held_ = 0;
  std::uint64_t succeeded_ = 0;
  std::uint64_t failed_ = 0;
};

void Error(berth::http::Response& res, int status, std::string_view field, std::string message) {
  res.status = status;
  res.set_content(json{{"error", {{"field", field}, {"message", std::move(message)}}}}.dump(),
                  "application/json");
}

constexpr std::uint32_t kMaxOutputTokens = 4096;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-model-server: an LLM-like model server for tests and demos"};
  std::string host = "127.0.0.1";
  int port = 0;
  std::string model = "test-model";
  std::string version = "v1";
  std::int64_t load_ms = 0;
  bool never_ready = false;
  int max_queue = 248;
  EngineParams p;
  app.add_option("--host", host, "address to listen on");
  app.add_option("--port", port, "port to listen on (default: $PORT, else any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--model", model, "model name served");
  app.add_option("--model-version", version, "version reported in every answer and metric");
  app.add_option("--load-ms", load_ms, "time to load the model before /health says ready")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{3'600'000}));
  app.add_flag("--never-ready", never_ready, "never become ready (a broken version)");
  app.add_option("--max-batch", p.max_batch, "requests decoding at once")
      ->check(CLI::Range(1, 1024));
  app.add_option("--max-queue", max_queue, "requests that may wait beyond the batch")
      ->check(CLI::Range(0, 4096));
  app.add_option("--ttft-ms", p.ttft_ms, "time to first token, alone")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{60'000}));
  app.add_option("--itl-ms", p.itl_ms, "time per output token, alone")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{10'000}));
  app.add_option("--full-batch-slowdown-pct", p.full_batch_slowdown_pct,
                 "how much slower a token is in a full batch, in percent")
      ->check(CLI::Range(0, 10'000));
  app.add_option("--kv-cache-tokens", p.kv_cache_tokens, "KV-cache capacity in tokens")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  CLI11_PARSE(app, argc, argv);
  if (port == 0) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    if (const char* env = std::getenv("PORT"); env != nullptr && *env != '\0') {
      port = std::atoi(env);
      if (port <= 0 || port > 65535) {
        std::cerr << "berth-model-server: PORT must be a port number from 1 to 65535\n";
        return 2;
      }
    }
  }

  // Blocked before any thread starts: only the sigwait below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Engine engine(p);
  const auto started = SteadyClock::now();
  auto ready = [&] {
    return !never_ready && SteadyClock::now() - started >= std::chrono::milliseconds(load_ms);
  };

  berth::http::ServerOptions options;
  // One handler thread per request in the batch or its queue: a waiting
  // request waits in the engine, where the metrics count it.
  options.workers = static_cast<int>(p.max_batch) + max_queue;
  options.max_body_bytes = std::size_t{1024} * 1024;
  berth::http::Server server(options);
  server.set_inline_paths({"/health", "/metrics"});
  server.Get("/health", [&](const berth::http::Request&, berth::http::Response& res) {
    if (ready()) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content(never_ready ? "never ready\n" : "loading\n", "text/plain");
    }
  });
  server.Get("/metrics", [&](const berth::http::Request&, berth::http::Response& res) {
    res.set_content(engine.Metrics(model, version), "text/plain; version=0.0.4");
  });
  server.Get("/v1/models", [&](const berth::http::Request&, berth::http::Response& res) {
    res.set_content(
        json{{"object", "list"}, {"data", {{{"id", model}, {"version", version}}}}}.dump(),
        "application/json");
  });
  server.Post("/v1/completions", [&](const berth::http::Request& req, berth::http::Response& res) {
    if (!ready()) {
      Error(res, 503, "", "the model is still loading");
      return;
    }
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      engine.CountFailure();
      Error(res, 400, "", "the body must be a JSON object such as {\"prompt\": \"hi\"}");
      return;
    }
    std::string prompt;
    if (auto it = body.find("prompt"); it != body.end()) {
      if (!it->is_string()) {
        engine.CountFailure();
        Error(res, 400, "prompt", "must be a string");
        return;
      }
      prompt = it->get<std::string>();
    }
    std::uint32_t output = 16;
    if (auto it = body.find("max_tokens"); it != body.end()) {
      if (!it->is_number_unsigned() || it->get<std::uint64_t>() == 0 ||
          it->get<std::uint64_t>() > kMaxOutputTokens) {
        engine.CountFailure();
        Error(res, 400, "max_tokens",
              fmt::format("must be a whole number from 1 to {}", kMaxOutputTokens));
        return;
      }
      output = it->get<std::uint32_t>();
    }
    const std::uint32_t input = berth::modelserver::PromptTokens(prompt);
    const auto arrived = SteadyClock::now();
    const std::uint32_t running = engine.Admit(input + output);
    const std::int64_t ms =
        berth::modelserver::ServiceTimeMs(engine.params(), running, input, output);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    engine.Finish(input + output);
    const auto total_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - arrived).count();
    res.set_header("X-Model-Version", version);
    res.set_content(json{{"object", "text_completion"},
                         {"model", model},
                         {"version", version},
                         {"choices", {{{"index", 0}, {"text", std::string(output, '.')}}}},
                         {"usage",
                          {{"prompt_tokens", input},
                           {"completion_tokens", output},
                           {"total_tokens", input + output}}},
                         {"timing", {{"batch", running}, {"total_ms", total_ms}}},
                         // Who called, as Berth's gateway says (X-Berth-User),
                         // and whether a credential reached the replica.
                         {"caller",
                          {{"user", req.get_header_value("X-Berth-User")},
                           {"authorization", req.has_header("Authorization")}}}}
                        .dump(),
                    "application/json");
  });

  auto bound = server.Bind(host, static_cast<std::uint16_t>(port));
  if (!bound) {
    std::cerr << "berth-model-server: " << bound.error().message << "\n";
    return 1;
  }
  server.Start();
  std::cout << fmt::format("berth-model-server {} {} listening on {}:{}", model, version, host,
                           *bound)
            << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  server.Stop();
  return 0;
}
