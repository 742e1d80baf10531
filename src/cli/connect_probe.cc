#include "cli/connect_probe.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace berth::cli {
namespace {

// strerror() is not thread-safe; GNU strerror_r returns the text to use.
std::string ErrnoText(int err) {
  char buf[128];
  return std::string(strerror_r(err, buf, sizeof(buf)));
}

}  // namespace

std::optional<std::string> ProbeConnectFailure(const std::string& host, int port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return std::string(gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addrs(found, &freeaddrinfo);
  std::string reason = "no usable address";
  for (const addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      reason = ErrnoText(errno);
      continue;
    }
    // On Linux SO_SNDTIMEO also bounds a blocking connect().
    timeval tv{timeout_ms / 1000, static_cast<suseconds_t>(timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    int saved = errno;
    close(fd);
    if (rc == 0) return std::nullopt;
    // EINPROGRESS after SO_SNDTIMEO means the timeout expired.
    reason = ErrnoText(saved == EINPROGRESS ? ETIMEDOUT : saved);
  }
  return reason;
}

}  // namespace berth::cli
