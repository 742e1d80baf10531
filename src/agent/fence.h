// Self-fencing (docs/operations.md, "Fencing"): an agent out of contact with
// berthd for longer than berthd's lease plus its own fence grace stops every
// run it holds, because from then on berthd may presume them gone and start
// their jobs' next attempts elsewhere (model/fencing.h has the contract).
// This is the decision alone, on an injected clock; the agent tells it about
// contact and stops the runs when it says so.
//
// Contact is berthd's answer to a registration (it carries the lease) and,
// after it, every moment the registered stream stays open: gRPC keepalive
// closes a stream whose berthd has stopped answering. The last contact is
// kept in a small file, so an agent restarted while cut off still fences on
// time instead of starting the count again.
//
// Not thread-safe: the agent's worker owns it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "common/clock.h"

namespace berth::agent {

class Fence {
 public:
  // `grace_ms`: the agent's --fence-grace; nullopt never fences (an embedded
  // agent lives and dies with berthd, so it cannot be cut off from it).
  // `state_file`: where the last contact is kept; empty: nowhere.
  Fence(std::optional<std::int64_t> grace_ms, std::filesystem::path state_file, const Clock& clock);

  // Takes the last contact a previous agent on this data dir recorded, if
  // any (never later than now). Call once, before anything else.
  void Restore();
  // berthd accepted the registration and gave its lease (0: none given,
  // which leaves fencing as it was).
  void Registered(std::int64_t lease_ms);
  // The registered stream is still open, or a message came on it.
  void InContact();
  // Whether the fence time has come without contact: the caller stops every
  // run it holds, and keeps stopping any it could not stop yet, until
  // contact returns.
  bool Due() const;

  // When the runs are fenced if contact does not return; nullopt when they
  // never are (fencing off, or no lease known yet: never registered).
  std::optional<TimeMs> deadline_ms() const;
  std::optional<std::int64_t> grace_ms() const { return grace_ms_; }
  TimeMs last_contact_ms() const { return last_contact_ms_; }
  std::int64_t lease_ms() const { return lease_ms_; }

 private:
  void Save();

  std::optional<std::int64_t> grace_ms_;
  std::filesystem::path state_file_;
  const Clock& clock_;
  TimeMs last_contact_ms_ = 0;
  std::int64_t lease_ms_ = 0;  // 0: never registered, nothing to count from
  // last_contact_ms_ as last written: the file is rewritten at most once a
  // second, so a restarted agent may count from up to a second early (it
  // fences that much sooner, never later).
  TimeMs saved_ms_ = 0;
  bool save_failed_ = false;  // logged once until a write works again
};

}  // namespace berth::agent
