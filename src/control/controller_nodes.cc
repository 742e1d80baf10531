// The controller's side of node membership: removing a node (which revokes
// its certificates) and renewing a node's certificate over its stream
// (docs/operations.md, "TLS and node credentials").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "common/units.h"
#include "control/controller.h"
#include "model/node.h"

namespace berth::server {

Status Controller::RemoveNode(const std::string& node, const std::string& by,
                              const store::AuditOf<>& audit) {
  std::lock_guard membership(membership_mu_);
  // No pass may place work there between the check for active runs (in the
  // removal's transaction) and the removal.
  std::lock_guard pass(pass_mu_);
  const TimeMs now = clock_.NowMs();
  BERTH_RETURN_IF_ERROR(store_.RemoveNode(node, by, now, audit));
  store::Publish(store_.change_feed(), store::Topic::kNode, node, {}, {}, "removed");
  std::shared_ptr<AgentSession> session;
  {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(node); it != live_.end()) {
      session = std::move(it->second.session);
      live_.erase(it);
    }
  }
  spdlog::info("node {} removed by {}; its certificates issued until {} are revoked", node, by,
               FormatTimeMs(now));
  if (session) {
    session->Disconnect(fmt::format(
        "node '{}' was removed by {}: its certificates are revoked; `berthd cert node {}` issues "
        "a new one to add it back",
        node, by, node));
  }
  Wake();
  return Ok();
}

Status Controller::CheckNodeCert(const std::string& node, TimeMs not_before_ms) {
  auto revoked = store_.NodeRevokedAt(node);
  if (!revoked) return std::unexpected(revoked.error());
  if (*revoked && model::NodeCertRevoked(not_before_ms, **revoked)) {
    return Fail(Code::kPermissionDenied,
                fmt::format("the certificate of node '{}' (issued {}) is revoked: the node was "
                            "removed at {}. Issue a new one with `berthd cert node {}` and restart "
                            "the agent with it to add the node back",
                            node, FormatTimeMs(not_before_ms), FormatTimeMs(**revoked), node));
  }
  return Ok();
}

Result<std::string> Controller::RenewNodeCert(const std::string& node,
                                              TimeMs presented_not_before_ms,
                                              const std::string& csr_pem, const std::string& peer) {
  if (!signer_) {
    return Fail(Code::kFailedPrecondition,
                "berthd does not hold the key of the CA agents' certificates chain to "
                "(--tls-client-ca): renew node certificates with that CA");
  }
  const TimeMs now = clock_.NowMs();
  auto cert = pki::SignNodeCsr(signer_->ca, csr_pem, node, now, signer_->ttl_ms);
  if (!cert) return std::unexpected(cert.error());
  auto validity = pki::ValidityOf(*cert);
  if (!validity) return std::unexpected(validity.error());
  const TimeMs expires = validity->not_after_ms;
  store::AuditOf<> audit = [&]() -> std::optional<store::AuditEntry> {
    store::AuditEntry e;
    e.time_ms = now;
    e.actor = "node/" + node;
    e.action = "node.cert.renew";
    e.object = "node/" + node;
    e.before = nlohmann::json{{"issued", FormatTimeMs(presented_not_before_ms)}}.dump();
    e.after = nlohmann::json{{"expires", FormatTimeMs(expires)}}.dump();
    e.source = peer;
    e.outcome = "ok";
    return e;
  };
  // The signed certificate leaves only once its record is committed, and
  // only if the node was not removed meanwhile (checked in that transaction).
  BERTH_RETURN_IF_ERROR(
      store_.RecordNodeCertRenewal(node, presented_not_before_ms, expires, now, audit));
  spdlog::info("node {}: certificate renewed, valid until {}", node, FormatTimeMs(expires));
  return cert;
}

}  // namespace berth::server
