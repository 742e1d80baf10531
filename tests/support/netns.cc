#include "support/netns.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace berth::tests {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSubnet = "10.77.0";  // each fabric's bridge is its own: no clash

fs::path IpBinary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return {};
}

// Runs `ip ARGS...`; its stderr on failure.
std::expected<void, std::string> Ip(const std::vector<std::string>& args) {
  const fs::path ip = IpBinary();
  if (ip.empty()) return std::unexpected("iproute2's ip is not installed");
  char err_path[] = "/tmp/berth-ip-XXXXXX";
  const int err_fd = ::mkstemp(err_path);
  if (err_fd < 0) return std::unexpected(fmt::format("mkstemp: {}", std::strerror(errno)));
  ::unlink(err_path);
  std::vector<std::string> argv{ip.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargs;
  for (auto& a : argv) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(null_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) {
      ::_exit(126);
    }
    ::execv(cargs[0], cargs.data());
    ::_exit(127);
  }
  int status = 0;
  while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string err;
  ::lseek(err_fd, 0, SEEK_SET);
  char buf[512];
  for (ssize_t n = 0; (n = ::read(err_fd, buf, sizeof buf)) > 0;) err.append(buf, n);
  ::close(err_fd);
  if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  while (!err.empty() && err.back() == '\n') err.pop_back();
  std::string line = "ip";
  for (const auto& a : args) line += " " + a;
  return std::unexpected(fmt::format("`{}` failed: {}", line, err.empty() ? "no message" : err));
}

// Namespaces of fabrics whose test process is gone ("bn<pid>x..."):
// left by a test that crashed before its destructor ran.
void RemoveLeftovers() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/run/netns", ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("bn")) continue;
    const auto x = name.find('x');
    if (x == std::string::npos || x < 3) continue;
    const int pid = std::atoi(name.substr(2, x - 2).c_str());
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    (void)Ip({"netns", "del", name});
  }
}

}  // namespace

std::optional<std::string> NetFabric::Unavailable() {
  if (::geteuid() != 0) return "network namespaces need root; run the tests as root (CI does)";
  if (IpBinary().empty()) return "iproute2's ip is not installed (apt-get install iproute2)";
  // A real probe: a namespace with a bridge, as Make() builds.
  auto fabric = Make();
  if (!fabric) return fabric.error();
  if (auto host = fabric->AddHost("probe"); !host) return host.error();
  return std::nullopt;
}

std::expected<NetFabric, std::string> NetFabric::Make() {
  static std::atomic<int> made = 0;
  RemoveLeftovers();
  NetFabric fabric;
  fabric.prefix_ = fmt::format("bn{}x{}", ::getpid(), made++);
  fabric.hub_ = fabric.prefix_ + "-hub";
  if (auto r = Ip({"netns", "add", fabric.hub_}); !r) return std::unexpected(r.error());
  fabric.made_.push_back(fabric.hub_);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-n", fabric.hub_, "link", "add", "br0", "type", "bridge"},
           {"-n", fabric.hub_, "link", "set", "br0", "up"}}) {
    if (auto r = Ip(args); !r) return std::unexpected(r.error());
  }
  return fabric;
}

NetFabric::NetFabric(NetFabric&& other) noexcept
    : prefix_(std::move(other.prefix_)),
      hub_(std::move(other.hub_)),
      hosts_(std::move(other.hosts_)),
      made_(std::move(other.made_)) {
  other.made_.clear();
}

NetFabric::~NetFabric() {
  // Hosts first: deleting a host's namespace deletes its veth, and the
  // bridge's end with it.
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) (void)Ip({"netns", "del", *it});
}

std::expected<std::string, std::string> NetFabric::AddHost(const std::string& name) {
  if (name.empty() || hosts_.contains(name) ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") != std::string::npos) {
    return std::unexpected(
        fmt::format("host name '{}': give a new name of letters and digits", name));
  }
  Host host;
  host.index = static_cast<int>(hosts_.size()) + 1;
  if (host.index > 200) return std::unexpected("a fabric holds at most 200 hosts");
  host.netns = fmt::format("{}-{}", prefix_, name);
  host.ip = fmt::format("{}.{}", kSubnet, 10 + host.index);
  if (auto r = Ip({"netns", "add", host.netns}); !r) return std::unexpected(r.error());
  made_.push_back(host.netns);
  const std::string port = fmt::format("h{}", host.index);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"link", "add", "eth0", "netns", host.netns, "type", "veth", "peer", "name", port,
            "netns", hub_},
           {"-n", host.netns, "addr", "add", host.ip + "/24", "dev", "eth0"},
           {"-n", host.netns, "link", "set", "lo", "up"},
           {"-n", host.netns, "link", "set", "eth0", "up"},
           {"-n", hub_, "link", "set", port, "master", "br0"},
           {"-n", hub_, "link", "set", port, "up"}}) {
    if (auto r = Ip(args); !r) return std::unexpected(r.error());
  }
  hosts_[name] = host;
  return host.ip;
}

std::string NetFabric::network() const {
  return fmt::format("{}.0/24", kSubnet);
}

std::expected<void, std::string> NetFabric::Cut(const std::string& a, const std::string& b) {
  if (!hosts_.contains(a) || !hosts_.contains(b)) {
    return std::unexpected(fmt::format("Cut({}, {}): no such host", a, b));
  }
  const Host& ha = hosts_.at(a);
  const Host& hb = hosts_.at(b);
  // A locally administered MAC that no interface holds: the bridge floods
  // the frame and every host's NIC drops it as addressed to another.
  const auto nowhere = [](const Host& h) { return fmt::format("02:00:00:00:77:{:02x}", h.index); };
  for (const auto& [from, to] : {std::pair{&ha, &hb}, std::pair{&hb, &ha}}) {
    if (auto r = Ip({"-n", from->netns, "neigh", "replace", to->ip, "lladdr", nowhere(*to), "dev",
                     "eth0", "nud", "permanent"});
        !r) {
      return r;
    }
  }
  return {};
}

std::expected<void, std::string> NetFabric::Heal(const std::string& a, const std::string& b) {
  if (!hosts_.contains(a) || !hosts_.contains(b)) {
    return std::unexpected(fmt::format("Heal({}, {}): no such host", a, b));
  }
  const Host& ha = hosts_.at(a);
  const Host& hb = hosts_.at(b);
  for (const auto& [from, to] : {std::pair{&ha, &hb}, std::pair{&hb, &ha}}) {
    if (auto r = Ip({"-n", from->netns, "neigh", "del", to->ip, "dev", "eth0"}); !r) return r;
  }
  return {};
}

ScopedNetns::ScopedNetns(const std::string& netns) {
  previous_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (previous_ < 0) {
    throw std::runtime_error(
        fmt::format("open /proc/thread-self/ns/net: {}", std::strerror(errno)));
  }
  const std::string path = "/run/netns/" + netns;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::close(previous_);
    throw std::runtime_error(fmt::format("enter network namespace {}: {}", path, why));
  }
  ::close(fd);
}

ScopedNetns::~ScopedNetns() {
  if (previous_ < 0) return;
  if (::setns(previous_, CLONE_NEWNET) != 0) std::abort();  // the thread would stay elsewhere
  ::close(previous_);
}

}  // namespace berth::tests
