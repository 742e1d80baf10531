// The web console's sign-in (POST/GET/DELETE /v1/console/session) end to end
// inside one process: a session cookie made from a bearer token, used
// without it, refused for changes without its CSRF token, and ended by
// signing out, by its expiry and by its token's revocation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

using nlohmann::json;

class ConsoleSessionTest : public ApiHarness {
 protected:
  // A client with no bearer token: only what the cookie and headers say.
  struct Browser {
    httplib::Client client;
    std::string cookie;  // "berth_session=<secret>"
    std::string csrf;
    explicit Browser(int port) : client("127.0.0.1", port) {}
    httplib::Headers Headers(bool with_csrf) const {
      httplib::Headers h;
      if (!cookie.empty()) h.emplace("Cookie", "theme=dark; " + cookie);
      if (with_csrf) h.emplace("X-Berth-CSRF", csrf);
      return h;
    }
    Answer Get(const std::string& path) {
      auto res = client.Get(path, Headers(false));
      if (!res) return {};
      return {res->status, json::parse(res->body, nullptr, false)};
    }
    Answer Post(const std::string& path, const std::string& body, bool with_csrf,
                const std::string& type = "application/yaml") {
      auto res = client.Post(path, Headers(with_csrf), body, type);
      if (!res) return {};
      return {res->status, json::parse(res->body, nullptr, false)};
    }
  };

  // Signs in with `token` (as the console's sign-in form does, once, with
  // the bearer header) and keeps the cookie the answer set.
  Browser SignIn(const std::string& token, std::string* set_cookie = nullptr) {
    Browser b(port_);
    httplib::Client c("127.0.0.1", port_);
    c.set_bearer_token_auth(token);
    auto res = c.Post("/v1/console/session", "", "application/json");
    EXPECT_TRUE(res);
    if (!res) return b;
    EXPECT_EQ(res->status, 201) << res->body;
    const std::string cookie = res->get_header_value("Set-Cookie");
    if (set_cookie != nullptr) *set_cookie = cookie;
    b.cookie = cookie.substr(0, cookie.find(';'));
    b.csrf = json::parse(res->body, nullptr, false)["console"].value("csrf", "");
    return b;
  }
};

TEST_F(ConsoleSessionTest, ACookieActsAsItsIdentityAndAChangeNeedsTheCsrfToken) {
  std::string set_cookie;
  Browser b = SignIn(token_, &set_cookie);
  // The cookie is out of scripts' and other sites' reach.
  for (const char* attr : {"berth_session=", "; Path=/", "; HttpOnly", "; Secure",
                           "; SameSite=Strict", "; Max-Age=43200"}) {
    EXPECT_NE(set_cookie.find(attr), std::string::npos) << attr << " in " << set_cookie;
  }
  ASSERT_EQ(b.csrf.size(), 64u);
  // The secret in the cookie is not the token, nor the CSRF token.
  EXPECT_EQ(b.cookie.find(token_), std::string::npos);
  EXPECT_EQ(b.cookie.find(b.csrf), std::string::npos);

  Answer who = b.Get("/v1/whoami");
  ASSERT_EQ(who.status, 200) << who.body.dump();
  EXPECT_EQ(who.body["name"], "alice");
  Answer session = b.Get("/v1/console/session");
  ASSERT_EQ(session.status, 200) << session.body.dump();
  EXPECT_EQ(session.body["console"]["csrf"], b.csrf);
  EXPECT_EQ(session.body["console"]["expires_at_ms"], clock_.NowMs() + kConsoleSessionMs);
  // A bearer caller has no console session.
  EXPECT_TRUE(Get("/v1/console/session").body["console"].is_null());

  const std::string spec = "name: from-console\ncommand: [\"true\"]\n";
  Answer no_csrf = b.Post("/v1/jobs", spec, false);
  EXPECT_EQ(no_csrf.status, 403) << no_csrf.body.dump();
  EXPECT_EQ(no_csrf.body["error"]["field"], "X-Berth-CSRF");
  Browser forged(port_);
  forged.cookie = b.cookie;
  forged.csrf = std::string(64, '0');
  EXPECT_EQ(forged.Post("/v1/jobs", spec, true).status, 403);
  // Nothing was submitted by the refused changes.
  EXPECT_EQ(Get("/v1/jobs").body["jobs"].size(), 0u);
  Answer made = b.Post("/v1/jobs", spec, true);
  ASSERT_EQ(made.status, 201) << made.body.dump();
  EXPECT_EQ(made.body["submitted_by"], "alice");

  auto signed_out = b.client.Delete("/v1/console/session", b.Headers(true));
  ASSERT_TRUE(signed_out);
  EXPECT_EQ(signed_out->status, 200) << signed_out->body;
  EXPECT_NE(signed_out->get_header_value("Set-Cookie").find("berth_session=; "), std::string::npos);
  Answer after = b.Get("/v1/whoami");
  EXPECT_EQ(after.status, 401);
  EXPECT_NE(after.body["error"]["message"].get<std::string>().find("signed out"), std::string::npos)
      << after.body.dump();
}

TEST_F(ConsoleSessionTest, ASessionEndsWithItsExpiryItsTokenAndItsIdentity) {
  Browser b = SignIn(token_);
  ASSERT_EQ(b.Get("/v1/whoami").status, 200);
  clock_.Advance(kConsoleSessionMs);
  Answer expired = b.Get("/v1/whoami");
  EXPECT_EQ(expired.status, 401);
  EXPECT_NE(expired.body["error"]["message"].get<std::string>().find("expired"), std::string::npos);

  // A session made from a second token ends when that token is revoked, at
  // once (no cached verdict outlives the revocation).
  auto second = identities_->CreateToken("alice", "console", std::nullopt, "tests", clock_.NowMs());
  ASSERT_TRUE(second.has_value());
  Browser c = SignIn(second->token);
  ASSERT_EQ(c.Get("/v1/whoami").status, 200);
  Answer revoked = Post("/v1/tokens/" + second->record.id + "/revoke", "", "application/json");
  ASSERT_EQ(revoked.status, 200) << revoked.body.dump();
  Answer gone = c.Get("/v1/whoami");
  EXPECT_EQ(gone.status, 401);
  EXPECT_NE(gone.body["error"]["message"].get<std::string>().find("revoked or expired"),
            std::string::npos)
      << gone.body.dump();

  // Disabling the identity ends its sessions at once.
  store::Identity carol;
  carol.name = "carol";
  ASSERT_TRUE(identities_->CreateIdentity(carol).has_value());
  auto carols = identities_->CreateToken("carol", "console", std::nullopt, "tests", clock_.NowMs());
  ASSERT_TRUE(carols.has_value());
  Browser e = SignIn(carols->token);
  ASSERT_EQ(e.Get("/v1/whoami").status, 200);
  ASSERT_EQ(Post("/v1/identities/carol/disable", "", "application/json").status, 200);
  Answer disabled = e.Get("/v1/whoami");
  EXPECT_EQ(disabled.status, 401);
  EXPECT_NE(disabled.body["error"]["message"].get<std::string>().find("disabled"),
            std::string::npos)
      << disabled.body.dump();

  // A token that expires sooner than the session's 12 h bounds it.
  auto short_lived =
      identities_->CreateToken("alice", "short", clock_.NowMs() + 60'000, "tests", clock_.NowMs());
  ASSERT_TRUE(short_lived.has_value());
  Browser d = SignIn(short_lived->token);
  EXPECT_EQ(d.Get("/v1/console/session").body["console"]["expires_at_ms"], clock_.NowMs() + 60'000);
}

TEST_F(ConsoleSessionTest, AForgedOrMissingCookieIsAnonymousAndASessionCannotStartAnother) {
  Browser nobody(port_);
  EXPECT_EQ(nobody.Get("/v1/whoami").status, 401);
  nobody.cookie = "berth_session=" + std::string(64, 'a');
  Answer forged = nobody.Get("/v1/whoami");
  EXPECT_EQ(forged.status, 401);
  EXPECT_NE(forged.body["error"]["message"].get<std::string>().find("not known"),
            std::string::npos);
  // Signing in needs a bearer token: a session cannot mint a longer one.
  Browser b = SignIn(token_);
  EXPECT_EQ(b.Post("/v1/console/session", "", true, "application/json").status, 409);
  // Signing out with a bearer token ends nothing and says so.
  auto res = client_->Delete("/v1/console/session");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["signed_out"], false);
  EXPECT_EQ(b.Get("/v1/whoami").status, 200);
}

}  // namespace
}  // namespace berth::server
