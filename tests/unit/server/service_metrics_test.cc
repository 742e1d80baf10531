// /metrics' inference-service families from fabricated views: replicas for
// every service, the gateway's families only for services that have them
// (absent altogether without a gateway), labels tenant and service, the
// latency histogram's buckets in seconds in ascending order with +Inf last.
#include "api/service_metrics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace berth::server {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

ServiceMetricsView Bare(std::string tenant, std::string service) {
  ServiceMetricsView v;
  v.tenant = std::move(tenant);
  v.service = std::move(service);
  v.desired = 2;
  v.replicas.ready = 1;
  v.replicas.not_ready = 0;
  v.replicas.starting = 1;
  v.replicas.stopping = 0;
  return v;
}

// As the gateway gives it: cumulative counts, le in ms, last +Inf.
gateway::RouteLatencyHistogram Histogram(const std::string& tenant, const std::string& service) {
  gateway::RouteLatencyHistogram h;
  h.tenant = tenant;
  h.service = service;
  h.count = 10;
  h.sum_ms = 2500;
  h.responses_2xx = 7;
  h.responses_4xx = 1;
  h.responses_5xx = 2;
  h.buckets = {{1, 0}, {2, 3}, {4, 3}, {1024, 9}, {1048576, 9}, {kInf, 10}};
  return h;
}

std::size_t At(const std::string& text, const std::string& line) {
  const std::size_t at = text.find(line);
  EXPECT_NE(at, std::string::npos) << line << "\nin\n" << text;
  return at;
}

TEST(RenderServiceMetrics, WithoutGatewayOnlyTheReplicasAreWritten) {
  const std::string text = RenderServiceMetrics({Bare("ml", "coder")});
  EXPECT_EQ(text,
            "# HELP berth_service_replicas Replicas of each inference service: desired, ready (of "
            "the current spec, passing readiness), not_ready (running, not passing readiness), "
            "starting, stopping.\n"
            "# TYPE berth_service_replicas gauge\n"
            "berth_service_replicas{tenant=\"ml\",service=\"coder\",state=\"desired\"} 2\n"
            "berth_service_replicas{tenant=\"ml\",service=\"coder\",state=\"ready\"} 1\n"
            "berth_service_replicas{tenant=\"ml\",service=\"coder\",state=\"not_ready\"} 0\n"
            "berth_service_replicas{tenant=\"ml\",service=\"coder\",state=\"starting\"} 1\n"
            "berth_service_replicas{tenant=\"ml\",service=\"coder\",state=\"stopping\"} 0\n");
  // No service at all: the family is still announced, nothing else.
  EXPECT_EQ(RenderServiceMetrics({}),
            "# HELP berth_service_replicas Replicas of each inference service: desired, ready (of "
            "the current spec, passing readiness), not_ready (running, not passing readiness), "
            "starting, stopping.\n"
            "# TYPE berth_service_replicas gauge\n");
}

TEST(RenderServiceMetrics, GatewayFamiliesCarryTenantAndServiceOnlyForServicesThatHaveThem) {
  ServiceMetricsView coder = Bare("ml", "coder");
  gateway::RouteStats t;
  t.current = 3;
  t.queued = 4;
  t.held_now = 0;
  coder.traffic = t;
  coder.latency = Histogram("ml", "coder");
  coder.last_cold_start_ms = 1234;
  ServiceMetricsView zero = Bare("vision", "de\"tect");  // a label value that needs escaping
  gateway::RouteStats held;
  held.held_now = 2;
  zero.traffic = held;
  const ServiceMetricsView none = Bare("ml", "nogw");

  const std::string text = RenderServiceMetrics({coder, zero, none});
  const std::string ml = "tenant=\"ml\",service=\"coder\"";
  const std::string vision = "tenant=\"vision\",service=\"de\\\"tect\"";

  // Each family announced once, before its samples, in this order.
  std::size_t last = 0;
  for (const char* family :
       {"# TYPE berth_service_replicas gauge\n", "# TYPE berth_service_requests_in_flight gauge\n",
        "# TYPE berth_service_requests_queued gauge\n",
        "# TYPE berth_service_requests_held gauge\n",
        "# TYPE berth_service_request_duration_seconds histogram\n",
        "# TYPE berth_service_responses_total counter\n",
        "# TYPE berth_service_cold_start_seconds gauge\n"}) {
    const std::size_t at = At(text, family);
    EXPECT_GT(at, last) << family;
    EXPECT_EQ(text.find(family, at + 1), std::string::npos) << family;
    last = at;
  }

  At(text, "berth_service_requests_in_flight{" + ml + "} 3\n");
  At(text, "berth_service_requests_in_flight{" + vision + "} 0\n");
  At(text, "berth_service_requests_queued{" + ml + "} 4\n");
  At(text, "berth_service_requests_queued{" + vision + "} 0\n");
  At(text, "berth_service_requests_held{" + ml + "} 0\n");
  At(text, "berth_service_requests_held{" + vision + "} 2\n");
  // Buckets in seconds, ascending, cumulative, +Inf last, then _sum and _count.
  const std::string buckets =
      "berth_service_request_duration_seconds_bucket{" + ml + ",le=\"0.001\"} 0\n" +
      "berth_service_request_duration_seconds_bucket{" + ml + ",le=\"0.002\"} 3\n" +
      "berth_service_request_duration_seconds_bucket{" + ml + ",le=\"0.004\"} 3\n" +
      "berth_service_request_duration_seconds_bucket{" + ml + ",le=\"1.024\"} 9\n" +
      "berth_service_request_duration_seconds_bucket{" + ml + ",le=\"1048.576\"} 9\n" +
      "berth_service_request_duration_seconds_bucket{" + ml + ",le=\"+Inf\"} 10\n" +
      "berth_service_request_duration_seconds_sum{" + ml + "} 2.5\n" +
      "berth_service_request_duration_seconds_count{" + ml + "} 10\n";
  At(text, buckets);
  At(text, "berth_service_responses_total{" + ml + ",code=\"2xx\"} 7\n" +
               "berth_service_responses_total{" + ml + ",code=\"4xx\"} 1\n" +
               "berth_service_responses_total{" + ml + ",code=\"5xx\"} 2\n");
  At(text, "berth_service_cold_start_seconds{" + ml + "} 1.234\n");

  // The service without a gateway's view has its replicas only.
  At(text, "berth_service_replicas{tenant=\"ml\",service=\"nogw\",state=\"desired\"} 2\n");
  EXPECT_EQ(text.find("service=\"nogw\"}"), std::string::npos) << text;
  EXPECT_EQ(text.find("service=\"nogw\",le="), std::string::npos) << text;
  EXPECT_EQ(text.find("service=\"nogw\",code="), std::string::npos) << text;
  // The held service has no latency, responses or cold start yet.
  EXPECT_EQ(text.find("berth_service_request_duration_seconds_count{" + vision), std::string::npos);
  EXPECT_EQ(text.find("berth_service_cold_start_seconds{" + vision), std::string::npos);

  // promtool accepts the families (names, types, bucket order).
  const std::filesystem::path promtool = "/usr/bin/promtool";
  if (!std::filesystem::exists(promtool)) GTEST_SKIP() << "promtool is not installed";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("berth-service-metrics-" +
       std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "metrics.txt") << text;
  const std::string cmd = promtool.string() + " check metrics < " + (dir / "metrics.txt").string() +
                          " > " + (dir / "promtool.out").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());  // NOLINT(cert-env33-c): a test running a fixed tool
  std::ifstream in(dir / "promtool.out");
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(rc, 0) << said;
  EXPECT_EQ(said, "") << "promtool found problems";
}

TEST(RenderServiceMetrics, ARouteWithNoRequestYetHasEmptyBucketsAndZeroCounts) {
  ServiceMetricsView v = Bare("ml", "coder");
  gateway::RouteLatencyHistogram h;
  h.tenant = "ml";
  h.service = "coder";
  h.buckets = {{1, 0}, {2, 0}, {kInf, 0}};
  v.latency = h;
  const std::string text = RenderServiceMetrics({v});
  At(text,
     "berth_service_request_duration_seconds_bucket{tenant=\"ml\",service=\"coder\",le=\"0.002\"} "
     "0\n"
     "berth_service_request_duration_seconds_bucket{tenant=\"ml\",service=\"coder\",le=\"+Inf\"} "
     "0\n"
     "berth_service_request_duration_seconds_sum{tenant=\"ml\",service=\"coder\"} 0\n"
     "berth_service_request_duration_seconds_count{tenant=\"ml\",service=\"coder\"} 0\n");
  At(text, "berth_service_responses_total{tenant=\"ml\",service=\"coder\",code=\"5xx\"} 0\n");
}

}  // namespace
}  // namespace berth::server
