// A run's cgroup: the boundary that holds every process of one run, with the
// spec's CPU and memory as enforced limits, a pids limit, and (cgroup v1) a
// device allow-list, the way Slurm's proctrack/cgroup and task/cgroup hold a
// job. A run is over only when its cgroup is empty: a stop freezes it, kills
// every process in it (setsid and double-forked children included) and waits
// until none is left.
//
// Both cgroup v2 (where a cgroup2 mount offers the memory and pids
// controllers) and the v1 hierarchies (one mount per controller) are
// supported; what the host lacks is listed in CgroupHost::missing, which the
// node's inventory shows, so a run is never silently less confined than the
// operator believes.
//
// Only libc and the standard library: berth-shim links this file, and the
// runner (the agent) uses the same code to signal and kill a run.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace berth::agent {

enum class CgroupVersion { kNone, kV1, kV2 };

// "v1", "v2", "none".
const char* CgroupVersionName(CgroupVersion v);

struct CgroupHost {
  CgroupVersion version = CgroupVersion::kNone;
  std::string v2_root;                          // the cgroup2 mount (kV2)
  std::map<std::string, std::string> v1_roots;  // controller -> its hierarchy's mount (kV1)
  // Controllers in use: memory, pids, cpu, freezer, devices (v1); memory,
  // pids, cpu (v2, where freezing and killing are built in).
  std::vector<std::string> controllers;
  // What a run does not get on this host, each in words an operator acts on
  // ("devices: cgroup v2 needs a BPF device program; GPU devices are not
  // confined"), empty when nothing is missing.
  std::vector<std::string> missing;
};

// Reads the cgroup mounts from `mountinfo` (/proc/self/mountinfo) and picks
// the layout: v2 when a cgroup2 mount offers memory and pids, else the v1
// hierarchies, else none.
CgroupHost DetectCgroups(const std::string& mountinfo = "/proc/self/mountinfo");

// What a run's cgroup enforces; 0 means no limit.
struct CgroupLimits {
  std::uint64_t memory_bytes = 0;
  std::uint32_t cpu_millis = 0;
  std::uint32_t pids_max = 0;
  // cgroup v1 device rules ("c 195:0 rw"); empty: devices are not confined.
  std::vector<std::string> devices;
};

// One run's cgroup, `<parent>/<name>` in every hierarchy in use. The object
// holds only paths: any process (the shim that made it, an agent started
// later) can open the same cgroup by name.
class RunCgroup {
 public:
  RunCgroup(CgroupHost host, const std::string& parent, const std::string& name);

  bool enabled() const { return host_.version != CgroupVersion::kNone; }

  // Creates the cgroup and writes the limits. Returns "" or why not.
  std::string Create(const CgroupLimits& limits);
  // Moves the calling process (single-threaded: a child between fork and
  // exec) and its future children into the cgroup. A process that moves
  // itself one thread at a time (v1 `tasks`, "0") spares the kernel the
  // global threadgroup lock a move of another process takes (12-15 ms for
  // five v1 hierarchies here, 0.7 ms this way; docs/security.md).
  // Returns 0 or the errno of the write that failed.
  int JoinSelf() const;
  // Every process in the cgroup now.
  std::vector<pid_t> Pids() const;
  // Sends `sig` to every process in the cgroup.
  void Signal(int sig) const;
  // Freezes the cgroup, SIGKILLs every process, thaws it, and waits up to
  // `timeout_ms` until it is empty. True when it is empty.
  bool KillAll(int timeout_ms) const;
  // How many times the kernel's OOM killer acted in the cgroup.
  std::uint64_t OomKills() const;
  // The most memory the cgroup used (bytes; 0 when the kernel does not say).
  std::uint64_t MemoryPeak() const;
  // Removes the (empty) cgroup from every hierarchy.
  void Remove() const;

  // The cgroup's directory in `controller`'s hierarchy (v2: the one directory).
  std::string Dir(const std::string& controller) const;

 private:
  // The directory listing the cgroup's processes (freezer or pids, v1).
  std::string ProcsDir() const;

  CgroupHost host_;
  std::string rel_;  // parent/name
};

}  // namespace berth::agent
