#include "control/outputs.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace berth::server {

Result<berth::v1::OutputReply> OutputBroker::Ask(AgentSession& session,
                                                 berth::v1::OutputRequest req,
                                                 std::chrono::milliseconds timeout) {
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    pending_[id] = Pending{session.node(), std::nullopt};
  }
  req.set_request_id(id);
  berth::v1::ServerMessage msg;
  *msg.mutable_output_request() = std::move(req);
  const bool sent = session.Send(msg);
  std::unique_lock lock(mu_);
  if (sent) {
    cv_.wait_for(lock, timeout, [&] { return pending_[id].reply.has_value(); });
  }
  auto reply = std::move(pending_[id].reply);
  pending_.erase(id);
  if (!sent) {
    return Fail(
        Code::kUnavailable,
        fmt::format("node {} disconnected while berthd asked it; try again", session.node()));
  }
  if (!reply) {
    return Fail(Code::kUnavailable, fmt::format("node {} did not answer within {} s; try again",
                                                session.node(), timeout.count() / 1000));
  }
  return std::move(*reply);
}

void OutputBroker::OnReply(const std::string& node, berth::v1::OutputReply reply) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(reply.request_id());
  if (it == pending_.end() || it->second.reply) return;  // given up on, or answered
  if (it->second.node != node) {
    spdlog::warn("node {} answered output request {} sent to node {}; dropped", node,
                 reply.request_id(), it->second.node);
    return;
  }
  it->second.reply = std::move(reply);
  cv_.notify_all();
}

}  // namespace berth::server
