// berthd's HTTP server over real loopback sockets: routing and decoding,
// the limits it refuses with, slow and idle clients cut off at the
// deadline, connections per source, and streams that wait without a worker.
#include "http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace berth::http {
namespace {

using namespace std::chrono_literals;

// A raw client socket, for what an HTTP client library will not send.
class RawConn {
 public:
  explicit RawConn(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }
  bool Send(std::string_view s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Everything until the server closes (or 5 s pass).
  std::string ReadAll() {
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
  // What one read returns (up to 4 KiB).
  std::string ReadSome() {
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }
  // True when the server closed the connection (EOF or reset).
  bool Closed() {
    char c = 0;
    ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void Serve(ServerOptions options) {
    server_ = std::make_unique<Server>(options);
    server_->Get("/echo/([^/]+)", [](const Request& req, Response& res) {
      std::string out = req.matches[1] + "|";
      for (const auto& [k, v] : req.params) out += k + "=" + v + ";";
      out += "|" + req.get_header_value("x-Mixed-Case");
      res.set_content(out, "text/plain");
    });
    server_->Post("/body", [](const Request& req, Response& res) {
      res.set_content(std::to_string(req.body.size()), "text/plain");
    });
    server_->Get("/slow", [this](const Request&, Response& res) {
      ++slow_running_;
      while (!release_) std::this_thread::sleep_for(1ms);
      res.set_content("done", "text/plain");
    });
    server_->Get("/healthz",
                 [](const Request&, Response& res) { res.set_content("ok", "text/plain"); });
    server_->Get("/throw", [](const Request&, Response&) { throw std::runtime_error("boom"); });
    // A stream that says one line, then waits until released.
    server_->Get("/stream", [this](const Request&, Response& res) {
      auto said = std::make_shared<bool>(false);
      res.set_stream("text/plain", [this, said](std::string& out) {
        if (!*said) {
          *said = true;
          out = "hello\n";
          return Step::kWait;
        }
        ++polls_;
        if (!release_) return Step::kWait;
        out = "bye\n";
        return Step::kDone;
      });
    });
    server_->set_inline_paths({"/healthz"});
    server_->set_exception_handler([](const Request&, Response& res, std::exception_ptr) {
      res.status = 500;
      res.set_content("handled", "text/plain");
    });
    auto port = server_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.has_value()) << port.error().message;
    port_ = *port;
    server_->Start();
  }
  void TearDown() override {
    release_ = true;
    if (server_) server_->Stop();
  }

  std::unique_ptr<Server> server_;
  std::uint16_t port_ = 0;
  std::atomic<bool> release_{false};
  std::atomic<int> slow_running_{0};
  std::atomic<int> polls_{0};
};

TEST_F(HttpServerTest, RoutesCapturesAndDecodesPathQueryAndHeaders) {
  Serve({});
  httplib::Client c("127.0.0.1", port_);
  c.set_keep_alive(true);
  auto r = c.Get("/echo/a%20b?x=1%202&y=%26&flag&x=3", {{"X-MIXED-CASE", "v"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "a b|flag=;x=1 2;x=3;y=&;|v");
  // '+' is a space in a query, not in a path; a broken escape stays as sent.
  EXPECT_EQ(ParseQuery("q=a+b%2B%zz").begin()->second, "a b+%zz");
  EXPECT_EQ(DecodeUrl("/a+b%41%", false), "/a+bA%");
  auto missing = c.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto thrown = c.Get("/throw");
  ASSERT_TRUE(thrown);
  EXPECT_EQ(thrown->status, 500);
  EXPECT_EQ(thrown->body, "handled");
  // The same connection goes on after all of that.
  auto again = c.Get("/echo/z");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(server_->stats().accepted, 1u);
}

TEST_F(HttpServerTest, BodyAndHeaderLimitsAreRefusedWithTheirStatus) {
  ServerOptions o;
  o.max_body_bytes = 1000;
  o.max_header_bytes = 2048;
  o.max_header_fields = 20;
  Serve(o);
  httplib::Client c("127.0.0.1", port_);
  auto ok = c.Post("/body", std::string(1000, 'b'), "text/plain");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->body, "1000");
  auto big = c.Post("/body", std::string(5000, 'b'), "text/plain");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  auto header = c.Get("/echo/a", {{"X-Pad", std::string(4000, 'h')}});
  ASSERT_TRUE(header);
  EXPECT_EQ(header->status, 431);
  httplib::Headers many;
  for (int i = 0; i < 30; ++i) many.emplace("X-" + std::to_string(i), "v");
  auto fields = c.Get("/echo/a", many);
  ASSERT_TRUE(fields);
  EXPECT_EQ(fields->status, 431);
  auto target = c.Get("/echo/" + std::string(9000, 'a'));
  ASSERT_TRUE(target);
  EXPECT_NE(target->status, 200);
  auto s = server_->stats();
  EXPECT_EQ(s.body_too_large, 1u);
  EXPECT_GE(s.header_too_large, 2u);
}

TEST_F(HttpServerTest, ABodyAfterExpectContinueIsAskedFor) {
  Serve({});
  RawConn raw(port_);
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(
      raw.Send("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n"
               "Connection: close\r\n\r\n"));
  // The body goes only after the server asked for it.
  EXPECT_EQ(raw.ReadSome(), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(raw.Send("hello"));
  const std::string all = raw.ReadAll();
  EXPECT_EQ(all.rfind("HTTP/1.1 200 OK", 0), 0u) << all;
  EXPECT_NE(all.find("\r\n\r\n5"), std::string::npos) << all;
}

TEST_F(HttpServerTest, ASlowOrSilentClientIsCutOffAtTheRequestDeadline) {
  ServerOptions o;
  o.request_timeout = 300ms;
  Serve(o);
  RawConn trickle(port_);
  RawConn silent(port_);
  ASSERT_TRUE(trickle.connected() && silent.connected());
  // A header sent a byte at a time, each well within any per-read timeout:
  // the whole request still has to arrive within the deadline.
  const std::string head = "GET /echo/a HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  bool cut = false;
  for (std::size_t i = 0; i < 40 && !cut; ++i) {
    cut = !trickle.Send(std::string(1, i < head.size() ? head[i] : 'a'));
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(trickle.Closed());
  EXPECT_TRUE(silent.Closed());
  EXPECT_GE(server_->stats().timeouts, 2u);
  // Others are served all along.
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, ConnectionsOverTheSourceLimitAreClosedAndOthersStillServed) {
  ServerOptions o;
  o.max_connections_per_source = 4;
  Serve(o);
  std::vector<std::unique_ptr<RawConn>> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<RawConn>(port_));
  // Let the server accept them before the fifth.
  for (int i = 0; i < 200 && server_->stats().open < 4; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(server_->stats().open, 4u);
  RawConn fifth(port_);
  ASSERT_TRUE(fifth.connected());  // the kernel accepts; the server closes it
  EXPECT_TRUE(fifth.Closed());
  EXPECT_EQ(server_->stats().refused_source_connections, 1u);
  held.pop_back();
  for (int i = 0; i < 200 && server_->stats().open > 3; ++i) std::this_thread::sleep_for(5ms);
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/echo/ok");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, WaitingStreamsHoldNoWorkerAndEndWhenTheirClientLeaves) {
  ServerOptions o;
  o.workers = 2;
  o.stream_poll = 20ms;
  Serve(o);
  // Ten streams on two workers: each said its first line and waits.
  std::vector<std::unique_ptr<RawConn>> streams;
  for (int i = 0; i < 10; ++i) {
    streams.push_back(std::make_unique<RawConn>(port_));
    ASSERT_TRUE(
        streams.back()->Send("GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  }
  for (int i = 0; i < 400 && server_->stats().streams_open < 10; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(server_->stats().streams_open, 10u);
  // A plain request still gets a worker at once.
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(2s);
  auto r = c.Get("/echo/through");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Clients that leave end their streams without anything more sent.
  streams.resize(4);
  for (int i = 0; i < 400 && server_->stats().streams_open > 4; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(server_->stats().streams_open, 4u);
  release_ = true;
  const std::string all = streams[0]->ReadAll();
  EXPECT_NE(all.find("Transfer-Encoding: chunked"), std::string::npos) << all;
  EXPECT_NE(all.find("6\r\nhello\n\r\n"), std::string::npos) << all;
  EXPECT_NE(all.find("4\r\nbye\n\r\n0\r\n\r\n"), std::string::npos) << all;
  EXPECT_GT(polls_.load(), 0);
}

TEST_F(HttpServerTest, InlinePathsAnswerWhileEveryWorkerIsBusy) {
  ServerOptions o;
  o.workers = 2;
  Serve(o);
  std::vector<std::thread> busy;
  for (int i = 0; i < 3; ++i) {
    busy.emplace_back([this] {
      httplib::Client c("127.0.0.1", port_);
      c.set_read_timeout(10s);
      c.Get("/slow");
    });
  }
  for (int i = 0; i < 400 && slow_running_ < 2; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(slow_running_.load(), 2);
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(2s);
  auto r = c.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "ok");
  release_ = true;
  for (auto& t : busy) t.join();
}

TEST_F(HttpServerTest, StopClosesOpenConnectionsAndReturns) {
  Serve({});
  RawConn idle(port_);
  RawConn stream(port_);
  ASSERT_TRUE(stream.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  // The stream is open once its first chunk has reached the client; counting
  // it open on the server side is earlier than the write.
  std::string got;
  for (int i = 0; i < 50 && got.find("hello") == std::string::npos; ++i) got += stream.ReadSome();
  ASSERT_NE(got.find("hello"), std::string::npos) << got;
  server_->Stop();
  EXPECT_FALSE(server_->running());
  EXPECT_TRUE(idle.Closed());
  EXPECT_TRUE(stream.Closed());
}

}  // namespace
}  // namespace berth::http
