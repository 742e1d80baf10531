// Asking a node for a run's outputs (docs/jobs.md#outputs). berthd has no
// copy: the files stay on the node where the run wrote them, and a download
// is a series of OutputRequests on that node's agent stream, each answered
// by one OutputReply. The broker pairs the two; the API decides who may ask.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "berth/v1/agent.pb.h"
#include "common/status.h"
#include "control/agent_session.h"

namespace berth::server {

// How long berthd waits for a node's answer before it tells the caller the
// node did not answer.
inline constexpr std::chrono::milliseconds kOutputReplyTimeout{10'000};

class OutputBroker {
 public:
  // Sends `req` (its request_id is set here) on `session` and waits up to
  // `timeout` for the node's reply. Unavailable when the stream is closed or
  // the node does not answer in time.
  Result<berth::v1::OutputReply> Ask(AgentSession& session, berth::v1::OutputRequest req,
                                     std::chrono::milliseconds timeout = kOutputReplyTimeout);
  // A reply from `node`'s stream. One nobody waits for (given up on), or
  // from a node other than the one asked, is dropped.
  void OnReply(const std::string& node, berth::v1::OutputReply reply);

 private:
  struct Pending {
    std::string node;
    std::optional<berth::v1::OutputReply> reply;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, Pending> pending_;
};

}  // namespace berth::server
