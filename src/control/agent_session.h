// One connected agent's side of the stream, as the control loop sees it: a
// way to send orders. The gRPC service implements it over the bidirectional
// stream; tests may implement it over anything else.
#pragma once

#include <string>

#include "berth/v1/agent.pb.h"

namespace berth::server {

class AgentSession {
 public:
  virtual ~AgentSession() = default;
  // False once the stream is closed; the order is then re-sent to the next
  // session of the same node, which is safe because orders are idempotent.
  virtual bool Send(const berth::v1::ServerMessage& msg) = 0;
  virtual const std::string& node() const = 0;
  // Ends the stream now (the node was removed): the agent sees it close
  // with `why`, or with a cancellation where the transport cannot say more.
  virtual void Disconnect(const std::string& why) { (void)why; }
};

}  // namespace berth::server
