#include "agent/cgroup.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
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

// The device program, instruction by instruction (no libbpf: cgroup.cc stays
// libc only). The kernel calls it with r1 = struct bpf_cgroup_dev_ctx for
// every open and mknod of a device node and lets the access through when it
// returns 1.
//
// Registers once the context is read: r2 the device type (BPF_DEVCG_DEV_*),
// r3 the access asked for (BPF_DEVCG_ACC_*), r4 the major, r5 the minor; r1
// is then free for scratch. All values are 32-bit and zero-extended, so 64-bit
// compares against an immediate are exact for the numbers ParseDeviceRule lets
// through (below 2^31).
constexpr std::uint8_t kRet = 0, kScratch = 1, kType = 2, kAccess = 3, kMajor = 4, kMinor = 5;
constexpr std::uint8_t kCtx = 1;

bpf_insn Insn(int code, std::uint8_t dst, std::uint8_t src, std::int16_t off, std::int32_t imm) {
  bpf_insn insn{};
  insn.code = static_cast<std::uint8_t>(code);
  insn.dst_reg = dst;
  insn.src_reg = src;
  insn.off = off;
  insn.imm = imm;
  return insn;
}

bpf_insn LoadCtx32(std::uint8_t dst, std::size_t field) {
  return Insn(BPF_LDX | BPF_MEM | BPF_W, dst, kCtx, static_cast<std::int16_t>(field), 0);
}
bpf_insn Mov32(std::uint8_t dst, std::uint8_t src) {
  return Insn(BPF_ALU | BPF_MOV | BPF_X, dst, src, 0, 0);
}
bpf_insn Alu32Imm(int op, std::uint8_t dst, std::int32_t imm) {
  return Insn(BPF_ALU | op | BPF_K, dst, 0, 0, imm);
}
bpf_insn JneImm(std::uint8_t dst, std::int32_t imm) {
  return Insn(BPF_JMP | BPF_JNE | BPF_K, dst, 0, 0, imm);
}
bpf_insn JneReg(std::uint8_t dst, std::uint8_t src) {
  return Insn(BPF_JMP | BPF_JNE | BPF_X, dst, src, 0, 0);
}
void AppendReturn(std::int32_t verdict, std::vector<bpf_insn>& prog) {
  prog.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, kRet, 0, 0, verdict));
  prog.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
}

void AppendPrologue(std::vector<bpf_insn>& prog) {
  prog.push_back(LoadCtx32(kType, offsetof(bpf_cgroup_dev_ctx, access_type)));
  prog.push_back(Mov32(kAccess, kType));
  prog.push_back(Alu32Imm(BPF_AND, kType, 0xffff));
  prog.push_back(Alu32Imm(BPF_RSH, kAccess, 16));
  prog.push_back(LoadCtx32(kMajor, offsetof(bpf_cgroup_dev_ctx, major)));
  prog.push_back(LoadCtx32(kMinor, offsetof(bpf_cgroup_dev_ctx, minor)));
}

// One rule: each check that fails jumps past the rest of the rule to the
// next one; a rule whose checks all pass returns 1. True when the rule has no
// check ("a"): what follows it could never run, and the verifier refuses a
// program with unreachable instructions.
bool AppendRule(const DeviceRule& rule, std::vector<bpf_insn>& prog) {
  std::vector<bpf_insn> block;
  std::vector<std::size_t> jumps;  // their offsets wait for the block's length
  auto check = [&](bpf_insn jump) {
    jumps.push_back(block.size());
    block.push_back(jump);
  };
  if (rule.type != 'a') {
    check(JneImm(kType, rule.type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR));
  }
  const std::int32_t allowed = (rule.read ? BPF_DEVCG_ACC_READ : 0) |
                               (rule.write ? BPF_DEVCG_ACC_WRITE : 0) |
                               (rule.mknod ? BPF_DEVCG_ACC_MKNOD : 0);
  if (allowed != (BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE | BPF_DEVCG_ACC_MKNOD)) {
    // Everything asked for must be allowed: (asked & allowed) == asked.
    block.push_back(Mov32(kScratch, kAccess));
    block.push_back(Alu32Imm(BPF_AND, kScratch, allowed));
    check(JneReg(kScratch, kAccess));
  }
  if (rule.major >= 0) check(JneImm(kMajor, rule.major));
  if (rule.minor >= 0) check(JneImm(kMinor, rule.minor));
  AppendReturn(1, block);
  // A jump's target is the instruction after it plus its offset.
  for (std::size_t i : jumps) block[i].off = static_cast<std::int16_t>(block.size() - i - 1);
  prog.insert(prog.end(), block.begin(), block.end());
  return jumps.empty();
}

long Bpf(int cmd, bpf_attr& attr) {
  return ::syscall(SYS_bpf, cmd, &attr, sizeof(attr));
}

// Loads `prog` as a cgroup device program: its fd (close-on-exec, as every
// BPF fd), or -1 with `why` set. A program the verifier refuses is loaded
// again with its log, to say what the verifier found.
int LoadDeviceProgram(const std::vector<bpf_insn>& prog, std::string& why) {
  // The program calls no helper, so the license (which only gates GPL-only
  // helpers) claims nothing.
  static constexpr char kLicense[] = "Berth";
  bpf_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  attr.insns = reinterpret_cast<std::uintptr_t>(prog.data());
  attr.insn_cnt = static_cast<std::uint32_t>(prog.size());
  attr.license = reinterpret_cast<std::uintptr_t>(kLicense);
  long fd = Bpf(BPF_PROG_LOAD, attr);
  if (fd >= 0) return static_cast<int>(fd);
  const int err = errno;
  why = Errno("BPF_PROG_LOAD", err);
  if (err == EINVAL || err == EACCES) {
    std::string log(std::size_t{64} << 10, '\0');
    attr.log_level = 1;
    attr.log_buf = reinterpret_cast<std::uintptr_t>(log.data());
    attr.log_size = static_cast<std::uint32_t>(log.size());
    if (long again = Bpf(BPF_PROG_LOAD, attr); again >= 0) {
      ::close(static_cast<int>(again));
    } else {
      // The complaint is the last line before the closing statistics
      // ("processed N insns ...").
      log.resize(std::strlen(log.c_str()));
      std::string complaint;
      for (const auto& line : Split(log, '\n')) {
        if (!line.empty() && !line.starts_with("processed ")) complaint = line;
      }
      if (!complaint.empty()) why += " (verifier: " + complaint + ")";
    }
  }
  return -1;
}

// "*" or a decimal number up to `max`; -1 for "*". False when neither.
bool ParseDeviceNumber(const std::string& text, std::int32_t max, std::int32_t& out) {
  if (text == "*") {
    out = -1;
    return true;
  }
  std::int32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0 || v > max) {
    return false;
  }
  out = v;
  return true;
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

std::string ProbeDeviceFilter() {
  std::vector<bpf_insn> prog;
  AppendReturn(1, prog);
  std::string why;
  int fd = LoadDeviceProgram(prog, why);
  if (fd >= 0) ::close(fd);
  return why;
}

std::string ParseDeviceRule(const std::string& rule, DeviceRule* out) {
  const std::string bad = "device rule '" + rule + "': ";
  if (rule == "a" || rule == "a *:* rwm") {
    *out = DeviceRule{};
    return {};
  }
  auto fields = Split(rule, ' ');
  if (fields.size() != 3 || fields[0].size() != 1) {
    return bad + "expected TYPE MAJOR:MINOR ACCESS, as in 'c 195:0 rw', or 'a'";
  }
  DeviceRule r;
  r.type = fields[0][0];
  if (r.type == 'a') return bad + "type a (every device) takes no numbers: write 'a'";
  if (r.type != 'b' && r.type != 'c') {
    return bad + "type '" + fields[0] + "' is none of a, b (block), c (character)";
  }
  const auto colon = fields[1].find(':');
  if (colon == std::string::npos) return bad + "expected MAJOR:MINOR, not '" + fields[1] + "'";
  if (!ParseDeviceNumber(fields[1].substr(0, colon), 4095, r.major)) {
    return bad + "major '" + fields[1].substr(0, colon) + "' is neither * nor a number 0..4095";
  }
  if (!ParseDeviceNumber(fields[1].substr(colon + 1), (1 << 20) - 1, r.minor)) {
    return bad + "minor '" + fields[1].substr(colon + 1) + "' is neither * nor a number 0..1048575";
  }
  r.read = r.write = r.mknod = false;
  for (char c : fields[2]) {
    if (c == 'r') {
      r.read = true;
    } else if (c == 'w') {
      r.write = true;
    } else if (c == 'm') {
      r.mknod = true;
    } else {
      return bad + "access '" + fields[2] + "' has '" + std::string(1, c) +
             "', which is none of r, w, m";
    }
  }
  if (fields[2].empty()) return bad + "no access (some of r, w, m)";
  *out = r;
  return {};
}

std::string AttachDeviceFilter(const std::string& cgroup2_dir,
                               const std::vector<std::string>& rules) {
  std::vector<DeviceRule> parsed(rules.size());
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (std::string why = ParseDeviceRule(rules[i], &parsed[i]); !why.empty()) return why;
  }
  std::vector<bpf_insn> prog;
  AppendPrologue(prog);
  bool allows_all = false;
  for (std::size_t i = 0; i < parsed.size() && !allows_all; ++i) {
    allows_all = AppendRule(parsed[i], prog);
  }
  if (!allows_all) AppendReturn(0, prog);
  int dir = ::open(cgroup2_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    const int err = errno;
    return Errno("open " + cgroup2_dir, err);
  }
  std::string why;
  int fd = LoadDeviceProgram(prog, why);
  if (fd >= 0) {
    bpf_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.target_fd = static_cast<std::uint32_t>(dir);
    attr.attach_bpf_fd = static_cast<std::uint32_t>(fd);
    attr.attach_type = BPF_CGROUP_DEVICE;
    attr.attach_flags = BPF_F_ALLOW_MULTI;  // why: AttachDeviceFilter in cgroup.h
    if (Bpf(BPF_PROG_ATTACH, attr) != 0) {
      const int err = errno;
      why = Errno("BPF_PROG_ATTACH to " + cgroup2_dir, err);
    }
    ::close(fd);
  }
  ::close(dir);
  return why;
}

CgroupHost DetectCgroups(const std::string& mountinfo, std::string (*probe_devices)()) {
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
      // Asked once here, not per run: where this fails, every run's
      // Create() would (a run with device rules is refused, never started
      // unconfined), so the agent gives no run device rules and says why.
      if (root) {
        if (std::string why = probe_devices(); why.empty()) {
          host.v2_devices = true;
        } else {
          host.missing.push_back(
              "devices: cgroup v2 confines devices only through a BPF device program, and this "
              "kernel refuses to load one (" +
              why + "); a run can open GPU devices it was not given");
        }
      }
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
    host.v2_devices = false;
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
    // Here, before the shim (or anyone) joins: a process is checked against
    // the program from the moment it is in the cgroup.
    if (!limits.devices.empty()) {
      if (std::string why = AttachDeviceFilter(run, limits.devices); !why.empty()) {
        return "devices: " + why;
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
