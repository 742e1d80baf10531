// The agent's side of node certificate rotation (docs/operations.md, "TLS
// and node credentials"): a fresh key and a certificate signing request for
// it, made on the node (the key never leaves it), when the current
// certificate is due for renewal, and checks on what berthd signs back.
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace berth::agent {

// A new private key (ECDSA P-256, PEM) and a CSR for it with subject CN
// `node`, signed by the key.
struct NodeKeyRequest {
  std::string key_pem;
  std::string csr_pem;
};
[[nodiscard]] Result<NodeKeyRequest> MakeNodeCsr(const std::string& node);

// What the agent reads of its certificate.
struct NodeCertInfo {
  TimeMs not_before_ms = 0;
  TimeMs not_after_ms = 0;
  std::string common_name;
};
[[nodiscard]] Result<NodeCertInfo> ReadNodeCert(const std::string& cert_pem);

// Ok when `cert_pem` certifies the public half of `key_pem`.
[[nodiscard]] Status CheckCertMatchesKey(const std::string& cert_pem, const std::string& key_pem);

// When a certificate is renewed: once `fraction` (numerator/denominator) of
// its lifetime has passed; 2/3 leaves a third of it for retries.
inline TimeMs RenewAtMs(const NodeCertInfo& cert, std::int64_t numerator = 2,
                        std::int64_t denominator = 3) {
  return cert.not_before_ms + (cert.not_after_ms - cert.not_before_ms) * numerator / denominator;
}

}  // namespace berth::agent
