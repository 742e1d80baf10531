// The gRPC side of the agent stream: accepts one Connect stream per agent,
// turns its messages into Controller calls, and carries orders back.
#pragma once

#include "berth/v1/agent.grpc.pb.h"
#include "server/controller.h"

namespace berth::server {

class AgentService final : public berth::v1::AgentService::Service {
 public:
  explicit AgentService(Controller& controller) : controller_(controller) {}

  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<berth::v1::ServerMessage, berth::v1::AgentMessage>* stream) override;

 private:
  Controller& controller_;
};

}  // namespace berth::server
