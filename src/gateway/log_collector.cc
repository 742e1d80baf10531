#include "gateway/log_collector.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace berth::gateway {

namespace {

std::string CollectorErrno() {
  return std::generic_category().message(errno);
}

// Datagrams read per wake-up, and the largest line kept (HAProxy's default
// log line length is 1024; Berth's lines are under 200 bytes).
constexpr int kCollectorBatch = 64;
constexpr std::size_t kCollectorLineBytes = 2048;

}  // namespace

Result<std::unique_ptr<RequestLogCollector>> RequestLogCollector::Start(
    const std::filesystem::path& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string p = path.string();
  if (p.size() >= sizeof(addr.sun_path)) {
    return Fail(Code::kInvalidArgument, "log socket path too long: " + p, "state_dir");
  }
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  std::unique_ptr<RequestLogCollector> c(new RequestLogCollector());
  c->fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (c->fd_ < 0) return Fail(Code::kInternal, fmt::format("socket: {}", CollectorErrno()));
  // Linux gives the socket file the socket inode's mode (less the umask):
  // set it before bind so that the file is never wider than 0600.
  (void)fchmod(c->fd_, 0600);
  if (unlink(p.c_str()) != 0 && errno != ENOENT) {
    return Fail(Code::kInternal, fmt::format("unlink {}: {}", p, CollectorErrno()));
  }
  if (bind(c->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Fail(Code::kInternal, fmt::format("bind {}: {}", p, CollectorErrno()));
  }
  if (chmod(p.c_str(), 0600) != 0) {
    return Fail(Code::kInternal, fmt::format("chmod {}: {}", p, CollectorErrno()));
  }
  // The receive queue holds at most net.unix.max_dgram_qlen datagrams
  // (10 by default); a larger buffer keeps bursts of longer lines too.
  const int rcvbuf = 1 << 20;
  (void)setsockopt(c->fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  c->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->wake_fd_ < 0) return Fail(Code::kInternal, fmt::format("eventfd: {}", CollectorErrno()));
  c->reader_ = std::thread([raw = c.get()] { raw->Run(); });
  return c;
}

RequestLogCollector::~RequestLogCollector() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void RequestLogCollector::Stop() {
  if (reader_.joinable()) {
    const std::uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    reader_.join();
  }
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
}

void RequestLogCollector::Run() {
  while (true) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int ready = poll(fds, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      std::lock_guard lock(mu_);
      reader_error_ = fmt::format("poll: {}", CollectorErrno());
      return;
    }
    if (fds[1].revents != 0) {
      // Stopping: keep what HAProxy already sent.
      while (ReadBatch() > 0) {
      }
      return;
    }
    if (fds[0].revents & (POLLERR | POLLNVAL)) {
      std::lock_guard lock(mu_);
      reader_error_ = "the log socket failed";
      return;
    }
    if (ReadBatch() < 0) return;
  }
}

int RequestLogCollector::ReadBatch() {
  if (buffer_.empty()) buffer_.resize(kCollectorBatch * kCollectorLineBytes);
  std::array<iovec, kCollectorBatch> iov{};
  std::array<mmsghdr, kCollectorBatch> msgs{};
  for (int i = 0; i < kCollectorBatch; ++i) {
    iov[i] = {buffer_.data() + i * kCollectorLineBytes, kCollectorLineBytes};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const int n = recvmmsg(fd_, msgs.data(), kCollectorBatch, MSG_DONTWAIT, nullptr);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    std::lock_guard lock(mu_);
    reader_error_ = fmt::format("recvmmsg: {}", CollectorErrno());
    return -1;
  }
  // Parse outside the lock; record under it, once per batch.
  std::vector<Result<RequestLogEntry>> parsed;
  parsed.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
      parsed.push_back(Fail(Code::kInvalidArgument,
                            fmt::format("request log: a line over {} bytes", kCollectorLineBytes)));
      continue;
    }
    parsed.push_back(ParseRequestLog(
        std::string_view(buffer_.data() + i * kCollectorLineBytes, msgs[i].msg_len)));
  }
  std::lock_guard lock(mu_);
  for (auto& entry : parsed) {
    aggregator_.CountDatagram();
    if (entry) {
      aggregator_.Record(*entry);
    } else if (entry.error().field == "tag") {
      aggregator_.RecordMessage(std::move(entry.error().message));
    } else {
      aggregator_.RecordUnparsed(std::move(entry.error().message));
    }
  }
  return n;
}

std::vector<RouteLatency> RequestLogCollector::TakeWindow() {
  std::lock_guard lock(mu_);
  return aggregator_.TakeWindow();
}

std::vector<RouteLatencyHistogram> RequestLogCollector::Cumulative() {
  std::lock_guard lock(mu_);
  return aggregator_.Cumulative();
}

RequestLogCounters RequestLogCollector::Counters() {
  std::lock_guard lock(mu_);
  return aggregator_.counters();
}

void RequestLogCollector::Retain(const std::vector<std::string>& backends) {
  std::lock_guard lock(mu_);
  aggregator_.Retain(backends);
}

std::string RequestLogCollector::ReaderError() {
  std::lock_guard lock(mu_);
  return reader_error_;
}

}  // namespace berth::gateway
