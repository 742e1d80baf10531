// The run warns before it starts when a service replica, running as its
// tenant's uid, could not execute the model server it names.
#include "cli/poc_model_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace berth::cli::poc {
namespace {

namespace fs = std::filesystem;

class ModelServerReach : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "berth-reach-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    fs::permissions(root_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(root_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(root_, ec);
  }
  // An executable file at `rel` under the root, its directories 0755.
  fs::path Binary(const std::string& rel, fs::perms mode) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "#!/bin/sh\n";
    fs::permissions(p, mode);
    return p;
  }
  fs::path root_;
};

constexpr auto kEveryone = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec;

TEST_F(ModelServerReach, ABinaryEveryUidMayRunIsFine) {
  const auto bin = Binary("bin/berth-model-server", kEveryone);
  // The temporary directory itself may be private on some machines: only
  // the part this test controls is judged.
  const std::string why = ModelServerUnreachable(bin);
  if (!why.empty()) {
    EXPECT_EQ(why.find(root_.string() + "/bin"), std::string::npos) << why;
  }
}

TEST_F(ModelServerReach, APrivateDirectoryOnTheWayIsNamedWithTheFix) {
  const auto bin = Binary("home/bin/berth-model-server", kEveryone);
  fs::permissions(root_ / "home", fs::perms::owner_all);
  const std::string why = ModelServerUnreachable(bin);
  EXPECT_NE(why.find("inside " + (root_ / "home").string()), std::string::npos) << why;
  EXPECT_NE(why.find("mode 0700"), std::string::npos) << why;
  EXPECT_NE(why.find("--model-server /usr/local/bin/berth-model-server"), std::string::npos) << why;
}

TEST_F(ModelServerReach, AFileOthersMayNotExecuteIsNamed) {
  const auto bin = Binary("bin/berth-model-server", fs::perms::owner_all);
  const std::string why = ModelServerUnreachable(bin);
  // A private temporary directory above would be named first instead.
  if (why.find("inside") == std::string::npos) {
    EXPECT_NE(why.find("may not be executed by other users (mode 0700)"), std::string::npos) << why;
  }
  EXPECT_FALSE(why.empty());
}

TEST_F(ModelServerReach, ANameOnThePathOrAFileNotHereIsNotJudged) {
  EXPECT_EQ(ModelServerUnreachable("berth-model-server"), "");
  EXPECT_EQ(ModelServerUnreachable(root_ / "nothing-here"), "");
}

}  // namespace
}  // namespace berth::cli::poc
