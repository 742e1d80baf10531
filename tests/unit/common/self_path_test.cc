// The running executable's directory: where berthd, berth-agent and berth
// look for the binaries installed beside them.
#include "common/self_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace berth {
namespace {

namespace fs = std::filesystem;

// A scratch directory of this test's own, removed after it.
class SelfPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("berth-self-path-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    fs::create_directories(dir_ / "links");
    std::ofstream(dir_ / "bin" / "tool") << "x";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SelfPathTest, TheExecutablesDirectoryHoldsThisTestBinary) {
  auto dir = ExecutableDir();
  ASSERT_TRUE(dir.has_value());
  EXPECT_TRUE(dir->is_absolute()) << *dir;
  // The binary running this test is a file in that directory.
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(fs::is_regular_file(*dir / self.filename())) << *dir;
}

TEST_F(SelfPathTest, ALinkNamesTheDirectoryOfItsTargetNotItsOwn) {
  fs::create_symlink(dir_ / "bin" / "tool", dir_ / "links" / "absolute");
  EXPECT_EQ(LinkTargetDir(dir_ / "links" / "absolute"), dir_ / "bin");
  // A relative target is read from the link's own directory.
  fs::create_symlink("../bin/tool", dir_ / "links" / "relative");
  auto rel = LinkTargetDir(dir_ / "links" / "relative");
  ASSERT_TRUE(rel.has_value());
  EXPECT_EQ(fs::canonical(*rel), fs::canonical(dir_ / "bin"));
}

TEST_F(SelfPathTest, NoDirectoryWhenTheLinkCannotBeRead) {
  EXPECT_EQ(LinkTargetDir(dir_ / "links" / "missing"), std::nullopt);
  // A plain file is not a link.
  EXPECT_EQ(LinkTargetDir(dir_ / "bin" / "tool"), std::nullopt);
}

}  // namespace
}  // namespace berth
