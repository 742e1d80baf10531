// berthd's HTTP/1.1 server: asynchronous I/O on a few threads (Asio and
// Beast), handlers on a bounded worker pool, TLS as configured. Reading a
// request and writing an answer never hold a worker, and a streamed body
// that waits for data (a followed log) holds no thread at all, so slow
// clients and idle streams cannot starve /healthz or a submission.
//
// Every limit is a refusal with a status, counted in Stats():
//   header bytes and fields   431, connection closed
//   body bytes                413, connection closed
//   the whole request         must arrive within request_timeout (slowloris)
//   an idle keep-alive        closed after request_timeout
//   a write                   a client that reads nothing for write_timeout
//                             is cut off
//   connections               per source address and in all; over either,
//                             the new connection is closed at once
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "http/message.h"

namespace berth::http {

struct TlsFiles {
  std::filesystem::path cert;
  std::filesystem::path key;
};

struct ServerOptions {
  std::size_t max_body_bytes = 2 * 1024 * 1024;
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_header_fields = 100;
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds write_timeout{10'000};
  // How often a waiting stream's producer is asked again.
  std::chrono::milliseconds stream_poll{100};
  std::size_t max_connections = 4096;
  std::size_t max_connections_per_source = 512;
  // Threads doing I/O, and threads running handlers.
  int io_threads = 1;
  int workers = 8;
  std::optional<TlsFiles> tls;  // none: plain HTTP
};

// What the server refused and how busy it is, for /metrics and the tests.
struct ServerStats {
  std::uint64_t accepted = 0;
  std::uint64_t open = 0;
  std::uint64_t requests = 0;
  std::uint64_t streams_open = 0;
  std::uint64_t refused_source_connections = 0;  // over max_connections_per_source
  std::uint64_t refused_connections = 0;         // over max_connections
  std::uint64_t header_too_large = 0;            // 431
  std::uint64_t body_too_large = 0;              // 413
  std::uint64_t bad_requests = 0;                // malformed HTTP: 400
  std::uint64_t timeouts = 0;                    // request, idle or write deadline passed
  std::uint64_t tls_failures = 0;                // handshakes that failed
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Routes: `pattern` is a regex matched against the whole decoded path;
  // the first route registered that matches wins. Register before Start.
  void Get(std::string pattern, Handler handler);
  void Post(std::string pattern, Handler handler);
  void Delete(std::string pattern, Handler handler);
  // HEAD: the handler answers as for GET; the server sends the headers and
  // the Content-Length of its body, never the body.
  void Head(std::string pattern, Handler handler);
  // Runs before routing; true: it answered and no route runs.
  void set_pre_routing(std::function<bool(const Request&, Response&)> hook);
  // Fills the body of an error status a handler (or the router's 404, the
  // server's 413) left empty.
  void set_error_handler(Handler handler);
  // Answers a request whose handler threw (the exception does not pass
  // through the server).
  void set_exception_handler(std::function<void(const Request&, Response&, std::exception_ptr)> h);
  // The paths whose handlers run on the I/O thread, never queued behind the
  // workers: cheap answers only (/healthz).
  void set_inline_paths(std::vector<std::string> paths);

  // Listens on host:port (0: any free port); the port bound, or an error
  // naming the address.
  Result<std::uint16_t> Bind(const std::string& host, std::uint16_t port);
  // Starts accepting on the I/O threads; returns at once.
  void Start();
  // Blocks until Stop.
  void Wait();
  // Stops accepting, closes every connection and joins the threads;
  // handlers already running finish first. Safe from any thread, and twice.
  void Stop();
  bool running() const;

  ServerStats stats() const;
  const ServerOptions& options() const;

  // The server's state, shared with its connections (server.cc).
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace berth::http
