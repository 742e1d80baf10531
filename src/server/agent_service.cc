#include "server/agent_service.h"

#include <spdlog/spdlog.h>

#include <mutex>

namespace berth::server {
namespace {

using Stream = grpc::ServerReaderWriter<berth::v1::ServerMessage, berth::v1::AgentMessage>;

// Writes are serialised: the control loop and the stream's own reader thread
// (acks, registration replies) both send on it.
class StreamSession final : public AgentSession {
 public:
  StreamSession(std::string node, Stream* stream) : node_(std::move(node)), stream_(stream) {}

  bool Send(const berth::v1::ServerMessage& msg) override {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    if (!stream_->Write(msg)) closed_ = true;
    return !closed_;
  }
  const std::string& node() const override { return node_; }

  // Called when the RPC returns: the stream pointer dies with it.
  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
  }

 private:
  std::string node_;
  std::mutex mu_;
  Stream* stream_;
  bool closed_ = false;
};

}  // namespace

grpc::Status AgentService::Connect(grpc::ServerContext* context, Stream* stream) {
  berth::v1::AgentMessage msg;
  if (!stream->Read(&msg)) return grpc::Status::OK;
  if (!msg.has_register_()) {
    return {grpc::StatusCode::FAILED_PRECONDITION, "the first message must be Register"};
  }
  const std::string node = msg.register_().node().name();
  auto session = std::make_shared<StreamSession>(node, stream);
  if (auto st = controller_.OnRegister(msg.register_(), session); !st) {
    spdlog::error("registration of {} from {} failed: {}", node, context->peer(),
                  st.error().message);
    session->Close();
    return {grpc::StatusCode::INVALID_ARGUMENT, st.error().message};
  }
  while (stream->Read(&msg)) {
    Status st = Ok();
    controller_.OnHeartbeat(node);  // any message proves the agent is alive
    switch (msg.msg_case()) {
      case berth::v1::AgentMessage::kHeartbeat:
        break;
      case berth::v1::AgentMessage::kRunStarted:
        st = controller_.OnRunStarted(node, msg.run_started());
        break;
      case berth::v1::AgentMessage::kRunExited:
        st = controller_.OnRunExited(node, msg.run_exited());
        break;
      case berth::v1::AgentMessage::kLogChunk:
        st = controller_.OnLogChunk(node, msg.log_chunk());
        break;
      case berth::v1::AgentMessage::kRunCheckpoint:
        st = controller_.OnRunCheckpoint(node, msg.run_checkpoint());
        break;
      case berth::v1::AgentMessage::kGpuHealth:
        st = controller_.OnGpuHealth(node, msg.gpu_health());
        break;
      case berth::v1::AgentMessage::kRegister:
      case berth::v1::AgentMessage::MSG_NOT_SET:
        spdlog::warn("agent {} sent an unexpected message; ignored", node);
        break;
    }
    if (!st) {
      // Nothing was acknowledged: the agent re-sends on its next connection.
      spdlog::error("agent {}: {}; closing the stream", node, st.error().message);
      break;
    }
  }
  session->Close();
  controller_.OnDisconnect(session);
  spdlog::info("agent {} disconnected", node);
  return grpc::Status::OK;
}

}  // namespace berth::server
