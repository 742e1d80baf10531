// A Controller over a real SqliteStore in a fresh temporary directory, with
// a manual clock and the scheduler the test chooses; Reopen() is a berthd
// restart (a new store and controller over the same database).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/clock.h"
#include "control/controller.h"
#include "store/sqlite_store.h"

namespace berth::server {

template <typename SchedulerT>
class ControllerFixture : public ::testing::Test {
 protected:
  explicit ControllerFixture(TimeMs start_ms) : clock_(start_ms) {}

  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-ctl-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    controller_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    controller_.reset();
    store_.reset();
    auto s = store::SqliteStore::Open(dir_, clock_.NowMs());
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
    controller_ =
        std::make_unique<Controller>(*store_, scheduler_, clock_, ControllerOptions{dir_ / "logs"});
  }

  ManualClock clock_;
  SchedulerT scheduler_;
  std::filesystem::path dir_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<Controller> controller_;
};

}  // namespace berth::server
