// A run's cgroup: the boundary that holds every process of one run, with the
// spec's CPU and memory as enforced limits, a pids limit, and a device
// allow-list (the v1 devices controller; on cgroup v2 a BPF device program),
// the way Slurm's proctrack/cgroup and task/cgroup hold a job. A run is over
// only when its cgroup is empty: a stop freezes it, kills every process in it
// (setsid and double-forked children included) and waits until none is left.
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
  // kV2: the kernel loads BPF device programs, so a run's devices can be
  // confined (cgroup v2 has no devices controller; AttachDeviceFilter). On
  // v1 the devices controller does it, and this stays false.
  bool v2_devices = false;
  // What a run does not get on this host, each in words an operator acts on
  // ("devices: ... this kernel refuses to load one (...); a run can open GPU
  // devices it was not given"), empty when nothing is missing.
  std::vector<std::string> missing;
};

// Whether this kernel loads a BPF_PROG_TYPE_CGROUP_DEVICE program, the only
// way cgroup v2 confines devices: "" or the kernel's reason ("BPF_PROG_LOAD:
// Operation not permitted"). Loads a two-instruction allow-all program and
// closes it, attaching nothing (30 us here).
std::string ProbeDeviceFilter();

// Reads the cgroup mounts from `mountinfo` (/proc/self/mountinfo) and picks
// the layout: v2 when a cgroup2 mount offers memory and pids, else the v1
// hierarchies, else none. On v2 (as root) it asks `probe_devices` once
// whether device programs load, so that "devices" is in `missing`, with the
// kernel's reason, exactly when a run's devices cannot be confined; tests
// pass a stand-in, so what they check does not depend on the host's kernel.
CgroupHost DetectCgroups(const std::string& mountinfo = "/proc/self/mountinfo",
                         std::string (*probe_devices)() = ProbeDeviceFilter);

// One device rule in cgroup v1 syntax, as written to devices.allow: "TYPE
// MAJOR:MINOR ACCESS" with TYPE b (block) or c (character), MAJOR and MINOR
// a number or * (any), ACCESS some of r (read), w (write), m (mknod); or
// "a" (every device, everything), which v1 also reads from "a *:* rwm".
struct DeviceRule {
  char type = 'a';          // 'a' (any), 'b' or 'c'
  std::int32_t major = -1;  // -1: any ("*"); else at most 4095, Linux's largest
  std::int32_t minor = -1;  // -1: any ("*"); else at most 2^20 - 1
  bool read = true;
  bool write = true;
  bool mknod = true;

  bool operator==(const DeviceRule&) const = default;
};

// Parses `rule` into `out`. Returns "" or why not, naming the rule.
std::string ParseDeviceRule(const std::string& rule, DeviceRule* out);

// Attaches to the cgroup2 directory `cgroup2_dir` a BPF device program that
// allows exactly `rules` (cgroup v1 syntax, as CgroupLimits::devices) and
// denies every other open and mknod of a device node by a process in that
// cgroup or below it; no rules: every device is denied. Every rule is parsed
// before anything is loaded. Returns "" or why not (a bad rule, or the
// kernel's refusal).
//
// Attached with BPF_F_ALLOW_MULTI: the kernel runs every program attached to
// the cgroup and to each ancestor attached the same way (systemd's
// DevicePolicy= on a slice, an operator's own) and lets an access through only
// when all allow it, so this program only narrows what the parents allow,
// and a program attached below the run (a container runtime inside the job)
// adds to it and cannot replace it, as one attached with
// BPF_F_ALLOW_OVERRIDE could. Attaching twice (Create() on a cgroup left
// from an earlier try) keeps both programs: what both allow. The program's
// fd is closed before returning; the attachment lives as long as the cgroup.
std::string AttachDeviceFilter(const std::string& cgroup2_dir,
                               const std::vector<std::string>& rules);

// What a run's cgroup enforces; 0 means no limit.
struct CgroupLimits {
  std::uint64_t memory_bytes = 0;
  std::uint32_t cpu_millis = 0;
  std::uint32_t pids_max = 0;
  // Device rules in cgroup v1 syntax ("c 195:0 rw", DeviceRule): v1 writes
  // them to devices.allow after `devices.deny a`, v2 attaches them as a BPF
  // device program (AttachDeviceFilter). Empty: devices are not confined.
  std::vector<std::string> devices;
};

// One run's cgroup, `<parent>/<name>` in every hierarchy in use. The object
// holds only paths: any process (the shim that made it, an agent started
// later) can open the same cgroup by name.
class RunCgroup {
 public:
  RunCgroup(CgroupHost host, const std::string& parent, const std::string& name);

  bool enabled() const { return host_.version != CgroupVersion::kNone; }

  // Creates the cgroup and writes the limits; on v2 the device rules are
  // attached as a BPF program here, before any process can join. Returns ""
  // or why not (a kernel that refuses the program is a failure, never a run
  // with its devices unconfined).
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
