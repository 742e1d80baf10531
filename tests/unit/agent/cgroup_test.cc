// How the agent reads a host's cgroup layout from /proc/self/mountinfo, and
// what it reports missing, on written mount tables (no cgroup is touched).
#include "agent/cgroup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

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

TEST_F(CgroupDetectTest, AUnifiedMountWithMemoryAndPidsIsV2AndSaysDevicesAreNotConfined) {
  auto root = dir_.path() / "unified";
  std::filesystem::create_directories(root);
  std::ofstream(root / "cgroup.controllers") << "cpuset cpu io memory pids\n";
  CgroupHost host = DetectCgroups(
      Mountinfo("30 1 0:26 / " + root.string() + " rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"));
  EXPECT_EQ(host.version, CgroupVersion::kV2);
  EXPECT_EQ(host.v2_root, root.string());
  EXPECT_EQ(host.controllers, (std::vector<std::string>{"memory", "pids", "cpu"}));
  EXPECT_TRUE(Mentions(host.missing, "devices: cgroup v2")) << host.missing.size();
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
                "34 1 0:30 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n"));
  EXPECT_EQ(host.version, CgroupVersion::kV1);
  EXPECT_EQ(host.v1_roots.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_EQ(host.v1_roots.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(host.controllers, (std::vector<std::string>{"memory", "pids", "cpu", "freezer"}));
  ASSERT_EQ(host.missing.size(), 1U);
  EXPECT_EQ(host.missing[0], "devices: no cgroup v1 hierarchy is mounted");
}

TEST_F(CgroupDetectTest, NoCgroupMountIsReportedAsNoLimitsAndNoCgroupKill) {
  CgroupHost host = DetectCgroups(Mountinfo("22 1 0:5 / /proc rw - proc proc rw\n"));
  EXPECT_EQ(host.version, CgroupVersion::kNone);
  EXPECT_TRUE(Mentions(host.missing, "none mounted")) << host.missing.size();
  RunCgroup none(host, "berth", "r1");
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.Create({}), "");
  EXPECT_TRUE(none.Pids().empty());
}

}  // namespace
}  // namespace berth::agent
