// How the agent reads a host's cgroup layout from /proc/self/mountinfo, and
// what it reports missing, on written mount tables (no cgroup is touched);
// how device rules are read; and, as root on a cgroup2 mount (on a hybrid
// host the controller-less /sys/fs/cgroup/unified is enough), that a child in
// a cgroup with a BPF device program opens only the devices its rules allow.
#include "agent/cgroup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "agent/runner.h"
#include "test_util.h"

namespace berth::agent {
namespace {

using testing::TempDir;

class CgroupDetectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "a non-root agent never uses cgroups (tested below)";
  }
  std::string Mountinfo(const std::string& text) {
    auto path = dir_.path() / "mountinfo";
    std::ofstream(path) << text;
    return path.string();
  }
  TempDir dir_;
};

bool Mentions(const std::vector<std::string>& lines, const std::string& what) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

// Stand-ins for ProbeDeviceFilter: what the tests check does not depend on
// this host's kernel.
int probes = 0;
std::string KernelLoadsBpf() {
  ++probes;
  return {};
}
std::string KernelRefusesBpf() {
  ++probes;
  return "BPF_PROG_LOAD: Operation not permitted";
}

TEST_F(CgroupDetectTest, AUnifiedMountWithMemoryAndPidsIsV2AndSaysDevicesAreNotConfined) {
  auto root = dir_.path() / "unified";
  std::filesystem::create_directories(root);
  std::ofstream(root / "cgroup.controllers") << "cpuset cpu io memory pids\n";
  CgroupHost host = DetectCgroups(
      Mountinfo("30 1 0:26 / " + root.string() + " rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"),
      KernelRefusesBpf);
  EXPECT_EQ(host.version, CgroupVersion::kV2);
  EXPECT_EQ(host.v2_root, root.string());
  EXPECT_EQ(host.controllers, (std::vector<std::string>{"memory", "pids", "cpu"}));
  EXPECT_FALSE(host.v2_devices);
  EXPECT_TRUE(Mentions(host.missing, "devices: cgroup v2")) << host.missing.size();
  EXPECT_TRUE(Mentions(host.missing, "(BPF_PROG_LOAD: Operation not permitted)"));
}

TEST_F(CgroupDetectTest, OnV2AKernelThatLoadsBpfDeviceProgramsConfinesDevices) {
  auto root = dir_.path() / "unified";
  std::filesystem::create_directories(root);
  std::ofstream(root / "cgroup.controllers") << "cpuset cpu io memory pids\n";
  probes = 0;
  CgroupHost host = DetectCgroups(
      Mountinfo("30 1 0:26 / " + root.string() + " rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"),
      KernelLoadsBpf);
  EXPECT_EQ(host.version, CgroupVersion::kV2);
  EXPECT_TRUE(host.v2_devices);
  EXPECT_TRUE(host.missing.empty()) << host.missing.front();
  EXPECT_EQ(probes, 1);
}

TEST_F(CgroupDetectTest, AHybridHostWithAnEmptyUnifiedMountUsesTheV1Hierarchies) {
  auto unified = dir_.path() / "unified";
  std::filesystem::create_directories(unified);
  std::ofstream(unified / "cgroup.controllers") << "\n";
  CgroupHost host = DetectCgroups(
      Mountinfo("30 1 0:26 / " + unified.string() +
                " rw - cgroup2 cgroup2 rw\n"
                "31 1 0:27 / /sys/fs/cgroup/memory rw shared:9 - cgroup cgroup rw,memory\n"
                "32 1 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
                "33 1 0:29 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
                "34 1 0:30 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n"),
      KernelLoadsBpf);
  EXPECT_EQ(host.version, CgroupVersion::kV1);
  EXPECT_FALSE(host.v2_devices);  // v1's devices controller (absent here) would do it
  EXPECT_EQ(host.v1_roots.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_EQ(host.v1_roots.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(host.controllers, (std::vector<std::string>{"memory", "pids", "cpu", "freezer"}));
  ASSERT_EQ(host.missing.size(), 1U);
  EXPECT_EQ(host.missing[0], "devices: no cgroup v1 hierarchy is mounted");
}

TEST_F(CgroupDetectTest, NoCgroupMountIsReportedAsNoLimitsAndNoCgroupKill) {
  probes = 0;
  CgroupHost host =
      DetectCgroups(Mountinfo("22 1 0:5 / /proc rw - proc proc rw\n"), KernelRefusesBpf);
  EXPECT_EQ(probes, 0);  // asked only where a v2 layout could use it
  EXPECT_EQ(host.version, CgroupVersion::kNone);
  EXPECT_TRUE(Mentions(host.missing, "none mounted")) << host.missing.size();
  RunCgroup none(host, "berth", "r1");
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.Create({}), "");
  EXPECT_TRUE(none.Pids().empty());
}

TEST(CgroupDeviceRuleTest, RulesReadAsCgroupV1ReadsThem) {
  DeviceRule r;
  ASSERT_EQ(ParseDeviceRule("c 195:0 rw", &r), "");
  EXPECT_EQ(r, (DeviceRule{'c', 195, 0, true, true, false}));
  ASSERT_EQ(ParseDeviceRule("c 136:* rwm", &r), "");
  EXPECT_EQ(r, (DeviceRule{'c', 136, -1, true, true, true}));
  ASSERT_EQ(ParseDeviceRule("b *:3 m", &r), "");
  EXPECT_EQ(r, (DeviceRule{'b', -1, 3, false, false, true}));
  ASSERT_EQ(ParseDeviceRule("c 4095:1048575 r", &r), "");
  EXPECT_EQ(r, (DeviceRule{'c', 4095, 1048575, true, false, false}));
  for (const char* all : {"a", "a *:* rwm"}) {
    ASSERT_EQ(ParseDeviceRule(all, &r), "") << all;
    EXPECT_EQ(r, DeviceRule{}) << all;
  }
}

TEST(CgroupDeviceRuleTest, EveryRuleTheRunnerWritesParses) {
  TempDir no_gpus;
  for (const auto& rule : RunDeviceRules(no_gpus.path(), {0, 1})) {
    DeviceRule r;
    EXPECT_EQ(ParseDeviceRule(rule, &r), "");
  }
}

TEST(CgroupDeviceRuleTest, ABadRuleIsAnErrorNamingIt) {
  for (const char* bad :
       {"", "c", "c 1:3", "c 1:3 rw x", "c  1:3 rw", "x 1:3 rw", "cc 1:3 rw", "a 1:3 rw",
        "c 1-3 rw", "c :3 rw", "c 1: rw", "c -1:3 rw", "c 4096:0 rw", "c 1:1048576 rw", "c 1:3 rwx",
        "c 1:3 RW", "c 0x1:3 rw", "c 99999999999:0 rw"}) {
    DeviceRule r{'c', 7, 7, false, false, false};
    std::string why = ParseDeviceRule(bad, &r);
    EXPECT_NE(why.find("device rule '" + std::string(bad) + "'"), std::string::npos)
        << "'" << bad << "': " << why;
    EXPECT_EQ(r, (DeviceRule{'c', 7, 7, false, false, false})) << bad;  // untouched
  }
}

TEST(CgroupDeviceRuleTest, ABadRuleIsRefusedBeforeAnyCgroupIsTouched) {
  std::string why = AttachDeviceFilter("/nonexistent/berth-cgroup", {"c 1:3 rw", "c 1:3 rwx"});
  EXPECT_NE(why.find("device rule 'c 1:3 rwx'"), std::string::npos) << why;
}

// The first cgroup2 mount, or "".
std::string Cgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string field;
    for (int i = 0; i < 5 && fields >> field; ++i) {
    }
    return field;
  }
  return {};
}

// Something a child in the cgroup tries: opening a device node with
// `flags`, or making one numbered `dev`.
struct DeviceTry {
  std::string path;
  int flags = O_RDWR;
  dev_t dev = 0;  // mknod when not 0
};

// Forks a child that joins the cgroup2 directory `cgroup` and makes each
// try there: 0 or the errno of each, in order.
std::vector<int> TryInCgroup(const std::string& cgroup, const std::vector<DeviceTry>& tries) {
  const std::string procs = cgroup + "/cgroup.procs";
  std::vector<int> got(tries.size() + 1, -1);  // [0]: joining; filled in by the child
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    return {};
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(out[0]);
    int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    got[0] = fd >= 0 && ::write(fd, "0", 1) == 1 ? 0 : errno;
    if (fd >= 0) ::close(fd);
    for (std::size_t i = 0; i < tries.size() && got[0] == 0; ++i) {
      const DeviceTry& t = tries[i];
      if (t.dev != 0) {
        got[i + 1] = ::mknod(t.path.c_str(), S_IFCHR | 0600, t.dev) == 0 ? 0 : errno;
      } else {
        int dev = ::open(t.path.c_str(), t.flags | O_CLOEXEC | O_NOCTTY);
        got[i + 1] = dev >= 0 ? 0 : errno;
        if (dev >= 0) ::close(dev);
      }
    }
    const auto bytes = static_cast<ssize_t>(got.size() * sizeof(int));
    ::_exit(::write(out[1], got.data(), got.size() * sizeof(int)) == bytes ? 0 : 1);
  }
  ::close(out[1]);
  ssize_t n = pid > 0 ? ::read(out[0], got.data(), got.size() * sizeof(int)) : -1;
  ::close(out[0]);
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  if (n != static_cast<ssize_t>(got.size() * sizeof(int))) {
    ADD_FAILURE() << "the child reported nothing (fork: " << pid << ")";
    return {};
  }
  if (got[0] != 0) {
    ADD_FAILURE() << "the child could not join " << cgroup << ": " << std::strerror(got[0]);
    return {};
  }
  got.erase(got.begin());
  return got;
}

// A cgroup of its own, berth-test-<pid>, under the host's cgroup2 mount, and
// stand-ins of /dev/null (1:3), /dev/zero (1:5) and /dev/tty (5:0) in a
// temporary directory. An allowed open of null or zero succeeds; a denied
// one stops at the program with EPERM.
class CgroupDeviceFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "only root attaches a device program to a cgroup";
    const std::string mount = Cgroup2Mount();
    if (mount.empty()) GTEST_SKIP() << "no cgroup2 mount in /proc/self/mountinfo";
    if (std::string why = ProbeDeviceFilter(); !why.empty()) {
      GTEST_SKIP() << "this kernel loads no BPF device program: " << why;
    }
    mount_ = mount;
    cgroup_ = mount + "/" + Name();
    RemoveCgroup();  // left by a test that crashed
    ASSERT_EQ(::mkdir(cgroup_.c_str(), 0755), 0) << cgroup_ << ": " << std::strerror(errno);
    for (const auto& [name, dev] :
         {std::pair{"null", makedev(1, 3)}, {"zero", makedev(1, 5)}, {"tty", makedev(5, 0)}}) {
      ASSERT_EQ(::mknod(Node(name).c_str(), S_IFCHR | 0600, dev), 0)
          << name << ": " << std::strerror(errno);
    }
  }
  void TearDown() override {
    if (!cgroup_.empty()) RemoveCgroup();
  }

  static std::string Name() { return "berth-test-" + std::to_string(::getpid()); }
  std::string Node(const std::string& name) const { return (dir_.path() / name).string(); }
  void RemoveCgroup() const {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(cgroup_, ec)) {
      if (entry.is_directory()) ::rmdir(entry.path().c_str());
    }
    ::rmdir(cgroup_.c_str());
  }

  TempDir dir_;
  std::string mount_;
  std::string cgroup_;
};

TEST_F(CgroupDeviceFilterTest, AChildOpensTheDeviceItsRuleAllowsAndNoOther) {
  ASSERT_EQ(AttachDeviceFilter(cgroup_, {"c 1:3 rw"}), "");
  EXPECT_EQ(TryInCgroup(cgroup_, {{Node("null")}, {Node("zero")}, {Node("tty")}}),
            (std::vector<int>{0, EPERM, EPERM}));
  // Outside the cgroup the same nodes open.
  int fd = ::open(Node("zero").c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  if (fd >= 0) ::close(fd);
}

TEST_F(CgroupDeviceFilterTest, AStarMinorAllowsTheWholeMajorAndABlockRuleNoCharacterDevice) {
  ASSERT_EQ(AttachDeviceFilter(cgroup_, {"c 1:* rw", "b 5:0 rwm"}), "");
  EXPECT_EQ(TryInCgroup(cgroup_, {{Node("null")}, {Node("zero")}, {Node("tty")}}),
            (std::vector<int>{0, 0, EPERM}));
}

TEST_F(CgroupDeviceFilterTest, ReadOnlyAllowsNoWriteAndOnlyMAllowsMknod) {
  ASSERT_EQ(AttachDeviceFilter(cgroup_, {"c 1:3 r", "c 1:5 rwm"}), "");
  EXPECT_EQ(TryInCgroup(cgroup_, {{Node("null"), O_RDONLY},
                                  {Node("null"), O_WRONLY},
                                  {Node("null"), O_RDWR},
                                  {Node("null2"), 0, makedev(1, 3)},
                                  {Node("zero2"), 0, makedev(1, 5)}}),
            (std::vector<int>{0, EPERM, EPERM, EPERM, 0}));
}

// No rules is read literally: nothing is allowed. (Create() attaches no
// program when a run has no device rules, as v1 writes none.)
TEST_F(CgroupDeviceFilterTest, NoRulesDenyEveryDevice) {
  ASSERT_EQ(AttachDeviceFilter(cgroup_, {}), "");
  EXPECT_EQ(TryInCgroup(cgroup_, {{Node("null")}, {Node("zero")}}),
            (std::vector<int>{EPERM, EPERM}));
}

// BPF_F_ALLOW_MULTI: a second program adds to the first, and a program on a
// cgroup below cannot widen what its parent's allows.
TEST_F(CgroupDeviceFilterTest, EveryProgramOnTheWayUpMustAllowAnAccess) {
  ASSERT_EQ(AttachDeviceFilter(cgroup_, {"a"}), "");
  EXPECT_EQ(TryInCgroup(cgroup_, {{Node("null")}, {Node("zero")}}), (std::vector<int>{0, 0}));
  ASSERT_EQ(AttachDeviceFilter(cgroup_, {"c 1:3 rw", "c 5:0 rw"}), "");
  EXPECT_EQ(TryInCgroup(cgroup_, {{Node("null")}, {Node("zero")}}), (std::vector<int>{0, EPERM}));
  const std::string below = cgroup_ + "/below";
  ASSERT_EQ(::mkdir(below.c_str(), 0755), 0) << std::strerror(errno);
  ASSERT_EQ(AttachDeviceFilter(below, {"a"}), "");
  EXPECT_EQ(TryInCgroup(below, {{Node("null")}, {Node("zero")}}), (std::vector<int>{0, EPERM}));
}

TEST_F(CgroupDeviceFilterTest, CreateOnV2AttachesTheRunsRulesBeforeAnyoneJoins) {
  CgroupHost host;
  host.version = CgroupVersion::kV2;
  host.v2_root = mount_;  // no controllers: only the device program is at stake
  host.v2_devices = true;
  RunCgroup confined(host, Name(), "confined");
  CgroupLimits limits;
  limits.devices = {"c 1:3 rw"};
  ASSERT_EQ(confined.Create(limits), "");
  EXPECT_EQ(TryInCgroup(confined.Dir(""), {{Node("null")}, {Node("zero")}}),
            (std::vector<int>{0, EPERM}));

  RunCgroup open(host, Name(), "open");
  ASSERT_EQ(open.Create({}), "");
  EXPECT_EQ(TryInCgroup(open.Dir(""), {{Node("null")}, {Node("zero")}}), (std::vector<int>{0, 0}));

  RunCgroup bad(host, Name(), "bad");
  limits.devices = {"c 1:3 rw", "c 195:x rw"};
  std::string why = bad.Create(limits);
  EXPECT_NE(why.find("devices: device rule 'c 195:x rw'"), std::string::npos) << why;
}

}  // namespace
}  // namespace berth::agent
