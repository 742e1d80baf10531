// What the service controller tells the gateway and reads back from it
// (control/service_routes.h): which replicas a route has, and the
// autoscaler's samples from the gateway's counters and the replicas'
// metrics.
#include "control/service_routes.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

namespace berth::server {
namespace {

store::ServiceRecord RoutesService() {
  store::ServiceRecord s;
  s.tenant = "red";
  s.name = "llm";
  s.revision = 3;
  return s;
}

GatewayApi RoutesApi() {
  return {"https://localhost:7460", "127.0.0.1:7460"};
}

std::vector<std::string> RoutesIds(const gateway::Route& r) {
  std::vector<std::string> out;
  for (const auto& b : r.backends) out.push_back(b.id);
  return out;
}

TEST(ServiceRoutes, OnlyReadyReplicasOnReadyNodesWithAnAddressTakeRequests) {
  const std::map<std::string, RouteNode> nodes{{"a", {"10.0.0.1", true}},
                                               {"b", {"10.0.0.2", false}},  // lease lapsed
                                               {"c", {"", true}}};          // no address
  const std::vector<RoutedReplica> replicas{
      {7, "a", 31000, true, false},   // serves
      {3, "a", 31001, true, false},   // serves (an old revision's, until stopped)
      {4, "a", 31002, false, false},  // not ready
      {5, "a", 31003, true, true},    // being drained or stopped
      {6, "b", 31004, true, false},   // its node is not ready
      {8, "c", 31005, true, false},   // its node has no address
      {9, "zz", 31006, true, false},  // an unknown node
      {10, "a", 0, true, false},      // no port
  };
  const gateway::Route r = RouteOf(RoutesService(), replicas, nodes, RoutesApi());
  EXPECT_EQ(r.tenant, "red");
  EXPECT_EQ(r.service, "llm");
  EXPECT_EQ(r.hold_timeout_ms, 60'000);  // the spec's gateway.hold_timeout default
  EXPECT_EQ(RoutesIds(r), (std::vector<std::string>{"job-3", "job-7"}));
  EXPECT_EQ(r.backends[1].address, "10.0.0.1");
  EXPECT_EQ(r.backends[1].port, 31000);
  EXPECT_FALSE(r.backends[1].draining);
  EXPECT_TRUE(gateway::ValidateRoutes({r}).has_value());
  // No replica: the route stays, empty, so that requests are held.
  EXPECT_TRUE(RouteOf(RoutesService(), {}, nodes, RoutesApi()).backends.empty());
  // As long as the spec says (a model that loads for minutes), or not at all.
  store::ServiceRecord slow = RoutesService();
  slow.spec.gateway.hold_timeout_ms = 300'000;
  EXPECT_EQ(RouteOf(slow, {}, nodes, RoutesApi()).hold_timeout_ms, 300'000);
  slow.spec.gateway.hold_timeout_ms = 0;
  const gateway::Route at_once = RouteOf(slow, {}, nodes, RoutesApi());
  EXPECT_EQ(at_once.hold_timeout_ms, 0);
  EXPECT_TRUE(gateway::ValidateRoutes({at_once}).has_value());
}

// Callers are checked at berthd unless the spec says public.
TEST(ServiceRoutes, ATenantServicesCallersAreCheckedAtBerthdAndAPublicOnesAreNot) {
  store::ServiceRecord s = RoutesService();
  EXPECT_EQ(s.spec.access, model::ServiceAccess::kTenant);  // the default
  const gateway::Route checked = RouteOf(s, {}, {}, RoutesApi());
  EXPECT_EQ(checked.auth_url, "https://localhost:7460/v1/services/red/llm/access");
  EXPECT_EQ(checked.auth_address, "127.0.0.1:7460");
  EXPECT_TRUE(gateway::ValidateRoutes({checked}).has_value());
  s.spec.access = model::ServiceAccess::kPublic;
  EXPECT_EQ(RouteOf(s, {}, {}, RoutesApi()).auth_url, "");
}

TEST(ServiceRoutes, AServerNameNamesItsReplicaJob) {
  EXPECT_EQ(ReplicaServerId(42), "job-42");
  EXPECT_EQ(ReplicaOfServer("job-42"), 42);
  EXPECT_EQ(ReplicaOfServer("job-"), std::nullopt);
  EXPECT_EQ(ReplicaOfServer("job-4x"), std::nullopt);
  EXPECT_EQ(ReplicaOfServer("job-0"), std::nullopt);
  EXPECT_EQ(ReplicaOfServer("srv1"), std::nullopt);
}

TEST(ServiceRoutes, SamplesComeFromTheGatewaysCounters) {
  gateway::RouteStats st;
  st.current = 3;
  st.queued = 2;
  st.held_now = 1;
  st.total = 100;
  st.held_total = 4;
  RouteCounters last;
  // First sample: in flight counts, arrivals need a previous total.
  auto s = SampleOf(st, nullptr, model::AutoscaleSignal::kConcurrency, last, 10'000);
  EXPECT_EQ(s.time_ms, 10'000);
  EXPECT_EQ(s.in_flight, 6);
  EXPECT_EQ(s.value_milli, 6000);
  EXPECT_EQ(s.requests, 0);
  // 2 s later: 50 more routed, 2 more held: 25 rps routed.
  st.total = 150;
  st.held_total = 6;
  s = SampleOf(st, nullptr, model::AutoscaleSignal::kRps, last, 12'000);
  EXPECT_EQ(s.requests, 52);
  EXPECT_EQ(s.value_milli, 25'000);
  // Queue depth: waiting for a slot or held at zero.
  s = SampleOf(st, nullptr, model::AutoscaleSignal::kQueueDepth, last, 13'000);
  EXPECT_EQ(s.value_milli, 3000);
  EXPECT_EQ(s.requests, 0);
  // A reload starts the counters again: what they show is new.
  st.total = 7;
  st.held_total = 0;
  s = SampleOf(st, nullptr, model::AutoscaleSignal::kRps, last, 14'000);
  EXPECT_EQ(s.requests, 7);
  EXPECT_EQ(s.value_milli, 7000);
}

TEST(ServiceRoutes, P95LatencyComesFromTheRequestLog) {
  gateway::RouteStats st;
  RouteCounters last;
  gateway::RouteLatency lat;
  lat.requests = 10;
  lat.p95_ms = 412.5;
  auto s = SampleOf(st, &lat, model::AutoscaleSignal::kP95Latency, last, 1000);
  EXPECT_EQ(s.value_milli, 412'500);
  lat.requests = 0;  // nothing logged: no latency
  s = SampleOf(st, &lat, model::AutoscaleSignal::kP95Latency, last, 2000);
  EXPECT_EQ(s.value_milli, 0);
  s = SampleOf(st, nullptr, model::AutoscaleSignal::kP95Latency, last, 3000);
  EXPECT_EQ(s.value_milli, 0);
}

// The metric signal over real HTTP on loopback: two replicas answer and
// are summed; one that is not ready is not asked; one whose /metrics fails,
// one without the metric and one on a node with no address are counted as
// asked and not answered, the first failure said.
TEST(ServiceMetricScrape, SumsTheReadyReplicasThatAnswerAndSaysWhyOthersDidNot) {
  httplib::Server good;
  good.Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{e=\"0\"} 2\n",
        "text/plain");
  });
  httplib::Server broken;
  broken.Get("/metrics", [](const httplib::Request&, httplib::Response& res) { res.status = 500; });
  httplib::Server other;
  other.Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("up 1\n", "text/plain");
  });
  const int good_port = good.bind_to_any_port("127.0.0.1");
  const int broken_port = broken.bind_to_any_port("127.0.0.1");
  const int other_port = other.bind_to_any_port("127.0.0.1");
  std::thread a([&] { good.listen_after_bind(); });
  std::thread b([&] { broken.listen_after_bind(); });
  std::thread c([&] { other.listen_after_bind(); });
  // Bound and listening already: a connection waits until the loop accepts it.
  const std::map<std::string, RouteNode> nodes{{"a", {"127.0.0.1", true}}, {"b", {"", true}}};
  auto port = [](int p) { return static_cast<std::uint32_t>(p); };

  std::vector<RoutedReplica> two{{1, "a", port(good_port), true, false},
                                 {2, "a", port(good_port), true, false},
                                 {3, "a", port(broken_port), false, false}};  // not ready
  MetricScrape m = ScrapeMetric("vllm:num_requests_waiting", two, nodes);
  EXPECT_EQ(m.replicas, 2U);
  EXPECT_EQ(m.answered, 2U);
  EXPECT_EQ(m.value_milli, std::optional<std::int64_t>(4000));
  EXPECT_TRUE(m.error.empty()) << m.error;

  std::vector<RoutedReplica> mixed{{1, "a", port(good_port), true, false},
                                   {4, "a", port(broken_port), true, false},
                                   {5, "a", port(other_port), true, false},
                                   {6, "b", port(good_port), true, false}};
  m = ScrapeMetric("vllm:num_requests_waiting", mixed, nodes);
  EXPECT_EQ(m.replicas, 4U);
  EXPECT_EQ(m.answered, 1U);
  EXPECT_EQ(m.value_milli, std::optional<std::int64_t>(2000));
  EXPECT_EQ(m.error, "replica job 6: its node b has no address");

  std::vector<RoutedReplica> none{{4, "a", port(broken_port), true, false},
                                  {5, "a", port(other_port), true, false}};
  m = ScrapeMetric("vllm:num_requests_waiting", none, nodes);
  EXPECT_EQ(m.answered, 0U);
  EXPECT_FALSE(m.value_milli.has_value());
  EXPECT_EQ(m.error, "replica job 4: GET /metrics: HTTP 500");
  m = ScrapeMetric("vllm:num_requests_waiting", {{5, "a", port(other_port), true, false}}, nodes);
  EXPECT_EQ(m.error, "replica job 5: /metrics has no vllm:num_requests_waiting");

  good.stop();
  broken.stop();
  other.stop();
  a.join();
  b.join();
  c.join();
}

}  // namespace
}  // namespace berth::server
