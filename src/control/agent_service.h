// The gRPC side of the agent stream: accepts one Connect stream per agent,
// turns its messages into Controller calls, and carries orders back.
//
// Who may speak for a node: on a mutual-TLS listener every agent presents a
// client certificate whose subject CN is its node name, and the node it
// registers as must be that name; one stream is one node for its whole life.
// Peers without a certificate are accepted only where berthd allows them:
// the in-process channel of embedded agents, and a loopback listener started
// with --plain-agents. A certificate revoked by the node's removal is
// refused at registration; a node renews its certificate over its stream
// (RenewCertificate), for its own name only.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>

#include "berth/v1/agent.grpc.pb.h"
#include "control/controller.h"

namespace berth::server {

class AgentService final : public berth::v1::AgentService::Service {
 public:
  // `require_peer_cert`: refuse every peer that did not present a verified
  // client certificate, except in-process embedded agents.
  explicit AgentService(Controller& controller, bool require_peer_cert = false)
      : controller_(controller), require_peer_cert_(require_peer_cert) {}

  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<berth::v1::ServerMessage, berth::v1::AgentMessage>* stream) override;

 private:
  // PERMISSION_DENIED when `run` was placed on another node than `node`.
  std::optional<grpc::Status> CheckRunOwner(const std::string& node, const std::string& run,
                                            std::unordered_set<std::string>& own_runs,
                                            const grpc::ServerContext& context);

  // Answers a RenewCertificate with a CertificateIssued (the certificate, or
  // why not) on the stream.
  void RenewCertificate(const std::string& node, std::optional<TimeMs> cert_issued_ms,
                        const berth::v1::RenewCertificate& req, AgentSession& session,
                        const grpc::ServerContext& context);

  Controller& controller_;
  bool require_peer_cert_;
};

}  // namespace berth::server
