// The first start's admin token is in its file before the identity store
// knows it: killed between any two steps, the next start still ends with a
// token file whose token works, without --reset-admin-token. Each partial
// state is built with the real steps on a real identity store, then the
// store is reopened ("restart") and BootstrapAdmin run again.
#include "api/bootstrap.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace berth::server {
namespace {

namespace fs = std::filesystem;

constexpr TimeMs kNow = 1'795'996'800'000;

class BootstrapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "berth-bootstrap-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    token_file_ = dir_ / "bootstrap-token";
    Restart();
  }
  void TearDown() override {
    identities_.reset();
    fs::remove_all(dir_);
  }
  // berthd dies and starts again on the same data dir.
  void Restart() {
    identities_.reset();
    auto opened = store::IdentityStore::Open(dir_);
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    identities_ = std::move(*opened);
  }
  std::string FileToken() const {
    std::ifstream in(token_file_);
    std::string token;
    in >> token;
    return token;
  }
  // Whether `token` is a live token of a platform admin `admin`.
  ::testing::AssertionResult Works(const std::string& token) {
    auto parts = store::SplitToken(token);
    if (!parts) return ::testing::AssertionFailure() << "'" << token << "' is not a token";
    auto record = identities_->GetToken(parts->id);
    if (!record.has_value() || !record->has_value()) {
      return ::testing::AssertionFailure() << "the store does not know token " << parts->id;
    }
    if (!store::VerifySecret((*record)->hash, parts->secret)) {
      return ::testing::AssertionFailure() << "the secret does not verify";
    }
    if ((*record)->revoked_ms) return ::testing::AssertionFailure() << "revoked";
    auto admin = identities_->GetIdentity(kBootstrapAdmin);
    if (!admin.has_value() || !admin->has_value() || !(*admin)->platform_admin ||
        (*admin)->disabled || (*record)->identity != kBootstrapAdmin) {
      return ::testing::AssertionFailure() << "not an enabled platform admin's token";
    }
    return ::testing::AssertionSuccess();
  }

  fs::path dir_;
  fs::path token_file_;
  std::unique_ptr<store::IdentityStore> identities_;
};

TEST_F(BootstrapTest, AFirstStartWritesAWorkingTokenReadableByBerthdAlone) {
  auto made = BootstrapAdmin(*identities_, token_file_, kNow, false);
  ASSERT_TRUE(made.has_value()) << made.error().message;
  EXPECT_TRUE(*made);
  EXPECT_TRUE(Works(FileToken()));
  struct stat st {};
  ASSERT_EQ(::stat(token_file_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  EXPECT_FALSE(fs::exists(token_file_.string() + ".tmp"));
  // The next start changes nothing.
  const std::string token = FileToken();
  Restart();
  EXPECT_FALSE(BootstrapAdmin(*identities_, token_file_, kNow, false).value());
  EXPECT_EQ(FileToken(), token);
  EXPECT_TRUE(Works(token));
}

// Killed after the token was minted, with the temp file half written.
TEST_F(BootstrapTest, KilledWhileWritingTheFileTheNextStartBeginsAgain) {
  auto plan = PrepareBootstrap(*identities_, kNow, false);
  ASSERT_TRUE(plan.has_value() && plan->has_value());
  { std::ofstream(token_file_.string() + ".tmp") << (*plan)->token.token.substr(0, 20); }
  Restart();
  ASSERT_TRUE(identities_->Empty().value()) << "no identity before the commit";
  ASSERT_TRUE(BootstrapAdmin(*identities_, token_file_, kNow, false).value());
  EXPECT_TRUE(Works(FileToken()));
  EXPECT_FALSE(fs::exists(token_file_.string() + ".tmp"));
}

// Killed after the file was durable, before the identity was committed: the
// file holds a token the store never knew; the next start replaces it.
TEST_F(BootstrapTest, KilledBetweenTheFileAndTheCommitTheNextStartWritesAWorkingToken) {
  auto plan = PrepareBootstrap(*identities_, kNow, false);
  ASSERT_TRUE(plan.has_value() && plan->has_value());
  ASSERT_TRUE(WriteTokenFile(token_file_, (*plan)->token.token + "\n").has_value());
  const std::string stale = FileToken();
  Restart();
  ASSERT_TRUE(identities_->Empty().value());
  EXPECT_FALSE(Works(stale));
  ASSERT_TRUE(BootstrapAdmin(*identities_, token_file_, kNow, false).value());
  EXPECT_NE(FileToken(), stale);
  EXPECT_TRUE(Works(FileToken()));
}

// Killed right after the commit: the file was there first.
TEST_F(BootstrapTest, KilledRightAfterTheCommitTheFileAlreadyHoldsTheToken) {
  auto plan = PrepareBootstrap(*identities_, kNow, false);
  ASSERT_TRUE(plan.has_value() && plan->has_value());
  ASSERT_TRUE(WriteTokenFile(token_file_, (*plan)->token.token + "\n").has_value());
  ASSERT_TRUE(CommitBootstrap(*identities_, **plan).has_value());
  Restart();
  EXPECT_FALSE(BootstrapAdmin(*identities_, token_file_, kNow, false).value());
  EXPECT_EQ(FileToken(), (*plan)->token.token);
  EXPECT_TRUE(Works(FileToken()));
}

// The order the steps must keep: the store never holds an identity before
// the file holds its token. A commit whose file could not be written never
// happens.
TEST_F(BootstrapTest, AFileThatCannotBeWrittenLeavesNoIdentity) {
  const fs::path nowhere = dir_ / "missing-dir" / "bootstrap-token";
  auto made = BootstrapAdmin(*identities_, nowhere, kNow, false);
  ASSERT_FALSE(made.has_value());
  EXPECT_NE(made.error().message.find(nowhere.string()), std::string::npos) << made.error().message;
  Restart();
  EXPECT_TRUE(identities_->Empty().value()) << "an admin whose token nobody has";
  ASSERT_TRUE(BootstrapAdmin(*identities_, token_file_, kNow, false).value());
  EXPECT_TRUE(Works(FileToken()));
}

// --reset-admin-token: a disabled, demoted admin is enabled and promoted in
// the same transaction that stores its new token, after the file is there.
TEST_F(BootstrapTest, AResetEnablesTheAdminAndKeepsItsOldTokensValid) {
  ASSERT_TRUE(BootstrapAdmin(*identities_, token_file_, kNow, false).value());
  const std::string first = FileToken();
  ASSERT_TRUE(identities_->SetDisabled(kBootstrapAdmin, true).has_value());
  ASSERT_TRUE(identities_->SetPlatformAdmin(kBootstrapAdmin, false).has_value());
  // Killed between the file and the commit of a reset: still disabled, and
  // the old token is untouched.
  auto plan = PrepareBootstrap(*identities_, kNow, true);
  ASSERT_TRUE(plan.has_value() && plan->has_value());
  ASSERT_TRUE(WriteTokenFile(token_file_, (*plan)->token.token + "\n").has_value());
  Restart();
  EXPECT_TRUE(identities_->GetIdentity(kBootstrapAdmin).value()->disabled);
  // The operator runs the reset again.
  ASSERT_TRUE(BootstrapAdmin(*identities_, token_file_, kNow, true).value());
  EXPECT_TRUE(Works(FileToken()));
  EXPECT_TRUE(Works(first)) << "a reset adds a token; it revokes none";
  auto tokens = identities_->ListTokens(kBootstrapAdmin).value();
  ASSERT_EQ(tokens.size(), 2U);
}

}  // namespace
}  // namespace berth::server
