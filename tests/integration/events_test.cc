// GET /v1/events against a real berthd: a watcher hears of its tenants'
// jobs as they commit, of the inventory, and of nothing of another
// tenant's; a reconnection replays what it missed, or says to refetch;
// a revoked token ends the stream.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>

#include "integration/fixture.h"
#include "integration/tenants.h"

namespace berth::it {
namespace {

using nlohmann::json;

// An open GET /v1/events, read as raw bytes.
class Watcher {
 public:
  Watcher(int port, const std::string& token, const std::string& query = "",
          const std::string& last_event_id = "") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    timeval tv{0, 200'000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string request = fmt::format(
        "GET /v1/events{} HTTP/1.1\r\nHost: berthd\r\nAuthorization: Bearer {}\r\n", query, token);
    if (!last_event_id.empty()) request += "Last-Event-ID: " + last_event_id + "\r\n";
    request += "\r\n";
    ::send(fd_, request.data(), request.size(), MSG_NOSIGNAL);
  }
  ~Watcher() {
    if (fd_ >= 0) ::close(fd_);
  }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Reads until `needle` has arrived (true), the stream ends or `within`
  // passes (false). Everything read stays in seen().
  bool WaitFor(std::string_view needle, std::chrono::milliseconds within) {
    const auto until = std::chrono::steady_clock::now() + within;
    char buf[4096];
    while (seen_.find(needle) == std::string::npos) {
      if (std::chrono::steady_clock::now() > until || fd_ < 0) return false;
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return seen_.find(needle) != std::string::npos;
      if (n > 0) seen_.append(buf, static_cast<std::size_t>(n));
    }
    return true;
  }
  // Reads whatever arrives for `d`.
  void Drain(std::chrono::milliseconds d) { WaitFor("\x01never", d); }
  const std::string& seen() const { return seen_; }
  // The id of the last event read ("" when none).
  std::string LastId() const {
    std::string last;
    static const std::regex id_line("id: ([^\r\n]+)");
    for (std::sregex_iterator it(seen_.begin(), seen_.end(), id_line), end; it != end; ++it) {
      last = (*it)[1];
    }
    return last;
  }

 private:
  int fd_ = -1;
  std::string seen_;
};

std::string JobEvent(std::int64_t id, const std::string& tenant, const std::string& state) {
  return fmt::format(R"(event: job
data: {{"id":{},"queue":"main","state":"{}","tenant":"{}"}})",
                     id, state, tenant);
}

TEST_F(IntegrationTest, AWatcherHearsItsTenantsJobsAndTheFleetAndNothingOfAnotherTenant) {
  Berthd& berthd = NewBerthd(AllInOne({"--events-recheck", "300ms", "--alert-interval", "200ms"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();
  ASSERT_EQ(admin.Post("/v1/policy", kRedBlue).status, 201);
  const std::string rita = MemberToken(admin, "rita", "red", "member");
  ASSERT_FALSE(rita.empty());

  Watcher red(berthd.api_port(), rita);
  Watcher all(berthd.api_port(), admin.token());
  ASSERT_TRUE(red.WaitFor("event: hello", 5s)) << red.seen();
  ASSERT_TRUE(all.WaitFor("event: hello", 5s)) << all.seen();
  EXPECT_NE(red.seen().find("text/event-stream"), std::string::npos) << red.seen();
  const std::string before = red.LastId();

  const std::int64_t r =
      berthd.Submit(JobSpecJson("r", Sh("sleep 0.2"), 1, {{"tenant", "red"}, {"queue", "main"}}));
  const std::int64_t b =
      berthd.Submit(JobSpecJson("b", Sh("sleep 0.2"), 1, {{"tenant", "blue"}, {"queue", "main"}}));
  ASSERT_GT(r, 0);
  ASSERT_GT(b, 0);
  ASSERT_TRUE(berthd.WaitForTerminal(r, 30s));
  ASSERT_TRUE(berthd.WaitForTerminal(b, 30s));

  // Red's member hears red's job from submission to its end, in order.
  ASSERT_TRUE(red.WaitFor(JobEvent(r, "red", "Succeeded"), 5s)) << red.seen();
  const auto pending = red.seen().find(JobEvent(r, "red", "Pending"));
  const auto running = red.seen().find(JobEvent(r, "red", "Running"));
  ASSERT_NE(pending, std::string::npos) << red.seen();
  ASSERT_NE(running, std::string::npos) << red.seen();
  EXPECT_LT(pending, running);
  // The platform admin hears both; red's member never hears blue's.
  ASSERT_TRUE(all.WaitFor(JobEvent(b, "blue", "Succeeded"), 5s)) << all.seen();
  EXPECT_NE(all.seen().find(JobEvent(r, "red", "Succeeded")), std::string::npos);
  red.Drain(500ms);
  EXPECT_EQ(red.seen().find("\"tenant\":\"blue\""), std::string::npos) << red.seen();
  EXPECT_EQ(red.seen().find(fmt::format("\"id\":{},", b)), std::string::npos) << red.seen();

  // The inventory is everyone's: a cordon reaches the member too.
  auto nodes = admin.Get("/v1/nodes");
  ASSERT_EQ(nodes.status, 200);
  const std::string node = nodes.body.at("nodes").at(0).at("name");
  ASSERT_EQ(admin
                .Post(fmt::format("/v1/nodes/{}/gpus/0/cordon", node),
                      json{{"reason", "fan"}}.dump(), "application/json")
                .status,
            200);
  EXPECT_TRUE(red.WaitFor(fmt::format(R"(event: node
data: {{"change":"cordon","node":"{}"}})",
                                      node),
                          5s))
      << red.seen();

  // Reconnecting from before the jobs replays them (red's only); from a
  // position no feed gave, the watcher is told to refetch.
  {
    Watcher again(berthd.api_port(), rita, "", before);
    ASSERT_TRUE(again.WaitFor(JobEvent(r, "red", "Succeeded"), 5s)) << again.seen();
    EXPECT_EQ(again.seen().find("\"tenant\":\"blue\""), std::string::npos) << again.seen();
    EXPECT_EQ(again.seen().find("event: reset"), std::string::npos) << again.seen();
  }
  {
    Watcher stale(berthd.api_port(), rita, "", "1700000000000-5");
    EXPECT_TRUE(stale.WaitFor("event: reset", 5s)) << stale.seen();
  }

  // Bad topics are refused naming the field; alerts are not a member's.
  {
    Watcher bad(berthd.api_port(), rita, "?topics=jobs");
    ASSERT_TRUE(bad.WaitFor("\r\n\r\n", 5s)) << bad.seen();
    EXPECT_EQ(bad.seen().rfind("HTTP/1.1 400", 0), 0U) << bad.seen();
    EXPECT_TRUE(bad.WaitFor("topics", 5s)) << bad.seen();
    Watcher alerts(berthd.api_port(), rita, "?topics=alert");
    ASSERT_TRUE(alerts.WaitFor("\r\n\r\n", 5s)) << alerts.seen();
    EXPECT_EQ(alerts.seen().rfind("HTTP/1.1 403", 0), 0U) << alerts.seen();
  }

  // Alerts are the platform admins': a red job no node can hold opens a
  // queue-wait alert that the admin hears of, opened and resolved, and
  // red's member does not.
  ASSERT_EQ(admin
                .Post("/v1/alert-rules",
                      "rules:\n  - {name: long-waits, kind: queue_wait, queue: \"*\", "
                      "threshold: 1s}\n",
                      "application/yaml")
                .status,
            201);
  const std::int64_t stuck =
      berthd.Submit(JobSpecJson("stuck", {"true"}, 16, {{"tenant", "red"}, {"queue", "main"}}));
  ASSERT_GT(stuck, 0);
  ASSERT_TRUE(all.WaitFor("event: alert", 20s)) << all.seen();
  static const std::regex opened(R"(event: alert\ndata: \{"id":(\d+),"state":"open"\})");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(all.seen(), m, opened)) << all.seen();
  const std::string alert_id = m[1];
  ASSERT_EQ(admin.Post("/v1/alerts/" + alert_id + "/resolve", "", "application/json").status, 200);
  EXPECT_TRUE(all.WaitFor(fmt::format(R"(data: {{"id":{},"state":"resolved"}})", alert_id), 5s))
      << all.seen();
  EXPECT_TRUE(red.WaitFor(JobEvent(stuck, "red", "Pending"), 5s)) << red.seen();
  EXPECT_EQ(red.seen().find("event: alert"), std::string::npos) << red.seen();

  // Revoking the member's token ends the stream at its next check.
  ASSERT_EQ(
      admin.Post("/v1/tokens/" + rita.substr(6, 12) + "/revoke", "", "application/json").status,
      200);
  EXPECT_TRUE(red.WaitFor("event: end", 5s)) << red.seen();
  EXPECT_TRUE(red.WaitFor("0\r\n\r\n", 5s)) << red.seen();
}

}  // namespace
}  // namespace berth::it
