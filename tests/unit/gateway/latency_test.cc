// The gateway's request latency, pure parts: parsing HAProxy's request log
// lines as captured from HAProxy 2.6 in each of its syslog header formats
// (and refusing garbage with the field that did not parse), the log-scale
// histogram's buckets and its quantiles against exact nearest-rank values
// (within the documented 4.43%), the per-route windows, and memory that
// stays bounded whatever the number of requests or routes. The collector's
// socket is tested here too, on a temp dir (no HAProxy: lines sent by hand).
#include "gateway/latency.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "gateway/log_collector.h"
#include "gateway/request_log.h"

namespace berth::gateway {
namespace {

// "<format>\t<datagram>" lines of testdata/request_log.txt.
std::vector<std::pair<std::string, std::string>> CapturedLines() {
  std::ifstream in(std::string(BERTH_GATEWAY_TESTDATA) + "/request_log.txt");
  std::vector<std::pair<std::string, std::string>> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto tab = line.find('\t');
    out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return out;
}

// --- parsing ---

TEST(GatewayRequestLog, EveryHeaderFormatHaproxyWritesParsesToTheSameEntry) {
  const auto lines = CapturedLines();
  ASSERT_EQ(lines.size(), 24u) << "8 formats x 3 requests";
  std::set<std::string> formats;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto& [format, datagram] = lines[i];
    formats.insert(format);
    auto e = ParseRequestLog(datagram);
    ASSERT_TRUE(e) << format << ": " << e.error().message;
    // The same request in every format: compare with the raw one.
    auto raw = ParseRequestLog(lines[i - i % 8].second);
    ASSERT_TRUE(raw);
    EXPECT_EQ(e->backend, raw->backend) << format;
    EXPECT_EQ(e->ta_ms, raw->ta_ms) << format;
    EXPECT_EQ(e->held_ms, raw->held_ms) << format;
    EXPECT_EQ(e->termination, raw->termination) << format;
  }
  EXPECT_EQ(formats.size(), 8u);

  auto replica = ParseRequestLog(lines[0].second);
  ASSERT_TRUE(replica);
  EXPECT_EQ(replica->backend, "ml:coder");
  EXPECT_EQ(replica->tenant, "ml");
  EXPECT_EQ(replica->service, "coder");
  EXPECT_TRUE(replica->has_route());
  EXPECT_EQ(replica->server, "101");
  EXPECT_EQ(replica->status, 404);
  EXPECT_EQ(replica->tq_ms, 0);
  EXPECT_EQ(replica->tw_ms, 0);
  EXPECT_EQ(replica->tc_ms, 1016);
  EXPECT_EQ(replica->tr_ms, 14);
  EXPECT_EQ(replica->ta_ms, 1030);
  EXPECT_EQ(replica->tt_ms, 1030);
  EXPECT_EQ(replica->latency_ms(), 1030);
  EXPECT_EQ(replica->bytes_out, 500);
  EXPECT_EQ(replica->bytes_in, 93);
  EXPECT_EQ(replica->termination, "--");
  EXPECT_EQ(replica->held_ms, -1);

  auto frontend = ParseRequestLog(lines[8].second);
  ASSERT_TRUE(frontend);
  EXPECT_EQ(frontend->backend, "berth");
  EXPECT_FALSE(frontend->has_route()) << "the frontend's own 404 is no route's";
  EXPECT_EQ(frontend->server, "<NOSRV>");
  EXPECT_EQ(frontend->tw_ms, -1);
  EXPECT_EQ(frontend->termination, "LR");

  auto held = ParseRequestLog(lines[16].second);
  ASSERT_TRUE(held);
  EXPECT_EQ(held->service, "empty");
  EXPECT_EQ(held->status, 503);
  EXPECT_EQ(held->held_ms, 709);
  EXPECT_EQ(held->ta_ms, 710) << "the hold is inside the request's latency";
}

TEST(GatewayRequestLog, ATrailingNewlineOrNulIsIgnored) {
  const std::string line = "berth1 a:b 7 200 1 0 0 3 5 9 10 20 -- -";
  for (const std::string& suffix :
       {std::string(), std::string("\n"), std::string("\r\n"), std::string("\n\0", 2)}) {
    auto e = ParseRequestLog(line + suffix);
    ASSERT_TRUE(e) << e.error().message;
    EXPECT_EQ(e->held_ms, -1);
    EXPECT_EQ(e->ta_ms, 5);
  }
}

TEST(GatewayRequestLog, GarbageIsRefusedNamingWhatDidNotParse) {
  auto field_of = [](std::string_view line) {
    auto e = ParseRequestLog(line);
    EXPECT_FALSE(e) << line;
    if (e) return std::string("(parsed)");
    EXPECT_EQ(e.error().code, Code::kInvalidArgument);
    EXPECT_NE(e.error().message.find("request log"), std::string::npos);
    return e.error().field;
  };
  EXPECT_EQ(field_of(""), "tag");
  EXPECT_EQ(field_of("hello world"), "tag");
  EXPECT_EQ(field_of("<134>Dec  5 07:53:29 host haproxy[1]: Proxy berth started."), "tag");
  EXPECT_EQ(field_of("berth2 a:b 7 200 1 0 0 3 5 9 10 20 -- -"), "tag") << "another version";
  EXPECT_EQ(field_of("berth1 a:b 7 200 1 0 0 3 5 9 10 20 --"), "held_ms") << "one field short";
  EXPECT_EQ(field_of("berth1 a:b 7 200 1 0 0"), "Tr");
  EXPECT_EQ(field_of("berth1 a:b 7 200 1 0 0 3 5 9 10 20 -- - extra"), "request_log");
  EXPECT_EQ(field_of("berth1 a:b 7 2OO 1 0 0 3 5 9 10 20 -- -"), "status");
  EXPECT_EQ(field_of("berth1 a:b 7 200 1 0 0 3 x 9 10 20 -- -"), "Ta");
  EXPECT_EQ(field_of("berth1 a:b 7 200 1 -2 0 3 5 9 10 20 -- -"), "Tw");
  EXPECT_EQ(field_of("berth1 a:b 7 200 1 0 0 3 5 9 -10 20 -- -"), "bytes_out");
  EXPECT_EQ(field_of("berth1 a:b 7 200 1 0 0 3 5 9 10 20 - -"), "termination");
  EXPECT_EQ(field_of("berth1 a:b 7 200 1 0 0 3 5 9 10 20 -- 1.5"), "held_ms");
  EXPECT_EQ(field_of("berth1 a:b:c 7 200 1 0 0 3 5 9 10 20 -- -"), "backend");
  EXPECT_EQ(field_of("berth1 :b 7 200 1 0 0 3 5 9 10 20 -- -"), "backend");
  EXPECT_EQ(field_of("berth1  7 200 1 0 0 3 5 9 10 20 -- -"), "backend");
  EXPECT_EQ(field_of("berth1 a:b 7 200 1 0 0 3 99999999999999999999 9 10 20 -- -"), "Ta");
  // A bounded, printable quote of the line in the message.
  auto long_line = ParseRequestLog(std::string(5000, '\x01'));
  ASSERT_FALSE(long_line);
  EXPECT_LT(long_line.error().message.size(), 400u);
  EXPECT_EQ(long_line.error().message.find('\x01'), std::string::npos);
}

// --- the histogram ---

TEST(GatewayLatencyHistogram, BucketsAreLogScaleWithPowersOfTwoAsBounds) {
  EXPECT_EQ(LatencyBucketBound(0), 0);
  EXPECT_EQ(LatencyBucketBound(1), 1);
  EXPECT_EQ(LatencyBucketBound(9), 2);
  EXPECT_EQ(LatencyBucketBound(1 + 8 * 10), 1024);
  EXPECT_EQ(LatencyBucketBound(kLatencyFiniteBounds - 1), static_cast<double>(kLatencyMaxBoundMs));
  EXPECT_TRUE(std::isinf(LatencyBucketBound(kLatencyBuckets - 1)));
  for (int b = 2; b < kLatencyFiniteBounds; ++b) {
    EXPECT_NEAR(LatencyBucketBound(b) / LatencyBucketBound(b - 1), std::exp2(1.0 / 8), 1e-12);
  }
  // Every value lands in the bucket whose bounds hold it: (bound(b-1), bound(b)].
  for (std::int64_t v = 0; v <= 200'000; v += (v < 5000 ? 1 : 97)) {
    const int b = LatencyBucketOf(v);
    ASSERT_LE(static_cast<double>(v), LatencyBucketBound(b)) << v;
    if (b > 0) {
      ASSERT_GT(static_cast<double>(v), LatencyBucketBound(b - 1)) << v;
    }
  }
  EXPECT_EQ(LatencyBucketOf(-5), 0);
  EXPECT_EQ(LatencyBucketOf(kLatencyMaxBoundMs), kLatencyFiniteBounds - 1);
  EXPECT_EQ(LatencyBucketOf(kLatencyMaxBoundMs + 1), kLatencyBuckets - 1);
  EXPECT_EQ(LatencyBucketOf(3'600'000), kLatencyBuckets - 1);
}

// The nearest-rank quantile of `values`, the definition LatencyHistogram
// estimates.
double LatencyExactQuantile(std::vector<std::int64_t> values, double q) {
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::int64_t>(std::ceil(q * static_cast<double>(values.size()) - 1e-9));
  rank = std::clamp<std::int64_t>(rank, 1, static_cast<std::int64_t>(values.size()));
  return static_cast<double>(values[static_cast<std::size_t>(rank - 1)]);
}

void LatencyExpectWithinBound(const std::vector<std::int64_t>& values, const std::string& what) {
  LatencyHistogram h;
  for (auto v : values) h.Add(v);
  ASSERT_EQ(h.count(), static_cast<std::int64_t>(values.size()));
  for (double q : {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0}) {
    const double exact = LatencyExactQuantile(values, q);
    const double got = h.Quantile(q);
    // 2^(1/16) - 1 = 4.43%; exact at or below 11 ms.
    if (exact <= 11) {
      EXPECT_EQ(got, exact) << what << " q=" << q;
    } else {
      EXPECT_LE(std::abs(got - exact), 0.0443 * exact) << what << " q=" << q << " exact " << exact;
    }
  }
}

TEST(GatewayLatencyHistogram, QuantilesOfKnownInputs) {
  // 1..1000 ms once each: p50 = 500, p95 = 950, p99 = 990 exactly.
  std::vector<std::int64_t> uniform;
  for (int v = 1; v <= 1000; ++v) uniform.push_back(v);
  LatencyHistogram h;
  for (auto v : uniform) h.Add(v);
  EXPECT_NEAR(h.Quantile(0.50), 500, 500 * 0.0443);
  EXPECT_NEAR(h.Quantile(0.95), 950, 950 * 0.0443);
  EXPECT_NEAR(h.Quantile(0.99), 990, 990 * 0.0443);
  EXPECT_EQ(h.Quantile(0), 1);
  EXPECT_EQ(h.Quantile(1), 1000);
  EXPECT_EQ(h.sum_ms(), 500'500);
  LatencyExpectWithinBound(uniform, "uniform 1..1000");

  // Every request the same: every quantile is that value (min = max).
  LatencyHistogram same;
  for (int i = 0; i < 500; ++i) same.Add(537);
  EXPECT_EQ(same.Quantile(0.5), 537);
  EXPECT_EQ(same.Quantile(0.99), 537);

  // Small values are exact: 100 requests of 3 ms and 5 of 9 ms.
  LatencyHistogram small;
  for (int i = 0; i < 100; ++i) small.Add(3);
  for (int i = 0; i < 5; ++i) small.Add(9);
  EXPECT_EQ(small.Quantile(0.5), 3);
  EXPECT_EQ(small.Quantile(0.95), 3) << "rank 100 of 105";
  EXPECT_EQ(small.Quantile(0.99), 9);

  // A bimodal service: 90% fast (20 ms), 10% slow (2 s).
  std::vector<std::int64_t> bimodal(900, 20);
  bimodal.insert(bimodal.end(), 100, 2000);
  LatencyExpectWithinBound(bimodal, "bimodal");
  LatencyHistogram b;
  for (auto v : bimodal) b.Add(v);
  EXPECT_NEAR(b.Quantile(0.5), 20, 1);
  EXPECT_NEAR(b.Quantile(0.95), 2000, 2000 * 0.0443);

  // Log-normal latencies (seeded), from sub-ms to minutes.
  std::mt19937_64 rng(19);
  for (double sigma : {0.3, 1.0, 2.5}) {
    std::lognormal_distribution<double> dist(std::log(80.0), sigma);
    std::vector<std::int64_t> values;
    for (int i = 0; i < 20'000; ++i) values.push_back(static_cast<std::int64_t>(dist(rng)));
    LatencyExpectWithinBound(values, fmt::format("lognormal sigma {}", sigma));
  }
}

TEST(GatewayLatencyHistogram, BeyondTheLastBoundTheMaxIsReported) {
  LatencyHistogram h;
  for (int i = 0; i < 10; ++i) h.Add(100);
  for (int i = 0; i < 90; ++i) h.Add(2'000'000);  // 33 minutes
  EXPECT_EQ(h.Quantile(0.5), 2'000'000);
  EXPECT_NEAR(h.Quantile(0.05), 100, 100 * 0.0443);
  auto buckets = h.PrometheusBuckets();
  ASSERT_EQ(buckets.size(), 22u);
  EXPECT_EQ(buckets[20].le_ms, 1 << 20);
  EXPECT_EQ(buckets[20].count, 10);
  EXPECT_TRUE(std::isinf(buckets[21].le_ms));
  EXPECT_EQ(buckets[21].count, 100);
}

TEST(GatewayLatencyHistogram, PrometheusBucketsAreCumulativeAndExact) {
  LatencyHistogram h;
  const std::vector<std::int64_t> values = {0, 1, 2, 3, 4, 5, 1000, 1024, 1025, 60'000};
  for (auto v : values) h.Add(v);
  auto buckets = h.PrometheusBuckets();
  ASSERT_EQ(buckets.size(), 22u);
  for (std::size_t k = 0; k <= 20; ++k) {
    const double le = std::ldexp(1.0, static_cast<int>(k));
    EXPECT_EQ(buckets[k].le_ms, le);
    const auto want = std::count_if(values.begin(), values.end(),
                                    [&](std::int64_t v) { return static_cast<double>(v) <= le; });
    EXPECT_EQ(buckets[k].count, want) << "le " << le;
  }
  EXPECT_EQ(buckets.back().count, 10);
  EXPECT_EQ(h.sum_ms(), 0 + 1 + 2 + 3 + 4 + 5 + 1000 + 1024 + 1025 + 60'000);
}

TEST(GatewayLatencyHistogram, MergeEqualsAddingEverything) {
  LatencyHistogram a, b, all;
  for (int v = 1; v < 300; v += 7) {
    a.Add(v);
    all.Add(v);
  }
  for (int v = 500; v < 9000; v += 91) {
    b.Add(v);
    all.Add(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min_ms(), all.min_ms());
  EXPECT_EQ(a.max_ms(), all.max_ms());
  for (double q : {0.1, 0.5, 0.95}) EXPECT_EQ(a.Quantile(q), all.Quantile(q));
  LatencyHistogram empty;
  EXPECT_EQ(empty.Quantile(0.5), 0);
  EXPECT_EQ(empty.max_ms(), 0);
}

// --- the aggregator ---

RequestLogEntry LatencyEntry(const std::string& tenant, const std::string& service, int status,
                             std::int64_t ms, std::int64_t held_ms = -1) {
  RequestLogEntry e;
  e.backend = tenant.empty() ? "berth" : tenant + ":" + service;
  e.tenant = tenant;
  e.service = service;
  e.status = status;
  e.ta_ms = ms;
  e.held_ms = held_ms;
  return e;
}

TEST(GatewayLatencyAggregator, AWindowCountsSinceThePreviousTake) {
  LatencyAggregator agg;
  for (int i = 1; i <= 100; ++i) agg.Record(LatencyEntry("ml", "coder", 200, i));
  agg.Record(LatencyEntry("ml", "coder", 404, 5));
  agg.Record(LatencyEntry("ml", "coder", 503, 3000, 2990));
  agg.Record(LatencyEntry("ml", "coder", -1, 7));  // aborted: no status
  agg.Record(LatencyEntry("ml", "chat", 200, 40));
  agg.Record(LatencyEntry("", "", 404, 0));  // the frontend's own 404
  auto w = agg.TakeWindow();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].service, "chat");
  EXPECT_EQ(w[0].requests, 1);
  EXPECT_EQ(w[0].p50_ms, 40);
  const RouteLatency& coder = w[1];
  EXPECT_EQ(coder.tenant, "ml");
  EXPECT_EQ(coder.requests, 103);
  EXPECT_EQ(coder.responses_2xx, 100);
  EXPECT_EQ(coder.responses_4xx, 1);
  EXPECT_EQ(coder.responses_5xx, 1);
  EXPECT_EQ(coder.held, 1);
  EXPECT_EQ(coder.max_ms, 3000);
  EXPECT_NEAR(coder.p50_ms, 50, 50 * 0.0443);
  EXPECT_NEAR(coder.p95_ms, 96, 96 * 0.0443);
  EXPECT_EQ(agg.counters().recorded, 104);
  EXPECT_EQ(agg.counters().no_route, 1);

  // The next window starts empty; routes stay listed with zero requests.
  agg.Record(LatencyEntry("ml", "chat", 200, 7));
  w = agg.TakeWindow();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].requests, 1);
  EXPECT_EQ(w[0].p99_ms, 7);
  EXPECT_EQ(w[1].requests, 0);
  EXPECT_EQ(w[1].p95_ms, 0);

  // The cumulative view has both windows and never resets on Take.
  auto c = agg.Cumulative();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].count, 2);
  EXPECT_EQ(c[0].sum_ms, 47);
  EXPECT_EQ(c[1].count, 103);
  EXPECT_EQ(c[1].responses_5xx, 1);
  EXPECT_EQ(c[1].held, 1);
  EXPECT_EQ(c[1].buckets.back().count, 103);
}

TEST(GatewayLatencyAggregator, MemoryIsBoundedWhateverTheTraffic) {
  static_assert(sizeof(LatencyHistogram) < 1500, "a histogram is a fixed array");
  LatencyAggregator agg;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> ms(0, 5'000'000);
  for (int i = 0; i < 1'000'000; ++i) agg.Record(LatencyEntry("ml", "coder", 200, ms(rng)));
  EXPECT_EQ(agg.routes(), 1u) << "a million requests: one route, two fixed histograms";
  // Routes beyond the limit are counted, not kept.
  for (std::size_t i = 0; i < kMaxLatencyRoutes + 50; ++i) {
    agg.Record(LatencyEntry("t", fmt::format("s{}", i), 200, 1));
  }
  EXPECT_EQ(agg.routes(), kMaxLatencyRoutes);
  EXPECT_EQ(agg.counters().over_route_limit, 51) << "ml:coder holds one of the places";
  // Routes that leave the gateway are forgotten.
  agg.Retain({"ml:coder"});
  EXPECT_EQ(agg.routes(), 1u);
  agg.Record(LatencyEntry("t", "new", 200, 1));
  EXPECT_EQ(agg.routes(), 2u);
}

// --- the collector's socket ---

class GatewayLogCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("berth-latency-{}-{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Sends one datagram to `path` the way HAProxy does (sendto the path).
  static bool Send(const std::filesystem::path& path, std::string_view line) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.string().size() + 1);
    const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    const auto n =
        sendto(fd, line.data(), line.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    close(fd);
    return n == static_cast<ssize_t>(line.size());
  }

  static bool WaitDatagrams(RequestLogCollector& c, std::int64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (c.Counters().datagrams >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  std::filesystem::path dir_;
};

TEST_F(GatewayLogCollectorTest, LinesAreCountedAndGarbageIsNotFatal) {
  const auto path = dir_ / "log.sock";
  auto c = RequestLogCollector::Start(path);
  ASSERT_TRUE(c) << c.error().message;
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "only berthd's user may write latencies";

  ASSERT_TRUE(Send(path, "berth1 ml:coder 7 200 0 0 0 3 12 12 10 20 -- -\n"));
  ASSERT_TRUE(Send(path, "berth1 ml:coder 7 2xx 0 0 0 3 12 12 10 20 -- -"));
  ASSERT_TRUE(Send(path, "Proxy berth stopped (cumulated conns: FE: 0, BE: 0).\n"));
  ASSERT_TRUE(Send(path, "berth1 berth <NOSRV> 404 3 -1 -1 -1 0 3 80 86 LR -\n"));
  ASSERT_TRUE(Send(path, "berth1 ml:coder 7 503 0 0 0 3 250 250 10 20 SC 240\n"));
  ASSERT_TRUE(WaitDatagrams(**c, 5));
  auto counters = (*c)->Counters();
  EXPECT_EQ(counters.recorded, 2);
  EXPECT_EQ(counters.unparsed, 1);
  EXPECT_EQ(counters.haproxy_messages, 1) << "HAProxy's own message: expected, not an error";
  EXPECT_EQ(counters.no_route, 1);
  EXPECT_NE(counters.last_error.find("status '2xx'"), std::string::npos) << counters.last_error;
  EXPECT_NE(counters.last_message.find("Proxy berth stopped"), std::string::npos);
  auto w = (*c)->TakeWindow();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].requests, 2);
  EXPECT_EQ(w[0].responses_5xx, 1);
  EXPECT_EQ(w[0].held, 1);
  EXPECT_EQ(w[0].p50_ms, 12);
  EXPECT_EQ(w[0].max_ms, 250);
  EXPECT_TRUE((*c)->ReaderError().empty());

  // Stop reads what was queued first; what was recorded stays readable.
  ASSERT_TRUE(Send(path, "berth1 ml:coder 7 200 0 0 0 3 4 4 10 20 -- -"));
  (*c)->Stop();
  (*c)->Stop();  // idempotent
  EXPECT_EQ((*c)->Counters().recorded, 3);
  EXPECT_EQ((*c)->TakeWindow()[0].requests, 1);
}

TEST_F(GatewayLogCollectorTest, ANewCollectorRebindsAStalePath) {
  const auto path = dir_ / "log.sock";
  {
    auto first = RequestLogCollector::Start(path);
    ASSERT_TRUE(first);
  }  // destroyed: the socket file stays, nobody reads it
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(Send(path, "berth1 ml:coder 7 200 0 0 0 3 4 4 10 20 -- -")) << "no reader";
  auto second = RequestLogCollector::Start(path);
  ASSERT_TRUE(second) << second.error().message;
  ASSERT_TRUE(Send(path, "berth1 ml:coder 7 200 0 0 0 3 4 4 10 20 -- -"));
  ASSERT_TRUE(WaitDatagrams(**second, 1));
  EXPECT_EQ((*second)->Counters().recorded, 1);
}

TEST_F(GatewayLogCollectorTest, TakingWindowsWhileLinesArriveLosesNoRequest) {
  const auto path = dir_ / "log.sock";
  auto c = RequestLogCollector::Start(path);
  ASSERT_TRUE(c) << c.error().message;
  constexpr int kLines = 3000;
  std::atomic<bool> done{false};
  std::int64_t taken = 0;
  std::thread taker([&] {
    while (!done) {
      for (const auto& w : (*c)->TakeWindow()) taken += w.requests;
      (void)(*c)->Cumulative();
    }
  });
  // Sent as HAProxy sends: without waiting; a full queue (10 datagrams by
  // default) is retried here, where HAProxy would drop and count the line.
  int sent = 0;
  const std::string line = "berth1 ml:coder 7 200 0 0 0 3 12 12 10 20 -- -";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.string().size() + 1);
  const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  while (sent < kLines) {
    const auto n = sendto(fd, line.data(), line.size(), MSG_DONTWAIT,
                          reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (n == static_cast<ssize_t>(line.size())) {
      ++sent;
    } else {
      std::this_thread::yield();
    }
  }
  close(fd);
  ASSERT_TRUE(WaitDatagrams(**c, kLines));
  done = true;
  taker.join();
  for (const auto& w : (*c)->TakeWindow()) taken += w.requests;
  EXPECT_EQ(taken, kLines) << "every line in exactly one window";
  EXPECT_EQ((*c)->Cumulative().at(0).count, kLines);
}

}  // namespace
}  // namespace berth::gateway

namespace berth::gateway {
namespace {

// A kept histogram (its non-empty buckets, sum, min and max) gives back the
// same figures, and windows kept apart and merged from their buckets give
// what one histogram of every request gives.
TEST(GatewayLatencyHistogram, KeptBucketsGiveBackTheSameQuantiles) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(std::log(60.0), 1.2);
  LatencyHistogram all;
  LatencyHistogram merged;
  for (int window = 0; window < 5; ++window) {
    LatencyHistogram w;
    for (int i = 0; i < 400; ++i) {
      const auto v = static_cast<std::int64_t>(dist(rng));
      w.Add(v);
      all.Add(v);
    }
    const LatencyHistogram kept =
        LatencyHistogram::FromBuckets(w.NonEmptyBuckets(), w.sum_ms(), w.min_ms(), w.max_ms());
    EXPECT_EQ(kept.count(), w.count());
    for (double q : {0.0, 0.5, 0.95, 0.99, 1.0}) EXPECT_EQ(kept.Quantile(q), w.Quantile(q));
    merged.Merge(kept);
  }
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.sum_ms(), all.sum_ms());
  for (double q : {0.5, 0.95, 0.99}) EXPECT_EQ(merged.Quantile(q), all.Quantile(q));
  // Nonsense in a kept row counts for nothing.
  const LatencyHistogram bad =
      LatencyHistogram::FromBuckets({{-1, 5}, {kLatencyBuckets, 5}, {3, -2}}, 10, 1, 2);
  EXPECT_EQ(bad.count(), 0);
  EXPECT_EQ(bad.Quantile(0.5), 0);
}

}  // namespace
}  // namespace berth::gateway
