// Identities, roles and tokens in berth.db: tokens verify only with their
// own secret, are stored as Argon2id hashes (never the secret), revoke once,
// and everything survives a reopen.
#include "store/identity_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>

namespace berth::store {
namespace {

class IdentityStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-ids-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    ids_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    ids_.reset();
    auto s = IdentityStore::Open(dir_);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    ids_ = std::move(*s);
  }
  Identity Person(const std::string& name, std::map<std::string, Role> tenants = {}) {
    Identity id;
    id.name = name;
    id.tenants = std::move(tenants);
    id.created_ms = 1000;
    id.created_by = "test";
    return id;
  }
  std::filesystem::path dir_;
  std::unique_ptr<IdentityStore> ids_;
};

TEST_F(IdentityStoreTest, IdentitiesKeepTheirRolesAcrossAReopen) {
  EXPECT_TRUE(*ids_->Empty());
  ASSERT_TRUE(ids_->CreateIdentity(Person("rita", {{"red", Role::kMember}})).has_value());
  auto dup = ids_->CreateIdentity(Person("rita"));
  ASSERT_FALSE(dup.has_value());
  EXPECT_EQ(dup.error().code, Code::kAlreadyExists);
  auto bad = ids_->CreateIdentity(Person("-rita"));
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "name");
  ASSERT_TRUE(ids_->SetRole("rita", "blue", Role::kViewer).has_value());
  ASSERT_TRUE(ids_->SetRole("rita", "red", Role::kTenantAdmin).has_value());
  EXPECT_EQ(ids_->SetRole("nobody", "red", Role::kMember).error().code, Code::kNotFound);
  Reopen();
  EXPECT_FALSE(*ids_->Empty());
  auto rita = ids_->GetIdentity("rita");
  ASSERT_TRUE(rita.has_value() && rita->has_value());
  EXPECT_EQ((*rita)->tenants.at("red"), Role::kTenantAdmin);
  EXPECT_EQ((*rita)->tenants.at("blue"), Role::kViewer);
  ASSERT_TRUE(ids_->SetRole("rita", "blue", std::nullopt).has_value());
  EXPECT_FALSE((**ids_->GetIdentity("rita")).tenants.contains("blue"));
}

TEST_F(IdentityStoreTest, ATokenVerifiesOnlyWithItsSecretWhichIsNeverStored) {
  ASSERT_TRUE(ids_->CreateIdentity(Person("rita")).has_value());
  auto issued = ids_->CreateToken("rita", "laptop", 5000, "admin", 1000);
  ASSERT_TRUE(issued.has_value()) << issued.error().message;
  auto parts = SplitToken(issued->token);
  ASSERT_TRUE(parts.has_value()) << issued->token;
  EXPECT_EQ(parts->id, issued->record.id);
  EXPECT_EQ(parts->id.size(), 12u);
  EXPECT_EQ(parts->secret.size(), 64u);
  auto stored = ids_->GetToken(parts->id);
  ASSERT_TRUE(stored.has_value() && stored->has_value());
  EXPECT_TRUE((*stored)->hash.starts_with("$argon2id$")) << (*stored)->hash;
  EXPECT_TRUE(VerifySecret((*stored)->hash, parts->secret));
  std::string wrong = parts->secret;
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  EXPECT_FALSE(VerifySecret((*stored)->hash, wrong));
  EXPECT_EQ((*stored)->expires_ms, 5000);

  // The secret appears nowhere in the database file.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "berth.db").c_str(), &db), SQLITE_OK);
  int hits = -1;
  const std::string sql = "SELECT COUNT(*) FROM tokens WHERE hash LIKE '%" + parts->secret +
                          "%' OR description LIKE '%" + parts->secret + "%'";
  sqlite3_exec(
      db, sql.c_str(),
      [](void* out, int, char** v, char**) {
        *static_cast<int*>(out) = std::atoi(v[0]);
        return 0;
      },
      &hits, nullptr);
  sqlite3_close(db);
  EXPECT_EQ(hits, 0);

  // An expiry in the past is refused; so is a token for nobody.
  EXPECT_EQ(ids_->CreateToken("rita", "", 900, "admin", 1000).error().field, "ttl");
  EXPECT_EQ(ids_->CreateToken("nobody", "", std::nullopt, "admin", 1000).error().code,
            Code::kNotFound);
}

TEST_F(IdentityStoreTest, ATokenLimitCountsOnlyLiveTokens) {
  ASSERT_TRUE(ids_->CreateIdentity(Person("rita")).has_value());
  const model::EffectiveLimit two{2, "tokens_per_identity", "red", ""};
  auto a = ids_->CreateToken("rita", "a", std::nullopt, "admin", 1000, &two);
  ASSERT_TRUE(a.has_value()) << a.error().message;
  ASSERT_TRUE(ids_->CreateToken("rita", "b", 3000, "admin", 1000, &two).has_value());
  auto third = ids_->CreateToken("rita", "c", std::nullopt, "admin", 1000, &two);
  ASSERT_FALSE(third.has_value());
  EXPECT_EQ(third.error().code, Code::kResourceExhausted);
  EXPECT_NE(third.error().message.find("rita has 2 live tokens and may hold at most 2"),
            std::string::npos)
      << third.error().message;
  EXPECT_NE(third.error().message.find("tenants.red.limits.tokens_per_identity"),
            std::string::npos);
  // An expired token and a revoked one no longer count.
  ASSERT_TRUE(ids_->CreateToken("rita", "d", std::nullopt, "admin", 3000, &two).has_value());
  EXPECT_FALSE(ids_->CreateToken("rita", "e", std::nullopt, "admin", 3000, &two).has_value());
  ASSERT_TRUE(ids_->RevokeToken(a->record.id, "admin", 3100).has_value());
  EXPECT_TRUE(ids_->CreateToken("rita", "f", std::nullopt, "admin", 3200, &two).has_value());
  // Without a limit (a platform admin's identity) there is none.
  EXPECT_TRUE(ids_->CreateToken("rita", "g", std::nullopt, "admin", 3300).has_value());
}

TEST_F(IdentityStoreTest, ATokenIsRevokedOnceAndListedWithoutItsSecret) {
  ASSERT_TRUE(ids_->CreateIdentity(Person("rita")).has_value());
  ASSERT_TRUE(ids_->CreateIdentity(Person("sam")).has_value());
  auto a = ids_->CreateToken("rita", "a", std::nullopt, "admin", 1000);
  auto b = ids_->CreateToken("sam", "b", std::nullopt, "admin", 2000);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_NE(a->record.id, b->record.id);
  ASSERT_TRUE(ids_->RevokeToken(a->record.id, "admin", 3000).has_value());
  auto again = ids_->RevokeToken(a->record.id, "admin", 4000);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(ids_->RevokeToken("000000000000", "admin", 4000).error().code, Code::kNotFound);
  Reopen();
  auto rita = ids_->ListTokens("rita");
  ASSERT_TRUE(rita.has_value());
  ASSERT_EQ(rita->size(), 1u);
  EXPECT_EQ((*rita)[0].revoked_ms, 3000);
  EXPECT_EQ((*rita)[0].revoked_by, "admin");
  auto all = ids_->ListTokens("");
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].identity, "sam");  // newest first
}

TEST(TokenShapeTest, OnlyBerthTokensSplit) {
  const std::string id(12, 'a');
  const std::string secret(64, '0');
  EXPECT_TRUE(SplitToken("berth_" + id + "_" + secret).has_value());
  EXPECT_FALSE(SplitToken("berth_" + id + "-" + secret).has_value());
  EXPECT_FALSE(SplitToken("berth_" + id + "_" + secret + "0").has_value());
  EXPECT_FALSE(SplitToken("berth_" + std::string(12, 'A') + "_" + secret).has_value());
  EXPECT_FALSE(SplitToken("bearer_" + id + "_" + secret).has_value());
  EXPECT_FALSE(SplitToken("").has_value());
  EXPECT_EQ(ParseRole("tenant-admin"), Role::kTenantAdmin);
  EXPECT_FALSE(ParseRole("platform-admin").has_value());
}

}  // namespace
}  // namespace berth::store
