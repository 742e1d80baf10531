#include "control/agent_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <optional>
#include <unordered_set>

#include "control/agent_decode.h"
#include "control/pki.h"

namespace berth::server {
namespace {

using Stream = grpc::ServerReaderWriter<berth::v1::ServerMessage, berth::v1::AgentMessage>;

// Writes are serialised: the control loop and the stream's own reader thread
// (acks, registration replies) both send on it.
class StreamSession final : public AgentSession {
 public:
  StreamSession(std::string node, Stream* stream, grpc::ServerContext* context)
      : node_(std::move(node)), stream_(stream), context_(context) {}

  bool Send(const berth::v1::ServerMessage& msg) override {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    if (!stream_->Write(msg)) closed_ = true;
    return !closed_;
  }
  const std::string& node() const override { return node_; }
  // The agent sees the stream cancelled; its next connection is refused
  // with the reason (the certificate is revoked).
  void Disconnect(const std::string& why) override {
    std::lock_guard lock(mu_);
    if (closed_) return;
    spdlog::info("disconnecting agent {}: {}", node_, why);
    closed_ = true;
    context_->TryCancel();
  }

  // Called when the RPC returns: the stream pointer dies with it.
  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
  }

 private:
  std::string node_;
  std::mutex mu_;
  Stream* stream_;
  grpc::ServerContext* context_;
  bool closed_ = false;
};

// The verified client certificate's subject CN, or "" when the peer
// presented none (plain listener, in-process channel).
std::string PeerCommonName(const grpc::ServerContext& context) {
  auto auth = context.auth_context();
  if (!auth) return "";
  auto values = auth->FindPropertyValues("x509_common_name");
  if (values.empty()) return "";
  return {values.front().data(), values.front().size()};
}

// The verified client certificate's notBefore (its issue time), or nullopt
// when the peer presented none.
std::optional<TimeMs> PeerCertIssuedMs(const grpc::ServerContext& context) {
  auto auth = context.auth_context();
  if (!auth) return std::nullopt;
  auto values = auth->FindPropertyValues("x509_pem_cert");
  if (values.empty()) return std::nullopt;
  auto validity = pki::ValidityOf(std::string(values.front().data(), values.front().size()));
  if (!validity) return std::nullopt;
  return validity->not_before_ms;
}

// Whether the peer came over a socket; embedded agents' in-process channel
// has no address (gRPC names it "unknown" or "inproc").
bool NetworkPeer(const grpc::ServerContext& context) {
  const std::string peer = context.peer();
  return peer.starts_with("ipv4:") || peer.starts_with("ipv6:") || peer.starts_with("unix:");
}

// The run a message reports on, or "" for messages about no run.
std::string RunOf(const berth::v1::AgentMessage& msg) {
  switch (msg.msg_case()) {
    case berth::v1::AgentMessage::kRunStarted:
      return msg.run_started().run_id();
    case berth::v1::AgentMessage::kRunExited:
      return msg.run_exited().run_id();
    case berth::v1::AgentMessage::kLogChunk:
      return msg.log_chunk().run_id();
    case berth::v1::AgentMessage::kRunCheckpoint:
      return msg.run_checkpoint().run_id();
    case berth::v1::AgentMessage::kRunHealth:
      return msg.run_health().run_id();
    default:
      return "";
  }
}

}  // namespace

std::optional<grpc::Status> AgentService::CheckRunOwner(const std::string& node,
                                                        const std::string& run,
                                                        std::unordered_set<std::string>& own_runs,
                                                        const grpc::ServerContext& context) {
  if (run.empty() || own_runs.contains(run)) return std::nullopt;
  auto owner = controller_.NodeOfRun(run);
  if (!owner) {
    return grpc::Status{grpc::StatusCode::UNAVAILABLE, owner.error().message};
  }
  // An unknown run is the controller's to ignore; a run of another node is
  // an attempt to act for that node.
  if (owner->has_value() && **owner != node) {
    spdlog::error("agent {} from {} refused: it reported on run {} of node {}", node,
                  context.peer(), run, **owner);
    return grpc::Status{
        grpc::StatusCode::PERMISSION_DENIED,
        fmt::format("node '{}' cannot report on run {}: it runs on node '{}'", node, run, **owner)};
  }
  if (owner->has_value()) own_runs.insert(run);
  return std::nullopt;
}

void AgentService::RenewCertificate(const std::string& node, std::optional<TimeMs> cert_issued_ms,
                                    const berth::v1::RenewCertificate& req, AgentSession& session,
                                    const grpc::ServerContext& context) {
  berth::v1::ServerMessage reply;
  auto* issued = reply.mutable_certificate_issued();
  Result<std::string> cert = Fail(Code::kFailedPrecondition,
                                  "this stream presented no client certificate: there is none to "
                                  "renew (a plain or in-process agent)");
  if (cert_issued_ms) {
    cert = controller_.RenewNodeCert(node, *cert_issued_ms, req.csr_pem(), context.peer());
  }
  if (cert) {
    issued->set_cert_pem(std::move(*cert));
  } else {
    spdlog::warn("agent {} from {}: certificate renewal refused: {}", node, context.peer(),
                 cert.error().message);
    issued->set_error(cert.error().message);
    issued->set_code(static_cast<std::int32_t>(cert.error().code));
  }
  session.Send(reply);
}

grpc::Status AgentService::Connect(grpc::ServerContext* context, Stream* stream) {
  const std::string cert_node = PeerCommonName(*context);
  if (cert_node.empty() && require_peer_cert_ && NetworkPeer(*context)) {
    spdlog::warn("agent from {} refused: it presented no client certificate", context->peer());
    return {grpc::StatusCode::UNAUTHENTICATED,
            "berthd requires a node client certificate (berth-agent --tls-cert/--tls-key, "
            "issued with `berthd cert node NODE`)"};
  }
  berth::v1::AgentMessage msg;
  if (!stream->Read(&msg)) return grpc::Status::OK;
  if (!msg.has_register_()) {
    return {grpc::StatusCode::FAILED_PRECONDITION, "the first message must be Register"};
  }
  const std::string node = msg.register_().node().name();
  if (msg.register_().node().address().empty()) {
    // Where the agent's stream comes from is where its replicas are reached,
    // unless the agent advertises another address (several interfaces, NAT).
    msg.mutable_register_()->mutable_node()->set_address(AddressOfPeer(context->peer()));
  }
  const std::optional<TimeMs> cert_issued_ms =
      cert_node.empty() ? std::nullopt : PeerCertIssuedMs(*context);
  if (!cert_node.empty() && !cert_issued_ms) {
    return {grpc::StatusCode::UNAUTHENTICATED, "cannot read the client certificate's validity"};
  }
  if (!cert_node.empty() && node != cert_node) {
    spdlog::error(
        "agent from {} refused: its certificate is for node '{}' but it registered as "
        "'{}'",
        context->peer(), cert_node, node);
    return {grpc::StatusCode::PERMISSION_DENIED,
            fmt::format("this certificate is for node '{}' and cannot register node '{}'; run the "
                        "agent with --node-name {} or issue a certificate for '{}'",
                        cert_node, node, cert_node, node)};
  }
  // Runs this stream has shown to be its node's; a run_id never repeats.
  std::unordered_set<std::string> own_runs;
  // A restarted agent reports the runs it recovered: only its own node's.
  for (const auto& run : msg.register_().runs()) {
    if (auto denied = CheckRunOwner(node, run.run_id(), own_runs, *context)) return *denied;
  }
  auto session = std::make_shared<StreamSession>(node, stream, context);
  if (auto st = controller_.OnRegister(msg.register_(), session, cert_issued_ms); !st) {
    spdlog::error("registration of {} from {} failed: {}", node, context->peer(),
                  st.error().message);
    session->Close();
    return {st.error().code == Code::kPermissionDenied ? grpc::StatusCode::PERMISSION_DENIED
                                                       : grpc::StatusCode::INVALID_ARGUMENT,
            st.error().message};
  }
  while (stream->Read(&msg)) {
    if (auto denied = CheckRunOwner(node, RunOf(msg), own_runs, *context)) {
      session->Close();
      controller_.OnDisconnect(session);
      return *denied;
    }
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
      case berth::v1::AgentMessage::kRunHealth:
        st = controller_.OnRunHealth(node, msg.run_health());
        break;
      case berth::v1::AgentMessage::kGpuHealth:
        st = controller_.OnGpuHealth(node, msg.gpu_health());
        break;
      case berth::v1::AgentMessage::kContainerRuntime:
        // The stream's own node: the message names none.
        st = controller_.OnContainerRuntime(node, msg.container_runtime());
        break;
      case berth::v1::AgentMessage::kTelemetry:
        // Best effort: its run ids are checked against the node there, not
        // as reports on a run (a stale id is dropped, not an intrusion).
        controller_.OnTelemetry(node, msg.telemetry());
        break;
      case berth::v1::AgentMessage::kOutputReply:
        controller_.OnOutputReply(node, std::move(*msg.mutable_output_reply()));
        break;
      case berth::v1::AgentMessage::kRenewCertificate:
        RenewCertificate(node, cert_issued_ms, msg.renew_certificate(), *session, *context);
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
