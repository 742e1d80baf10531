// Webhook secrets come only from berthd's secret directory: a rule naming
// any other file (berthd's TLS key, say), a `..`, or a link out of the
// directory is refused at apply with the field and the directory, and
// changes nothing; a secret goes over plain http only where the sink says
// so. The deliverer checks again at each delivery, so a rule stored before
// these checks, or a link swapped after the apply, sends nothing it should
// not. Real SqliteStore, real loopback receiver.
#include "meter/webhook_secret.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "meter/alerting.h"
#include "store/sqlite_store.h"

namespace berth::server {
namespace {

namespace fs = std::filesystem;

constexpr TimeMs kWebhookStart = 1'795'996'800'000;

// Records every request's Authorization header.
class Receiver {
 public:
  Receiver() {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      auth_.push_back(req.get_header_value("Authorization"));
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}/hook", port_); }
  std::vector<std::string> auth() {
    std::lock_guard lock(mu_);
    return auth_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> auth_;
};

class WebhookSecretTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "berth-secrets-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    secrets_ = dir_ / "secrets";
    fs::create_directory(secrets_);
    auto s = store::SqliteStore::Open(dir_ / "db", clock_.NowMs());
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
    router_ = std::make_unique<AlertRouter>(*store_, secrets_);
    ASSERT_TRUE(router_->Load().has_value());
    // berthd's own files beside the secret directory: what a hostile rule
    // would like to send.
    Write(dir_ / "tls-key.pem", "-----BEGIN PRIVATE KEY-----");
    Write(secrets_ / "pager.token", "s3cret\n");
  }
  void TearDown() override {
    router_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  static void Write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }
  // A rules document with one sink that has `secret_file`.
  static std::string Doc(const std::string& secret_file,
                         const std::string& url = "https://hooks.example/berth",
                         const std::string& extra = "") {
    return fmt::format(
        "sinks: [{{name: ops, url: '{}', secret_file: '{}'{}}}]\n"
        "rules: [{{name: gpus, kind: gpu_health, sinks: [ops]}}]",
        url, secret_file, extra);
  }
  void RaiseOne() {
    store::Alert a;
    a.subject = "n1/0";
    a.message = "Xid 48";
    a.raised_ms = clock_.NowMs();
    auto id = router_->Raise(model::AlertRuleKind::kGpuHealth, a, store::AlertDedupe::kOpen);
    ASSERT_TRUE(id.has_value() && id->has_value());
  }
  // One delivery attempt of everything due; the outbox's only row.
  store::AlertDelivery DeliverOnce() {
    AlertDeliverer deliverer(*store_, *router_, clock_, AlertDeliverer::Options{});
    EXPECT_EQ(deliverer.DeliverDue(clock_.NowMs()).value(), 1);
    auto list = store_->ListDeliveries(10, std::nullopt).value();
    EXPECT_EQ(list.size(), 1U);
    return list.empty() ? store::AlertDelivery{} : list[0];
  }

  fs::path dir_;
  fs::path secrets_;
  ManualClock clock_{kWebhookStart};
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<AlertRouter> router_;
};

TEST_F(WebhookSecretTest, AFileOutsideTheDirectoryALinkOutOfItOrADotDotIsRefusedAtApply) {
  fs::create_symlink(dir_ / "tls-key.pem", secrets_ / "key-link");
  fs::create_directory(secrets_ / "sub");
  fs::create_directory_symlink(dir_, secrets_ / "up");
  ASSERT_EQ(::mkfifo((secrets_ / "fifo").c_str(), 0600), 0);
  Write(secrets_ / "empty", "");
  Write(secrets_ / "big", std::string(kMaxWebhookSecretBytes + 1, 'x'));
  Write(secrets_ / "two-lines", "a\nb\n");
  struct Case {
    std::string secret_file;
    std::string says;
  };
  const std::vector<Case> cases = {
      {(dir_ / "tls-key.pem").string(), "is outside the webhook secret directory"},
      {"/etc/hostname", "is outside the webhook secret directory"},
      {secrets_.string() + "/../tls-key.pem", "'..'"},
      {"../tls-key.pem", "'..'"},
      {"sub/../../tls-key.pem", "'..'"},
      {"key-link", "leads out of the webhook secret directory"},
      {"up/tls-key.pem", "leads out of the webhook secret directory"},
      {(secrets_ / "key-link").string(), "leads out of the webhook secret directory"},
      {"missing.token", "cannot be read"},
      {"sub", "not a regular file"},
      {"fifo", "not a regular file"},
      {"empty", "is empty"},
      {"big", "a secret is a token of at most 4096 bytes"},
      {"two-lines", "control character"},
      {secrets_.string(), "is outside the webhook secret directory"},
  };
  for (const auto& c : cases) {
    auto v = router_->Apply(Doc(c.secret_file), "admin", "", clock_.NowMs());
    ASSERT_FALSE(v.has_value()) << c.secret_file;
    EXPECT_EQ(v.error().code, Code::kInvalidArgument) << c.secret_file;
    EXPECT_EQ(v.error().field, "sinks[0].secret_file") << c.secret_file;
    EXPECT_NE(v.error().message.find(c.says), std::string::npos)
        << c.secret_file << " -> " << v.error().message;
    if (c.says != "'..'") {
      EXPECT_NE(v.error().message.find(secrets_.string()), std::string::npos)
          << "names the directory: " << v.error().message;
    }
    EXPECT_EQ(v.error().message.find("PRIVATE KEY"), std::string::npos) << v.error().message;
  }
  EXPECT_EQ(router_->version(), 0) << "nothing was applied";
  EXPECT_TRUE(router_->Rules().sinks.empty());
}

TEST_F(WebhookSecretTest, AFileInTheDirectoryByNameOrPathOrThroughAnInsideLinkIsAccepted) {
  // A mounted secret: name -> ..data/name, ..data -> a dated directory.
  fs::create_directory(secrets_ / "..2026_12_03");
  Write(secrets_ / "..2026_12_03" / "mounted.token", "m0unted");
  fs::create_directory_symlink("..2026_12_03", secrets_ / "..data");
  fs::create_symlink("..data/mounted.token", secrets_ / "mounted.token");
  for (const std::string& name : {std::string("pager.token"), (secrets_ / "pager.token").string(),
                                  std::string("mounted.token")}) {
    auto v = router_->Apply(Doc(name), "admin", "", clock_.NowMs());
    EXPECT_TRUE(v.has_value()) << name << ": " << v.error().field << ": " << v.error().message;
  }
  EXPECT_EQ(WebhookSecrets(secrets_).Read("mounted.token", "f").value(), "m0unted");
  EXPECT_EQ(WebhookSecrets(secrets_).Read("pager.token", "f").value(), "s3cret");
}

TEST_F(WebhookSecretTest, WithoutADirectoryNoSinkMayHaveASecret) {
  AlertRouter none(*store_);
  auto v = none.Apply(Doc("pager.token"), "admin", "", clock_.NowMs());
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().field, "sinks[0].secret_file");
  EXPECT_NE(v.error().message.find("--webhook-secret-dir"), std::string::npos);
}

TEST_F(WebhookSecretTest, APlainHttpSinkGetsTheSecretOnlyWhenItSaysSo) {
  Receiver receiver;
  auto refused = router_->Apply(Doc("pager.token", receiver.url()), "admin", "", clock_.NowMs());
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "sinks[0].url");
  EXPECT_NE(refused.error().message.find("send_secret_over_http"), std::string::npos);
  EXPECT_EQ(router_->version(), 0);

  auto v = router_->Apply(Doc("pager.token", receiver.url(), ", send_secret_over_http: true"),
                          "admin", "", clock_.NowMs());
  ASSERT_TRUE(v.has_value()) << v.error().message;
  RaiseOne();
  auto d = DeliverOnce();
  EXPECT_TRUE(d.delivered_ms.has_value()) << d.last_error;
  EXPECT_EQ(receiver.auth(), std::vector<std::string>{"Bearer s3cret"});
}

// A document applied before these checks is only parsed when berthd loads
// it; the deliverer refuses what apply would have, and sends nothing.
TEST_F(WebhookSecretTest, ARuleStoredBeforeTheChecksSendsNeitherAFileOutsideNorASecretInTheClear) {
  Receiver receiver;
  for (const auto& [doc, says] : std::vector<std::pair<std::string, std::string>>{
           {Doc((dir_ / "tls-key.pem").string(), receiver.url(), ", send_secret_over_http: true"),
            "outside the webhook secret directory"},
           {Doc("pager.token", receiver.url()), "is plain http"},
       }) {
    ASSERT_TRUE(
        store_->ApplyAlertRules(doc, "admin", "", clock_.NowMs(), std::nullopt).has_value());
    ASSERT_TRUE(router_->Load().has_value()) << "a stored document still loads";
    RaiseOne();
    auto d = DeliverOnce();
    EXPECT_FALSE(d.delivered_ms.has_value());
    EXPECT_NE(d.last_error.find("not sent"), std::string::npos) << d.last_error;
    EXPECT_NE(d.last_error.find(says), std::string::npos) << d.last_error;
    EXPECT_TRUE(receiver.auth().empty()) << "the receiver heard from berthd";
    // Start over with an empty outbox.
    TearDown();
    SetUp();
  }
}

TEST_F(WebhookSecretTest, ALinkSwappedOutOfTheDirectoryAfterTheApplySendsNothing) {
  Receiver receiver;
  fs::create_symlink("pager.token", secrets_ / "current");
  ASSERT_TRUE(router_
                  ->Apply(Doc("current", receiver.url(), ", send_secret_over_http: true"), "admin",
                          "", clock_.NowMs())
                  .has_value());
  fs::remove(secrets_ / "current");
  fs::create_symlink(dir_ / "tls-key.pem", secrets_ / "current");
  RaiseOne();
  auto d = DeliverOnce();
  EXPECT_FALSE(d.delivered_ms.has_value());
  EXPECT_NE(d.last_error.find("leads out of the webhook secret directory"), std::string::npos)
      << d.last_error;
  EXPECT_TRUE(receiver.auth().empty());
}

}  // namespace
}  // namespace berth::server
