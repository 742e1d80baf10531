// berth-model-server, the model server Berth ships for tests and demos of
// inference services, run as a real process on loopback: it becomes ready
// after its model-load time (or never, as a broken version does), answers
// completions, and behaves like an LLM engine under load: a bounded batch,
// requests waiting beyond it (counted in the vLLM-style gauge an autoscaler
// reads), and latency that grows with the batch.
#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <regex>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

class ModelServerTest : public IntegrationTest {
 protected:
  // The server on a fresh port, with `args` after it.
  std::pair<Process*, int> StartServer(const std::string& log, std::vector<std::string> args) {
    const int port = FreePort();
    args.insert(args.begin(), {"--port", std::to_string(port)});
    servers_.push_back(
        std::make_unique<Process>(BinDir() / "berth-model-server", args, dir_ / log));
    return {servers_.back().get(), port};
  }

  // The value of `metric` in the server's /metrics, -1 when absent.
  static double Gauge(const Http& http, const std::string& metric) {
    auto reply = http.Get("/metrics");
    if (reply.status != 200) return -1;
    std::smatch m;
    const std::regex line("(^|\\n)" + metric + "\\{[^}]*\\} ([0-9.e+-]+)");
    if (!std::regex_search(reply.text, m, line)) return -1;
    return std::stod(m[2].str());
  }

  std::vector<std::unique_ptr<Process>> servers_;
};

TEST_F(ModelServerTest, IsReadyAfterItsLoadTimeAndABrokenVersionNeverIs) {
  auto [loading, port] = StartServer("loading.log", {"--load-ms", "1500", "--model-version", "v2"});
  auto [broken, broken_port] =
      StartServer("broken.log", {"--never-ready", "--model-version", "v3"});
  Http http(port);
  Http broken_http(broken_port);
  ASSERT_TRUE(WaitFor([&] { return http.Get("/health").status > 0; }, 10s))
      << ReadFile(dir_ / "loading.log");
  EXPECT_EQ(http.Get("/health").status, 503);
  EXPECT_EQ(http.Post("/v1/completions", R"({"prompt":"hi"})", "application/json").status, 503);
  EXPECT_TRUE(WaitFor([&] { return http.Get("/health").status == 200; }, 10s));

  auto answer = http.Post("/v1/completions", R"({"prompt":"hello there","max_tokens":4})",
                          "application/json");
  ASSERT_EQ(answer.status, 200) << answer.text;
  EXPECT_EQ(answer.body.at("version"), "v2");
  EXPECT_EQ(answer.body.at("usage").at("completion_tokens"), 4);
  EXPECT_EQ(http.Get("/v1/models").body.at("data").at(0).at("id"), "test-model");
  EXPECT_EQ(Gauge(http, "vllm:request_success_total"), 1);

  // Bad input names its field and counts as a failure, not a success.
  auto bad = http.Post("/v1/completions", R"({"max_tokens":0})", "application/json");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body.at("error").at("field"), "max_tokens") << bad.text;
  EXPECT_EQ(http.Post("/v1/completions", "not json", "application/json").status, 400);
  EXPECT_EQ(Gauge(http, "berth_model_server_request_failures_total"), 2);
  EXPECT_EQ(Gauge(http, "vllm:request_success_total"), 1);

  // Long after the first became ready, the broken one still is not.
  EXPECT_EQ(broken_http.Get("/health").status, 503);
  EXPECT_NE(broken_http.Get("/health").text.find("never ready"), std::string::npos);

  loading->Kill(SIGTERM);
  EXPECT_EQ(loading->Wait(10s), 0) << "a clean stop on SIGTERM";
}

TEST_F(ModelServerTest, RequestsBeyondItsBatchWaitAndLatencyGrowsWithLoad) {
  auto [server, port] =
      StartServer("engine.log", {"--max-batch", "2", "--ttft-ms", "40", "--itl-ms", "10",
                                 "--full-batch-slowdown-pct", "100"});
  Http http(port, 30s);
  ASSERT_TRUE(WaitFor([&] { return http.Get("/health").status == 200; }, 10s))
      << ReadFile(dir_ / "engine.log");
  const std::string body = R"({"prompt":"count to twenty","max_tokens":20})";
  auto alone = http.Post("/v1/completions", body, "application/json");
  ASSERT_EQ(alone.status, 200) << alone.text;
  const auto alone_ms = alone.body.at("timing").at("total_ms").get<std::int64_t>();
  EXPECT_GE(alone_ms, 240) << "40 ms first token + 20 tokens x 10 ms";
  EXPECT_EQ(alone.body.at("timing").at("batch"), 1);

  // Eight at once on a batch of two: six wait, the gauge says so, and the
  // last answered waited for three batches ahead of it.
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < 8; ++i) {
    replies.push_back(std::async(std::launch::async, [&] {
      return Http(port, 30s).Post("/v1/completions", body, "application/json");
    }));
  }
  double most_waiting = 0;
  double most_running = 0;
  WaitFor(
      [&] {
        most_waiting = std::max(most_waiting, Gauge(http, "vllm:num_requests_waiting"));
        most_running = std::max(most_running, Gauge(http, "vllm:num_requests_running"));
        return most_waiting >= 5;
      },
      5s, 10ms);
  std::int64_t slowest = 0;
  for (auto& f : replies) {
    Reply r = f.get();
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_LE(r.body.at("timing").at("batch").get<int>(), 2);
    slowest = std::max(slowest, r.body.at("timing").at("total_ms").get<std::int64_t>());
  }
  EXPECT_GE(most_waiting, 5) << "8 requests on a batch of 2";
  EXPECT_EQ(most_running, 2);
  // A full batch of two is twice as slow per request (480 ms), and the last
  // of eight waited for three rounds before its own: at least ~1.9 s, the
  // engine's sleeps being floors.
  EXPECT_GE(slowest, 1700) << "alone: " << alone_ms << " ms";
  EXPECT_EQ(Gauge(http, "vllm:num_requests_waiting"), 0);
  EXPECT_EQ(Gauge(http, "vllm:request_success_total"), 9);
}

}  // namespace
}  // namespace berth::it
