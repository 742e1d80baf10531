#include "agent/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "agent/atomic_file.h"

namespace berth::agent {
namespace {

// The controllers a v1 host must offer, in the order they are reported.
constexpr const char* kV1Controllers[] = {"memory", "pids", "cpu", "freezer", "devices"};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

// A control file's text; "" when it cannot be read (a controller the host
// lacks, a cgroup already gone).
std::string ReadSmall(const std::string& path) {
  return ReadWholeFile(path).value_or("");
}

// Writes `value` to a cgroup control file; 0 or the errno.
int WriteControl(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n;
  do {
    n = ::write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  int err = n < 0 ? errno : 0;
  ::close(fd);
  return err;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// "key N" in a flat-keyed cgroup file (memory.events, memory.oom_control).
std::uint64_t KeyedValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  std::uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

void Nap(int ms) {
  timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1'000'000};
  ::nanosleep(&ts, nullptr);
}

std::string Errno(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

}  // namespace

const char* CgroupVersionName(CgroupVersion v) {
  switch (v) {
    case CgroupVersion::kV1:
      return "v1";
    case CgroupVersion::kV2:
      return "v2";
    case CgroupVersion::kNone:
      break;
  }
  return "none";
}

CgroupHost DetectCgroups(const std::string& mountinfo) {
  CgroupHost host;
  std::string v2_mount;
  std::map<std::string, std::string> v1;
  std::ifstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    // "ID PARENT MAJ:MIN ROOT MOUNT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER"
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    auto left = Split(line.substr(0, dash), ' ');
    auto right = Split(line.substr(dash + 3), ' ');
    if (left.size() < 5 || right.size() < 3) continue;
    const std::string& mount = left[4];
    if (right[0] == "cgroup2") {
      if (v2_mount.empty()) v2_mount = mount;
    } else if (right[0] == "cgroup") {
      for (const auto& opt : Split(right[2], ',')) {
        for (const char* want : kV1Controllers) {
          if (opt == want && !v1.contains(opt)) v1[opt] = mount;
        }
      }
    }
  }
  const bool root = ::geteuid() == 0;
  if (!v2_mount.empty()) {
    auto offered = Split(ReadSmall(v2_mount + "/cgroup.controllers"), ' ');
    for (auto& c : offered) {
      while (!c.empty() && (c.back() == '\n' || c.back() == ' ')) c.pop_back();
    }
    auto has = [&](const char* c) {
      return std::find(offered.begin(), offered.end(), c) != offered.end();
    };
    if (has("memory") && has("pids")) {
      host.version = CgroupVersion::kV2;
      host.v2_root = v2_mount;
      for (const char* c : {"memory", "pids", "cpu"}) {
        if (has(c)) {
          host.controllers.emplace_back(c);
        } else {
          host.missing.push_back(std::string(c) + ": not offered by the cgroup2 mount " + v2_mount);
        }
      }
      host.missing.emplace_back(
          "devices: cgroup v2 confines devices only through a BPF program, which Berth does not "
          "install yet; a run can open GPU devices it was not given");
    }
  }
  if (host.version == CgroupVersion::kNone && !v1.empty()) {
    host.version = CgroupVersion::kV1;
    for (const char* c : kV1Controllers) {
      auto it = v1.find(c);
      if (it == v1.end()) {
        host.missing.push_back(std::string(c) + ": no cgroup v1 hierarchy is mounted");
      } else {
        host.v1_roots[c] = it->second;
        host.controllers.emplace_back(c);
      }
    }
  }
  if (host.version == CgroupVersion::kNone) {
    host.missing.emplace_back(
        "cgroups: none mounted; runs have no memory, CPU or pids limit, and a stop reaches only "
        "the run's process group");
  } else if (!root) {
    host.missing.clear();
    host.missing.emplace_back(
        "cgroups: the agent is not root and cannot create cgroups; runs have no limits, and a "
        "stop reaches only the run's process group");
    host.version = CgroupVersion::kNone;
    host.controllers.clear();
    host.v1_roots.clear();
    host.v2_root.clear();
  }
  return host;
}

RunCgroup::RunCgroup(CgroupHost host, const std::string& parent, const std::string& name)
    : host_(std::move(host)), rel_(parent + "/" + name) {}

std::string RunCgroup::Dir(const std::string& controller) const {
  if (host_.version == CgroupVersion::kV2) return host_.v2_root + "/" + rel_;
  auto it = host_.v1_roots.find(controller);
  return it == host_.v1_roots.end() ? std::string() : it->second + "/" + rel_;
}

std::string RunCgroup::ProcsDir() const {
  if (host_.version == CgroupVersion::kV2) return Dir("");
  for (const char* c : {"freezer", "pids", "memory", "cpu", "devices"}) {
    if (host_.v1_roots.contains(c)) return Dir(c);
  }
  return {};
}

std::string RunCgroup::Create(const CgroupLimits& limits) {
  if (!enabled()) return {};
  const std::string parent = rel_.substr(0, rel_.rfind('/'));
  if (host_.version == CgroupVersion::kV2) {
    // Controllers reach a cgroup only when every ancestor delegates them.
    std::string enable;
    for (const auto& c : host_.controllers) enable += (enable.empty() ? "+" : " +") + c;
    std::string dir = host_.v2_root;
    (void)WriteControl(dir + "/cgroup.subtree_control", enable);
    for (const auto& part : Split(parent, '/')) {
      dir += "/" + part;
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir " + dir, errno);
      if (int err = WriteControl(dir + "/cgroup.subtree_control", enable); err != 0) {
        return Errno("enable " + enable + " in " + dir, err);
      }
    }
    const std::string run = Dir("");
    if (::mkdir(run.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir " + run, errno);
    if (limits.memory_bytes > 0) {
      if (int err = WriteControl(run + "/memory.max", std::to_string(limits.memory_bytes))) {
        return Errno("memory.max", err);
      }
      (void)WriteControl(run + "/memory.swap.max", "0");
    }
    if (limits.pids_max > 0) {
      if (int err = WriteControl(run + "/pids.max", std::to_string(limits.pids_max))) {
        return Errno("pids.max", err);
      }
    }
    if (limits.cpu_millis > 0 && Exists(run + "/cpu.max")) {
      if (int err =
              WriteControl(run + "/cpu.max",
                           std::to_string(std::uint64_t{limits.cpu_millis} * 100) + " 100000")) {
        return Errno("cpu.max", err);
      }
    }
    return {};
  }
  for (const auto& [controller, root] : host_.v1_roots) {
    std::string dir = root;
    for (const auto& part : Split(rel_, '/')) {
      dir += "/" + part;
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir " + dir, errno);
    }
  }
  if (limits.memory_bytes > 0 && host_.v1_roots.contains("memory")) {
    const std::string dir = Dir("memory");
    if (int err =
            WriteControl(dir + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes))) {
      return Errno("memory.limit_in_bytes", err);
    }
    // No swap beyond the limit where the kernel accounts it.
    if (Exists(dir + "/memory.memsw.limit_in_bytes")) {
      (void)WriteControl(dir + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes));
    }
    (void)WriteControl(dir + "/memory.swappiness", "0");
  }
  if (limits.pids_max > 0 && host_.v1_roots.contains("pids")) {
    if (int err = WriteControl(Dir("pids") + "/pids.max", std::to_string(limits.pids_max))) {
      return Errno("pids.max", err);
    }
  }
  if (limits.cpu_millis > 0 && host_.v1_roots.contains("cpu")) {
    const std::string dir = Dir("cpu");
    (void)WriteControl(dir + "/cpu.cfs_period_us", "100000");
    if (int err = WriteControl(dir + "/cpu.cfs_quota_us",
                               std::to_string(std::uint64_t{limits.cpu_millis} * 100))) {
      return Errno("cpu.cfs_quota_us", err);
    }
  }
  if (!limits.devices.empty() && host_.v1_roots.contains("devices")) {
    const std::string dir = Dir("devices");
    if (int err = WriteControl(dir + "/devices.deny", "a")) return Errno("devices.deny", err);
    for (const auto& rule : limits.devices) {
      if (int err = WriteControl(dir + "/devices.allow", rule)) {
        return Errno("devices.allow '" + rule + "'", err);
      }
    }
  }
  return {};
}

int RunCgroup::JoinSelf() const {
  if (!enabled()) return 0;
  if (host_.version == CgroupVersion::kV2) return WriteControl(Dir("") + "/cgroup.procs", "0");
  for (const auto& [controller, root] : host_.v1_roots) {
    if (int err = WriteControl(Dir(controller) + "/tasks", "0")) return err;
  }
  return 0;
}

std::vector<pid_t> RunCgroup::Pids() const {
  std::vector<pid_t> out;
  if (!enabled()) return out;
  std::istringstream in(ReadSmall(ProcsDir() + "/cgroup.procs"));
  long pid = 0;
  while (in >> pid) out.push_back(static_cast<pid_t>(pid));
  return out;
}

void RunCgroup::Signal(int sig) const {
  for (pid_t pid : Pids()) ::kill(pid, sig);
}

bool RunCgroup::KillAll(int timeout_ms) const {
  if (!enabled()) return true;
  if (host_.version == CgroupVersion::kV2 && Exists(Dir("") + "/cgroup.kill")) {
    (void)WriteControl(Dir("") + "/cgroup.kill", "1");
  } else {
    // Frozen first, so nothing forks between reading the list and the kill.
    const std::string freezer =
        host_.version == CgroupVersion::kV2
            ? Dir("") + "/cgroup.freeze"
            : (host_.v1_roots.contains("freezer") ? Dir("freezer") + "/freezer.state"
                                                  : std::string());
    const bool v2 = host_.version == CgroupVersion::kV2;
    if (!freezer.empty()) {
      (void)WriteControl(freezer, v2 ? "1" : "FROZEN");
      for (int i = 0; i < 100 && !v2; ++i) {
        std::string state = ReadSmall(freezer);
        if (state.starts_with("FROZEN")) break;
        Nap(5);
      }
    }
    Signal(SIGKILL);
    if (!freezer.empty()) (void)WriteControl(freezer, v2 ? "0" : "THAWED");
  }
  for (int waited = 0;; waited += 10) {
    auto pids = Pids();
    if (pids.empty()) return true;
    if (waited >= timeout_ms) return false;
    for (pid_t pid : pids) ::kill(pid, SIGKILL);  // a fork that was in flight
    Nap(10);
  }
}

std::uint64_t RunCgroup::OomKills() const {
  if (host_.version == CgroupVersion::kV2) {
    return KeyedValue(ReadSmall(Dir("") + "/memory.events"), "oom_kill");
  }
  if (!host_.v1_roots.contains("memory")) return 0;
  return KeyedValue(ReadSmall(Dir("memory") + "/memory.oom_control"), "oom_kill");
}

std::uint64_t RunCgroup::MemoryPeak() const {
  std::string text = host_.version == CgroupVersion::kV2
                         ? ReadSmall(Dir("") + "/memory.peak")
                         : (host_.v1_roots.contains("memory")
                                ? ReadSmall(Dir("memory") + "/memory.max_usage_in_bytes")
                                : std::string());
  std::uint64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

void RunCgroup::Remove() const {
  if (host_.version == CgroupVersion::kV2) {
    ::rmdir(Dir("").c_str());
    return;
  }
  for (const auto& [controller, root] : host_.v1_roots) ::rmdir(Dir(controller).c_str());
}

}  // namespace berth::agent
