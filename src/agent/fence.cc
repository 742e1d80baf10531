#include "agent/fence.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "model/fencing.h"

namespace berth::agent {

using nlohmann::json;

Fence::Fence(std::optional<std::int64_t> grace_ms, std::filesystem::path state_file,
             const Clock& clock)
    : grace_ms_(grace_ms), state_file_(std::move(state_file)), clock_(clock) {}

void Fence::Restore() {
  if (state_file_.empty() || !grace_ms_) return;
  std::ifstream in(state_file_);
  if (!in) return;  // never registered on this data dir
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j["last_contact_ms"].is_number_integer() ||
      !j["lease_ms"].is_number_integer()) {
    spdlog::warn("{} is unreadable; fencing counts from the next registration",
                 state_file_.string());
    return;
  }
  // A clock set back since must not push the fence time into the future.
  last_contact_ms_ = std::min(j["last_contact_ms"].get<TimeMs>(), clock_.NowMs());
  lease_ms_ = std::max<std::int64_t>(j["lease_ms"].get<std::int64_t>(), 0);
  saved_ms_ = last_contact_ms_;
}

void Fence::Registered(std::int64_t lease_ms) {
  if (lease_ms > 0) lease_ms_ = lease_ms;
  // Following the clock even backwards: a clock set back fences earlier,
  // never later.
  last_contact_ms_ = clock_.NowMs();
  Save();
}

void Fence::InContact() {
  last_contact_ms_ = clock_.NowMs();
  if (last_contact_ms_ < saved_ms_ || last_contact_ms_ - saved_ms_ >= 1000) Save();
}

std::optional<TimeMs> Fence::deadline_ms() const {
  if (!grace_ms_ || lease_ms_ <= 0) return std::nullopt;
  return last_contact_ms_ + model::AgentFenceAfterMs(lease_ms_, *grace_ms_);
}

bool Fence::Due() const {
  auto deadline = deadline_ms();
  return deadline && clock_.NowMs() >= *deadline;
}

void Fence::Save() {
  saved_ms_ = last_contact_ms_;
  if (state_file_.empty() || !grace_ms_) return;
  // Atomic (a reader sees the old file or the new one) but not synced: a
  // power cut that loses it ends the node's runs as well.
  const std::string tmp = state_file_.string() + ".tmp." + std::to_string(::getpid());
  bool written = false;
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"last_contact_ms", last_contact_ms_}, {"lease_ms", lease_ms_}}.dump() << '\n';
    out.flush();
    written = out.good();
  }
  std::error_code ec;
  if (written) std::filesystem::rename(tmp, state_file_, ec);
  const bool failed = !written || ec;
  if (failed) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    if (!save_failed_) {
      spdlog::warn(
          "cannot write {}{}; an agent restarted now would not fence its runs before it "
          "registers",
          state_file_.string(), ec ? ": " + ec.message() : "");
    }
  }
  save_failed_ = failed;
}

}  // namespace berth::agent
