// Leadership of several berthd that share one PostgreSQL database (issue 20,
// docs/operations.md "High availability"): one of them holds the lease
// (store/pg_lease.h) and is the active control plane; the others are
// standbys that watch the lease and take it when it lapses.
//
// A standby polls the lease every retry interval. The leader renews it
// every renew interval and steps down (on_lost) when it cannot: deposed,
// lapsed, or unable to reach the database until its lease would lapse less
// one renew interval. A watchdog thread keeps that deadline on the local
// clock, so a renewal that hangs (the database's host cut off, its packets
// dropped) does not keep a leader in office. Stepping down is the
// caller's: berthd exits, so that its supervisor restarts it as a standby
// with nothing of the old term in memory. Safety does not rest on the
// step-down being timely: every write declares its term and the
// database's write fence refuses a deposed one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "store/pg_db.h"
#include "store/pg_lease.h"

namespace berth::store {

struct LeadershipOptions {
  // How long a lease lasts past its last renewal: the longest a dead
  // leader holds the control plane up.
  std::chrono::milliseconds ttl{3000};
  // The leader renews this often (at most a third of ttl).
  std::chrono::milliseconds renew_every{750};
  // A standby reads the lease this often.
  std::chrono::milliseconds retry_every{200};
};

// Checks the options: positive, renew_every at most ttl / 3 and
// retry_every below ttl. Errors name the flag (`ttl_flag`).
Status CheckLeadershipOptions(const LeadershipOptions& o, std::string_view ttl_flag);

class Leadership {
 public:
  // Connects its own session to `conninfo` and makes the lease table.
  // `holder` names this berthd in the lease (its address and process).
  static Result<std::unique_ptr<Leadership>> Open(const std::string& conninfo, std::string holder,
                                                  const Clock& clock, LeadershipOptions options);
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // Blocks until this berthd takes the lease, and returns its term; or
  // kUnavailable once Stop() is called. A failed read is logged and retried
  // (the database may be restarting).
  Result<std::int64_t> Acquire();
  // Renews the lease on a thread of its own from now on; calls `on_lost`
  // once, from that thread or the watchdog's, when the lease cannot be
  // kept: deposed, or not renewed by one renew interval before it lapses
  // (whether the renewal failed or is still waiting on the database).
  void KeepRenewing(std::function<void(const std::string& why)> on_lost);
  // Ends Acquire and the renewals (does not give the lease up: it lapses).
  void Stop();
  // Stops renewing and gives the lease up now, if this berthd still holds
  // it: for a clean shutdown, once nothing of this term writes any more.
  void Release();

  // Installs the database's write fence on this session (pg_lease.h).
  Status InstallWriteFence();

  // The lease as last read or written.
  LeaseState last_seen() const;
  // When it was (on the clock given to Open; 0: never): how current this
  // berthd's view of the control plane is, its lag as a standby.
  TimeMs lease_seen_at() const;
  // What failed last (reaching the database, reading or renewing the
  // lease), empty once one succeeds again. A fixed phrase, for /healthz,
  // which anyone may read: no address and no server text (the log has
  // those).
  std::string last_error() const;
  bool leading() const { return term_.load() > 0; }
  std::int64_t term() const { return term_.load(); }
  // When this berthd took the lease (0: it does not lead).
  TimeMs leading_since() const { return since_.load(); }
  const std::string& holder() const { return holder_; }

 private:
  Leadership(std::unique_ptr<PgConnection> conn, std::string conninfo, std::string holder,
             const Clock& clock, LeadershipOptions options);
  // Reconnects after a lost session; false (logged) if it cannot.
  bool Reconnect();
  // Sleeps `d` unless stopped first; false: stopped.
  bool Sleep(std::chrono::milliseconds d);
  void RenewLoop(const std::function<void(const std::string&)>& lose);
  void WatchLoop(const std::function<void(const std::string&)>& lose, std::int64_t term);
  void Seen(const LeaseState& lease);
  void Failed(const std::string& why);

  std::unique_ptr<PgConnection> conn_;
  std::string conninfo_;
  std::string holder_;
  const Clock& clock_;
  LeadershipOptions options_;
  std::atomic<std::int64_t> term_{0};
  std::atomic<TimeMs> since_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  LeaseState seen_;
  TimeMs seen_at_ = 0;
  std::string last_error_;
  std::thread renewer_;
  std::thread watchdog_;
  // The lease's expiry as of the last renewal that succeeded.
  std::atomic<TimeMs> renewed_until_{0};
  std::atomic<bool> lost_{false};
};

}  // namespace berth::store
