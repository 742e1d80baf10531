// The REST API end to end inside one process: a real SqliteStore and
// Controller (never started: tests run passes with RunPass) behind the real
// Api on berthd's HTTP server over loopback, with a manual clock.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "api/api.h"
#include "common/clock.h"
#include "control/controller.h"
#include "http/server.h"
#include "sched/fifo_scheduler.h"
#include "store/identity_store.h"
#include "store/sqlite_store.h"

namespace berth::server {

class ApiHarness : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-api-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto s = store::SqliteStore::Open(dir_, clock_.NowMs());
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
    controller_ =
        std::make_unique<Controller>(*store_, scheduler_, clock_, ControllerOptions{dir_ / "logs"});
    // A real identity store: every request goes as alice, a platform admin.
    auto ids = store::IdentityStore::Open(dir_);
    ASSERT_TRUE(ids.has_value()) << ids.error().message;
    identities_ = std::move(*ids);
    store::Identity alice;
    alice.name = "alice";
    alice.platform_admin = true;
    ASSERT_TRUE(identities_->CreateIdentity(alice).has_value());
    auto token = identities_->CreateToken("alice", "tests", std::nullopt, "tests", clock_.NowMs());
    ASSERT_TRUE(token.has_value()) << token.error().message;
    token_ = token->token;
    auth_ = std::make_unique<Authorizer>(*identities_, clock_);
    api_ = std::make_unique<Api>(*controller_, *store_, *auth_, clock_);
    http_ = std::make_unique<http::Server>(HttpOptions());
    api_->Register(*http_);
    auto port = http_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.has_value()) << port.error().message;
    port_ = *port;
    http_->Start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_bearer_token_auth(token_);
  }
  void TearDown() override {
    client_.reset();
    http_->Stop();
    http_.reset();
    api_.reset();
    auth_.reset();
    identities_.reset();
    controller_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  struct Answer {
    int status = 0;
    nlohmann::json body;
  };
  Answer Get(const std::string& path) {
    auto res = client_->Get(path);
    if (!res) return {};
    return {res->status, nlohmann::json::parse(res->body, nullptr, false)};
  }
  // As alice (the client's token).
  Answer Post(const std::string& path, const std::string& body,
              const std::string& type = "application/yaml") {
    auto res = client_->Post(path, body, type);
    if (!res) return {};
    return {res->status, nlohmann::json::parse(res->body, nullptr, false)};
  }

  ManualClock clock_{1'000'000};
  sched::FifoScheduler scheduler_;
  std::filesystem::path dir_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<store::IdentityStore> identities_;
  std::unique_ptr<Authorizer> auth_;
  std::string token_;
  std::unique_ptr<Api> api_;
  // The server's limits; a fixture overrides them to test one.
  virtual http::ServerOptions HttpOptions() const {
    http::ServerOptions o;
    o.workers = 4;
    return o;
  }
  std::unique_ptr<http::Server> http_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace berth::server
