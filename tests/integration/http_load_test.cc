// berthd's API under the loads that stopped it before its HTTP layer was
// asynchronous: many followed logs of silent jobs, and an anonymous flood of
// made-up token ids. Real berthd, real sockets on loopback.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Reads until `needle` has arrived (true) or the connection ends (false).
bool ReadUntil(int fd, std::string_view needle, std::string& seen) {
  char buf[4096];
  while (seen.find(needle) == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    seen.append(buf, static_cast<std::size_t>(n));
  }
  return true;
}

TEST_F(IntegrationTest, FiftyFollowedSilentLogsLeaveSubmissionsAndProbesAnswered) {
  Berthd& berthd = NewBerthd(AllInOne({"--rate-limit", "0"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const std::int64_t id = berthd.Submit(
      "name: silent\ntenant: default\nresources: {gpus: 1}\ncommand: [sleep, '600']\n");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.Job(id).dump();

  // Fifty clients follow its log: more than berthd has handler threads
  // (--http-workers 8), each waiting for bytes that do not come.
  const std::string request = fmt::format(
      "GET /v1/jobs/{}/logs?follow=true HTTP/1.1\r\nHost: berthd\r\nAuthorization: Bearer "
      "{}\r\n\r\n",
      id, berthd.http().token());
  std::vector<int> followers;
  for (int i = 0; i < 50; ++i) {
    int fd = Connect(berthd.api_port());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    followers.push_back(fd);
  }
  for (int fd : followers) {
    std::string seen;
    ASSERT_TRUE(ReadUntil(fd, "\r\n\r\n", seen)) << seen;
    EXPECT_EQ(seen.rfind("HTTP/1.1 200", 0), 0u) << seen;
  }

  // A submission and a probe are still answered at once (a 2 s client
  // timeout; with a thread per stream they waited for a free worker that
  // never came).
  Http quick(berthd.api_port(), 2s);
  quick.set_token(berthd.http().token());
  const auto started = std::chrono::steady_clock::now();
  auto submitted = quick.Post("/v1/jobs", "name: next\ntenant: default\ncommand: ['true']\n");
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(submitted.status, 201) << submitted.text;
  std::printf("submit with 50 followed logs open: %.1f ms\n",
              std::chrono::duration<double, std::milli>(took).count());
  EXPECT_EQ(quick.Get("/healthz").status, 200);

  // Cancelling the job ends every stream with the complete body.
  ASSERT_EQ(berthd.http().Post(fmt::format("/v1/jobs/{}/cancel", id), "").status, 200);
  int ended = 0;
  for (int fd : followers) {
    std::string seen;
    ended += ReadUntil(fd, "0\r\n\r\n", seen);
    ::close(fd);
  }
  EXPECT_EQ(ended, 50);
}

TEST_F(IntegrationTest, AnAnonymousFloodOfMadeUpTokensIsLimitedAndLeavesFewAuditRecords) {
  // A source budget of 100/s (20 x --rate-limit): even a slow build sends
  // 10,000 requests faster than that.
  Berthd& berthd = NewBerthd(AllInOne({"--rate-limit", "5", "--rate-burst", "10"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  // Ids shaped like real ones (berth_<hex id>_<hex secret>), none issued.
  const std::string real = berthd.http().token();
  const std::size_t id_len = real.find('_', 6) - 6;
  const std::size_t secret_len = real.size() - 6 - id_len - 1;
  httplib::Client flood("127.0.0.1", berthd.api_port());
  flood.set_keep_alive(true);
  int unauthenticated = 0;
  int limited = 0;
  int other = 0;
  for (int i = 0; i < 10000; ++i) {
    const httplib::Headers made_up{
        {"Authorization",
         fmt::format("Bearer berth_{:0{}x}_{:0{}x}", i + 1, id_len, i + 1, secret_len)}};
    auto res = flood.Get("/v1/jobs", made_up);
    ASSERT_TRUE(res) << "request " << i << ": " << httplib::to_string(res.error());
    if (res->status == 401) {
      ++unauthenticated;
    } else if (res->status == 429) {
      ++limited;
    } else {
      ++other;
    }
  }
  std::printf("10000 made-up tokens: %d refused as unauthenticated, %d rate-limited\n",
              unauthenticated, limited);
  EXPECT_EQ(other, 0);
  EXPECT_GT(limited, 0);  // the source's budget ran out: a new id is no new bucket
  EXPECT_EQ(unauthenticated + limited, 10000);

  // The audit trail: refusals aggregated per source and minute.
  Reply audit;
  for (int attempt = 0; attempt < 50; ++attempt) {
    audit = GetAllPages(berthd.http(), "/v1/audit?limit=5000", "records");
    if (audit.status != 429) break;
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(audit.status, 200) << audit.text;
  int anonymous = 0;
  for (const auto& r : audit.body["records"]) {
    anonymous += r.value("actor", "").starts_with("anonymous");
  }
  EXPECT_GE(anonymous, 1);
  EXPECT_LE(anonymous, 24) << audit.text.substr(0, 4000);
}

}  // namespace
}  // namespace berth::it
