#include "store/pg_leadership.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace berth::store {

Status CheckLeadershipOptions(const LeadershipOptions& o, std::string_view ttl_flag) {
  if (o.ttl.count() <= 0 || o.renew_every.count() <= 0 || o.retry_every.count() <= 0) {
    return InvalidField(std::string(ttl_flag), "leadership times are positive durations");
  }
  if (o.renew_every * 3 > o.ttl) {
    return InvalidField(std::string(ttl_flag),
                        fmt::format("a lease of {} ms is renewed every {} ms: give it at least "
                                    "three renewals (a ttl of 3s or more)",
                                    o.ttl.count(), o.renew_every.count()));
  }
  if (o.retry_every >= o.ttl) {
    return InvalidField(std::string(ttl_flag), "standbys read the lease more often than it lasts");
  }
  return Ok();
}

Result<std::unique_ptr<Leadership>> Leadership::Open(const std::string& conninfo,
                                                     std::string holder, const Clock& clock,
                                                     LeadershipOptions options) {
  BERTH_RETURN_IF_ERROR(CheckLeadershipOptions(options, "ttl"));
  if (holder.empty()) return InvalidField("holder", "a berthd leads under a name");
  // A link that goes dead is given up within one lease: a standby then
  // reconnects (and sees the database again as soon as it can), and a
  // leader's renewal fails rather than hangs.
  auto conn = PgConnection::Open(conninfo, options.ttl);
  if (!conn) return std::unexpected(conn.error());
  BERTH_RETURN_IF_ERROR(EnsureLeaseTable(*conn));
  return std::unique_ptr<Leadership>(
      new Leadership(std::make_unique<PgConnection>(std::move(*conn)), conninfo, std::move(holder),
                     clock, options));
}

Leadership::Leadership(std::unique_ptr<PgConnection> conn, std::string conninfo, std::string holder,
                       const Clock& clock, LeadershipOptions options)
    : conn_(std::move(conn)),
      conninfo_(std::move(conninfo)),
      holder_(std::move(holder)),
      clock_(clock),
      options_(options) {}

Leadership::~Leadership() {
  Stop();
  if (renewer_.joinable()) renewer_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

void Leadership::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void Leadership::Release() {
  Stop();
  if (renewer_.joinable()) renewer_.join();
  if (watchdog_.joinable()) watchdog_.join();
  const std::int64_t term = term_.exchange(0);
  if (term == 0) return;
  if (auto st = ReleaseLease(*conn_, holder_, term); !st) {
    spdlog::warn("leadership: could not give the lease of term {} up (it lapses): {}", term,
                 st.error().message);
    return;
  }
  spdlog::info("leadership: gave the lease of term {} up", term);
}

bool Leadership::Sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stopping_; });
}

void Leadership::Seen(const LeaseState& lease) {
  std::lock_guard lock(mu_);
  seen_ = lease;
  seen_at_ = clock_.NowMs();
  last_error_.clear();
}

void Leadership::Failed(const std::string& why) {
  std::lock_guard lock(mu_);
  last_error_ = why;
}

TimeMs Leadership::lease_seen_at() const {
  std::lock_guard lock(mu_);
  return seen_at_;
}

std::string Leadership::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

LeaseState Leadership::last_seen() const {
  std::lock_guard lock(mu_);
  return seen_;
}

bool Leadership::Reconnect() {
  auto conn = PgConnection::Open(conninfo_, options_.ttl);
  if (!conn) {
    spdlog::warn("leadership: cannot reach the database: {}", conn.error().message);
    Failed("cannot connect to the database");
    return false;
  }
  conn_ = std::make_unique<PgConnection>(std::move(*conn));
  return true;
}

Result<std::int64_t> Leadership::Acquire() {
  std::string last_holder;
  bool connected = true;
  for (;;) {
    if (!connected) connected = Reconnect();
    if (connected) {
      auto attempt = TryAcquireLease(*conn_, holder_, clock_.NowMs(), options_.ttl);
      if (!attempt) {
        spdlog::warn("leadership: cannot read the lease (retrying): {}", attempt.error().message);
        Failed("cannot read the lease");
        if (attempt.error().code == Code::kUnavailable) connected = false;
      } else {
        Seen(attempt->lease);
        if (attempt->acquired) {
          since_.store(clock_.NowMs());
          term_.store(attempt->lease.term);
          spdlog::info("leadership: this berthd leads at term {}", attempt->lease.term);
          return attempt->lease.term;
        }
        if (attempt->lease.holder != last_holder) {
          last_holder = attempt->lease.holder;
          spdlog::info("leadership: standing by; {} leads at term {}", last_holder,
                       attempt->lease.term);
        }
      }
    }
    if (!Sleep(options_.retry_every)) {
      return Fail(Code::kUnavailable, "leadership: stopped while standing by");
    }
  }
}

Status Leadership::InstallWriteFence() {
  return berth::store::InstallWriteFence(*conn_);
}

void Leadership::KeepRenewing(std::function<void(const std::string& why)> on_lost) {
  renewed_until_.store(last_seen().expires_at_ms);
  // Whichever thread sees the loss first reports it; the other one ends.
  auto lose = [this, on_lost = std::move(on_lost)](const std::string& why) {
    if (lost_.exchange(true)) return;
    term_.store(0);
    on_lost(why);
  };
  const std::int64_t term = term_.load();
  renewer_ = std::thread([this, lose] { RenewLoop(lose); });
  watchdog_ = std::thread([this, lose, term] { WatchLoop(lose, term); });
}

void Leadership::RenewLoop(const std::function<void(const std::string&)>& lose) {
  const std::int64_t term = term_.load();
  bool connected = true;
  while (Sleep(options_.renew_every) && !lost_.load()) {
    if (!connected) connected = Reconnect();
    if (!connected) continue;
    auto renewed = RenewLease(*conn_, holder_, term, clock_.NowMs(), options_.ttl);
    if (renewed) {
      renewed_until_.store(renewed->expires_at_ms);
      Seen(*renewed);
      continue;
    }
    if (renewed.error().code == Code::kFailedPrecondition) {
      lose(renewed.error().message);
      return;
    }
    spdlog::warn("leadership: renewal of term {} failed (retrying): {}", term,
                 renewed.error().message);
    Failed("cannot renew the lease");
    if (renewed.error().code == Code::kUnavailable) connected = false;
  }
}

void Leadership::WatchLoop(const std::function<void(const std::string&)>& lose, std::int64_t term) {
  // Step down a renewal before the lease lapses, so that a standby that
  // takes it finds this berthd already gone. Checked on the local clock,
  // apart from the renewals, which may be stuck on an unanswering database.
  const auto every = std::max(std::chrono::milliseconds(10), options_.renew_every / 8);
  while (Sleep(every) && !lost_.load()) {
    const TimeMs until = renewed_until_.load();
    if (clock_.NowMs() + options_.renew_every.count() >= until) {
      lose(fmt::format(
          "the lease of term {} would have lapsed at {} ms before a renewal got through", term,
          until));
      return;
    }
  }
}

}  // namespace berth::store
