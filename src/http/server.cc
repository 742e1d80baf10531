#include "http/server.h"

#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <thread>
#include <unordered_map>

namespace berth::http {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

// Longer targets are refused before routing (414): the regex matcher of
// libstdc++ recurses per character.
constexpr std::size_t kMaxTargetBytes = 8192;
// After refusing a request whose body is still arriving, read and drop up
// to this much for up to a second, so the client reads the refusal instead
// of a reset.
constexpr std::size_t kLingerBytes = 1 << 20;
constexpr std::chrono::seconds kLingerTime{1};

struct Route {
  std::string method;
  std::regex re;
  Handler handler;
};

struct Counters {
  std::atomic<std::uint64_t> accepted{0}, requests{0}, streams_open{0}, refused_source{0},
      refused{0}, header_too_large{0}, body_too_large{0}, bad_requests{0}, timeouts{0},
      tls_failures{0};
};

std::string ReasonPhrase(int status) {
  auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return reason.empty() ? std::string("Unknown") : std::string(reason);
}

bool PeerClosed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Posts a close onto the session's own strand.
  virtual void CloseSoon() = 0;
  // Closes at once: only once no I/O thread runs.
  virtual void CloseNow() = 0;
};

struct Server::Impl {
  explicit Impl(ServerOptions o) : opt(std::move(o)) {}

  ServerOptions opt;
  std::vector<Route> routes;
  std::function<bool(const Request&, Response&)> pre_routing;
  Handler error_handler;
  std::function<void(const Request&, Response&, std::exception_ptr)> exception_handler;
  std::vector<std::string> inline_paths;

  // Sessions outlive the I/O context's queue only until it is destroyed,
  // and forget themselves here: these are declared (so destroyed) first.
  Counters counters;
  mutable std::mutex conn_mu;
  std::unordered_map<std::string, std::size_t> per_source;
  std::size_t open = 0;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> live;
  std::atomic<bool> started{false};
  std::atomic<bool> stopping{false};
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopped = false;

  std::optional<net::ssl::context> ssl;
  net::io_context ioc;
  tcp::acceptor acceptor{net::make_strand(ioc)};
  std::optional<net::thread_pool> pool;
  std::vector<std::thread> io;

  void Dispatch(Request& req, Response& res);
  // The answer to a request the server refused itself (400, 413, 414, 431).
  Response Refusal(int status, const Request& req, std::string message);
  void Accept();
  void OnAccept(tcp::socket socket);
  void Forget(SessionBase* session, const std::string& source) {
    std::lock_guard lock(conn_mu);
    live.erase(session);
    if (auto it = per_source.find(source); it != per_source.end() && --it->second == 0) {
      per_source.erase(it);
    }
    --open;
  }
};

namespace {

template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

 public:
  Session(Server::Impl& server, Stream stream, std::string source, std::uint16_t port)
      : server_(server),
        stream_(std::move(stream)),
        source_(std::move(source)),
        port_(port),
        timer_(stream_.get_executor()) {}
  ~Session() override { server_.Forget(this, source_); }

  void Start() {
    if constexpr (kTls) {
      Lowest().expires_after(server_.opt.request_timeout);
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) {
                                  ++self->server_.counters.tls_failures;
                                  if (ec == beast::error::timeout)
                                    ++self->server_.counters.timeouts;
                                  return self->Close();
                                }
                                self->ReadHeader();
                              });
    } else {
      ReadHeader();
    }
  }

  void CloseNow() override { Close(); }
  void CloseSoon() override {
    net::post(stream_.get_executor(), [weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->Close();
    });
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void ReadHeader() {
    if (server_.stopping) return Close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.opt.max_header_bytes));
    parser_->body_limit(server_.opt.max_body_bytes);
    // One deadline for the whole request, header and body, and for the
    // wait before it on a kept-alive connection.
    Lowest().expires_after(server_.opt.request_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                               self->OnHeader(ec);
                             });
  }

  Request PartialRequest() const {
    Request r;
    r.remote_addr = source_;
    r.remote_port = port_;
    if (parser_ && parser_->is_header_done()) {
      const auto& m = parser_->get();
      r.method = std::string(m.method_string());
      r.target = std::string(m.target());
      r.path = DecodeUrl(r.target.substr(0, r.target.find('?')), false);
    }
    return r;
  }

  // A read that failed: the peer left, a deadline passed, or the request
  // broke a limit or HTTP itself.
  void OnReadError(beast::error_code ec) {
    auto& c = server_.counters;
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == net::ssl::error::stream_truncated) {
      return Close();
    }
    if (ec == beast::error::timeout) {
      ++c.timeouts;
      return Close();
    }
    if (ec == bhttp::error::header_limit) {
      ++c.header_too_large;
      return Refuse(431, fmt::format("request header too large: at most {} bytes",
                                     server_.opt.max_header_bytes));
    }
    if (ec == bhttp::error::body_limit) {
      ++c.body_too_large;
      return Refuse(413, fmt::format("request body too large: the limit is {} bytes",
                                     server_.opt.max_body_bytes));
    }
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category()) {
      ++c.bad_requests;
      return Refuse(400, fmt::format("malformed HTTP request: {}", ec.message()));
    }
    Close();
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& m = parser_->get();
    std::size_t fields = 0;
    for (auto it = m.begin(); it != m.end(); ++it) ++fields;
    if (fields > server_.opt.max_header_fields) {
      ++server_.counters.header_too_large;
      return Refuse(431, fmt::format("too many request header fields: at most {}",
                                     server_.opt.max_header_fields));
    }
    if (m.target().size() > kMaxTargetBytes) {
      ++server_.counters.bad_requests;
      return Refuse(414, fmt::format("request target too long: at most {} bytes", kMaxTargetBytes));
    }
    if (beast::iequals(m[bhttp::field::expect], "100-continue") && !parser_->is_done()) {
      // The client waits for this before it sends the body (curl does).
      continue_ = "HTTP/1.1 100 Continue\r\n\r\n";
      Lowest().expires_after(server_.opt.write_timeout);
      return net::async_write(stream_, net::buffer(continue_),
                              [self = this->shared_from_this()](beast::error_code e, std::size_t) {
                                if (e) return self->Close();
                                self->ReadBody();
                              });
    }
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) return OnBody({});
    bhttp::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    Lowest().expires_never();
    ++server_.counters.requests;
    auto message = parser_->release();
    parser_.reset();
    keep_alive_ = message.keep_alive();
    auto req = std::make_shared<Request>();
    req->method = std::string(message.method_string());
    req->target = std::string(message.target());
    const auto q = req->target.find('?');
    req->path = DecodeUrl(std::string_view(req->target).substr(0, q), false);
    if (q != std::string::npos)
      req->params = ParseQuery(std::string_view(req->target).substr(q + 1));
    for (const auto& f : message) {
      req->headers.emplace(std::string(f.name_string()), std::string(f.value()));
    }
    req->body = std::move(message.body());
    req->remote_addr = source_;
    req->remote_port = port_;

    head_ = req->method == "HEAD";
    auto run = [self = this->shared_from_this(), req] {
      auto res = std::make_shared<Response>();
      self->server_.Dispatch(*req, *res);
      net::post(self->stream_.get_executor(), [self, res] { self->Send(res); });
    };
    const auto& inl = server_.inline_paths;
    if (std::find(inl.begin(), inl.end(), req->path) != inl.end()) {
      run();
    } else {
      net::post(*server_.pool, std::move(run));
    }
  }

  void Refuse(int status, std::string message) {
    keep_alive_ = false;
    head_ = false;
    linger_ = true;
    auto res =
        std::make_shared<Response>(server_.Refusal(status, PartialRequest(), std::move(message)));
    Send(std::move(res));
  }

  void Send(std::shared_ptr<Response> res) {
    if (server_.stopping) return Close();
    if (res->producer) return StartStream(std::move(res));
    auto msg = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(res->status), 11);
    for (const auto& [name, value] : res->headers) msg->insert(name, value);
    msg->body() = std::move(res->body);
    msg->keep_alive(keep_alive_);
    msg->prepare_payload();
    // A HEAD answer says how long the body would be and sends none.
    if (head_) msg->body().clear();
    Lowest().expires_after(server_.opt.write_timeout);
    bhttp::async_write(stream_, *msg,
                       [self = this->shared_from_this(), msg](beast::error_code ec, std::size_t) {
                         if (ec) {
                           if (ec == beast::error::timeout) ++self->server_.counters.timeouts;
                           return self->Close();
                         }
                         self->AfterAnswer();
                       });
  }

  void AfterAnswer() {
    if (linger_) return Linger();
    if (!keep_alive_) return Shutdown();
    ReadHeader();
  }

  // --- streamed bodies -------------------------------------------------------

  void StartStream(std::shared_ptr<Response> res) {
    stream_res_ = std::move(res);
    ++server_.counters.streams_open;
    streaming_ = true;
    std::string head =
        fmt::format("HTTP/1.1 {} {}\r\n", stream_res_->status, ReasonPhrase(stream_res_->status));
    for (const auto& [name, value] : stream_res_->headers) {
      head += fmt::format("{}: {}\r\n", name, value);
    }
    if (stream_res_->stream_length) {
      head += fmt::format("Content-Length: {}\r\n", *stream_res_->stream_length);
    } else {
      head += "Transfer-Encoding: chunked\r\n";
    }
    if (!keep_alive_) head += "Connection: close\r\n";
    head += "\r\n";
    out_ = std::move(head);
    Write([self = this->shared_from_this()] { self->Produce(); });
  }

  void Produce() {
    if (server_.stopping) return Close();
    net::post(*server_.pool, [self = this->shared_from_this()] {
      std::string chunk;
      Step step = Step::kAbort;
      try {
        step = self->stream_res_->producer(chunk);
      } catch (const std::exception& e) {
        spdlog::error("HTTP: a streamed body failed: {}", e.what());
      }
      net::post(self->stream_.get_executor(), [self, chunk = std::move(chunk), step]() mutable {
        self->OnProduced(std::move(chunk), step);
      });
    });
  }

  void OnProduced(std::string chunk, Step step) {
    if (server_.stopping) return Close();
    out_.clear();
    const auto& length = stream_res_->stream_length;
    if (!chunk.empty()) {
      if (length) {
        const std::uint64_t room = *length - std::min(*length, sent_);
        if (chunk.size() > room) chunk.resize(room);
        sent_ += chunk.size();
        out_ = std::move(chunk);
      } else {
        out_ = fmt::format("{:x}\r\n", chunk.size());
        out_ += chunk;
        out_ += "\r\n";
      }
    }
    if (step == Step::kDone && !length) out_ += "0\r\n\r\n";
    auto next = [self = this->shared_from_this(), step] {
      switch (step) {
        case Step::kMore:
          return self->Produce();
        case Step::kWait:
          return self->Wait();
        case Step::kDone:
          return self->EndStream();
        case Step::kAbort:
          return self->Close();
      }
    };
    if (out_.empty()) return next();
    Write(std::move(next));
  }

  void Wait() {
    // A client that went away while nothing was sent is noticed here, not
    // at the next write, which may never come.
    if (PeerClosed(Lowest().socket().native_handle())) return Close();
    Lowest().expires_never();
    timer_.expires_after(server_.opt.stream_poll);
    timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return self->Close();
      self->Produce();
    });
  }

  void EndStream() {
    streaming_ = false;
    --server_.counters.streams_open;
    const auto& length = stream_res_->stream_length;
    const bool short_body = length && sent_ != *length;
    stream_res_.reset();
    sent_ = 0;
    if (short_body) return Close();  // the client sees fewer bytes than promised
    AfterAnswer();
  }

  template <class Next>
  void Write(Next next) {
    Lowest().expires_after(server_.opt.write_timeout);
    net::async_write(stream_, net::buffer(out_),
                     [self = this->shared_from_this(), next = std::move(next)](
                         beast::error_code ec, std::size_t) mutable {
                       if (ec) {
                         if (ec == beast::error::timeout) ++self->server_.counters.timeouts;
                         return self->Close();
                       }
                       next();
                     });
  }

  // --- ending ----------------------------------------------------------------

  // Reads and drops what the client still sends, briefly, then closes.
  void Linger() {
    linger_ = false;
    beast::error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    Lowest().expires_after(kLingerTime);
    LingerRead();
  }
  void LingerRead() {
    drain_.resize(16 * 1024);
    Lowest().async_read_some(net::buffer(drain_), [self = this->shared_from_this()](
                                                      beast::error_code ec, std::size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ >= kLingerBytes) return self->Close();
      self->LingerRead();
    });
  }

  void Shutdown() {
    if constexpr (kTls) {
      Lowest().expires_after(std::chrono::seconds(1));
      stream_.async_shutdown(
          [self = this->shared_from_this()](beast::error_code) { self->Close(); });
    } else {
      beast::error_code ec;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
      Close();
    }
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    if (streaming_) {
      streaming_ = false;
      --server_.counters.streams_open;
    }
    timer_.cancel();
    beast::error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    Lowest().close();
  }

  Server::Impl& server_;
  Stream stream_;
  std::string source_;
  std::uint16_t port_;
  net::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool keep_alive_ = true;
  bool head_ = false;  // the request being answered is a HEAD
  bool linger_ = false;
  bool closed_ = false;
  bool streaming_ = false;
  std::string continue_;
  std::string out_;
  std::string drain_;
  std::size_t lingered_ = 0;
  std::shared_ptr<Response> stream_res_;
  std::uint64_t sent_ = 0;
};

}  // namespace

Response Server::Impl::Refusal(int status, const Request& req, std::string message) {
  Response res;
  res.status = status;
  res.reason = message;
  if (error_handler) error_handler(req, res);
  if (res.body.empty()) res.set_content(message + "\n", "text/plain; charset=utf-8");
  return res;
}

void Server::Impl::Dispatch(Request& req, Response& res) {
  try {
    if (!(pre_routing && pre_routing(req, res))) {
      const Route* hit = nullptr;
      std::smatch m;
      for (const auto& r : routes) {
        if (r.method == req.method && std::regex_match(req.path, m, r.re)) {
          hit = &r;
          break;
        }
      }
      if (hit == nullptr) {
        res.status = 404;
      } else {
        req.matches.clear();
        for (const auto& sub : m) req.matches.push_back(sub.str());
        hit->handler(req, res);
      }
    }
  } catch (...) {
    res.body.clear();
    res.producer = nullptr;
    res.stream_length.reset();
    res.status = 500;
    if (exception_handler) {
      try {
        exception_handler(req, res, std::current_exception());
      } catch (...) {
        spdlog::error("HTTP: the exception handler threw");
      }
    }
  }
  if (res.status == -1) res.status = 200;
  if (res.status >= 400 && res.body.empty() && !res.producer && error_handler) {
    try {
      error_handler(req, res);
    } catch (...) {
      spdlog::error("HTTP: the error handler threw");
    }
  }
}

void Server::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || stopping) return;
    if (!ec) {
      OnAccept(std::move(socket));
    } else {
      // Out of descriptors, most likely: the next accept is tried anyway.
      spdlog::warn("HTTP: accept failed: {}", ec.message());
    }
    Accept();
  });
}

void Server::Impl::OnAccept(tcp::socket socket) {
  beast::error_code ec;
  auto peer = socket.remote_endpoint(ec);
  if (ec) return;
  std::string source = peer.address().to_string();
  {
    std::lock_guard lock(conn_mu);
    if (open >= opt.max_connections) {
      ++counters.refused;
      return;
    }
    auto& n = per_source[source];
    if (n >= opt.max_connections_per_source) {
      ++counters.refused_source;
      return;
    }
    ++n;
    ++open;
  }
  ++counters.accepted;
  socket.set_option(tcp::no_delay(true), ec);
  auto start = [&](auto s) {
    {
      std::lock_guard lock(conn_mu);
      live[s.get()] = s;
    }
    s->Start();
  };
  if (ssl) {
    start(std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        *this, beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *ssl),
        source, peer.port()));
  } else {
    start(std::make_shared<Session<beast::tcp_stream>>(*this, beast::tcp_stream(std::move(socket)),
                                                       source, peer.port()));
  }
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() {
  Stop();
}

void Server::Get(std::string pattern, Handler handler) {
  impl_->routes.push_back(Route{"GET", std::regex(pattern), std::move(handler)});
}
void Server::Post(std::string pattern, Handler handler) {
  impl_->routes.push_back(Route{"POST", std::regex(pattern), std::move(handler)});
}
void Server::Delete(std::string pattern, Handler handler) {
  impl_->routes.push_back(Route{"DELETE", std::regex(pattern), std::move(handler)});
}

void Server::Head(std::string pattern, Handler handler) {
  impl_->routes.push_back(Route{"HEAD", std::regex(pattern), std::move(handler)});
}
void Server::set_pre_routing(std::function<bool(const Request&, Response&)> hook) {
  impl_->pre_routing = std::move(hook);
}
void Server::set_error_handler(Handler handler) {
  impl_->error_handler = std::move(handler);
}
void Server::set_exception_handler(
    std::function<void(const Request&, Response&, std::exception_ptr)> h) {
  impl_->exception_handler = std::move(h);
}
void Server::set_inline_paths(std::vector<std::string> paths) {
  impl_->inline_paths = std::move(paths);
}

Result<std::uint16_t> Server::Bind(const std::string& host, std::uint16_t port) {
  auto& d = *impl_;
  if (d.opt.tls && !d.ssl) {
    try {
      d.ssl.emplace(net::ssl::context::tls_server);
      d.ssl->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                         net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                         net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use);
      d.ssl->use_certificate_chain_file(d.opt.tls->cert.string());
      d.ssl->use_private_key_file(d.opt.tls->key.string(), net::ssl::context::pem);
    } catch (const std::exception& e) {
      d.ssl.reset();
      return Fail(Code::kInvalidArgument,
                  fmt::format("cannot serve HTTPS with {} and {}: {}", d.opt.tls->cert.string(),
                              d.opt.tls->key.string(), e.what()));
    }
  }
  beast::error_code ec;
  tcp::resolver resolver(d.ioc);
  auto found = resolver.resolve(host, std::to_string(port),
                                tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) {
    return Fail(Code::kInvalidArgument, fmt::format("cannot listen on {}:{}: {}", host, port,
                                                    ec ? ec.message() : "no address"));
  }
  tcp::endpoint ep = found.begin()->endpoint();
  d.acceptor.open(ep.protocol(), ec);
  if (!ec) d.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) d.acceptor.bind(ep, ec);
  if (!ec) d.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    d.acceptor.close(ignored);
    return Fail(Code::kUnavailable,
                fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  }
  return d.acceptor.local_endpoint().port();
}

void Server::Start() {
  auto& d = *impl_;
  if (d.started.exchange(true)) return;
  d.pool.emplace(static_cast<std::size_t>(std::max(1, d.opt.workers)));
  d.Accept();
  for (int i = 0; i < std::max(1, d.opt.io_threads); ++i) {
    d.io.emplace_back([&d] {
      auto guard = net::make_work_guard(d.ioc);
      for (;;) {
        try {
          d.ioc.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("HTTP: an I/O handler threw: {}", e.what());
        }
      }
    });
  }
}

void Server::Wait() {
  std::unique_lock lock(impl_->stop_mu);
  impl_->stop_cv.wait(lock, [&] { return impl_->stopped || !impl_->started; });
}

void Server::Stop() {
  auto& d = *impl_;
  if (d.stopping.exchange(true)) {
    Wait();
    return;
  }
  if (d.started) {
    net::post(d.acceptor.get_executor(), [&d] {
      beast::error_code ec;
      d.acceptor.close(ec);
    });
    std::vector<std::shared_ptr<SessionBase>> sessions;
    {
      std::lock_guard lock(d.conn_mu);
      for (auto& [_, weak] : d.live) {
        if (auto s = weak.lock()) sessions.push_back(std::move(s));
      }
    }
    for (auto& s : sessions) s->CloseSoon();
    sessions.clear();
    // Handlers already running finish; their answers find the sessions
    // closed.
    d.pool->join();
    d.ioc.stop();
    for (auto& t : d.io) t.join();
    d.io.clear();
    // Connections accepted after the closes were posted: no thread runs
    // now, so they are closed here.
    {
      std::lock_guard lock(d.conn_mu);
      for (auto& [_, weak] : d.live) {
        if (auto s = weak.lock()) sessions.push_back(std::move(s));
      }
    }
    for (auto& s : sessions) s->CloseNow();
    sessions.clear();
  }
  {
    std::lock_guard lock(d.stop_mu);
    d.stopped = true;
  }
  d.stop_cv.notify_all();
}

bool Server::running() const {
  return impl_->started && !impl_->stopping;
}

ServerStats Server::stats() const {
  const auto& c = impl_->counters;
  ServerStats s;
  s.accepted = c.accepted;
  {
    std::lock_guard lock(impl_->conn_mu);
    s.open = impl_->open;
  }
  s.requests = c.requests;
  s.streams_open = c.streams_open;
  s.refused_source_connections = c.refused_source;
  s.refused_connections = c.refused;
  s.header_too_large = c.header_too_large;
  s.body_too_large = c.body_too_large;
  s.bad_requests = c.bad_requests;
  s.timeouts = c.timeouts;
  s.tls_failures = c.tls_failures;
  return s;
}

const ServerOptions& Server::options() const {
  return impl_->opt;
}

}  // namespace berth::http
