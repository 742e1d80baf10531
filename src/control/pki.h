// Berth's local certificate authority: the keys and certificates that put the
// REST API behind TLS and let agents prove which node they are (mutual TLS on
// the agent stream). OpenSSL does the cryptography; this file keeps the
// choices in one place: ECDSA P-256 keys, SHA-256 signatures, a CA valid for
// ten years, server certificates for five, node certificates for berthd
// --node-cert-ttl (7 days by default; agents renew them over their stream),
// and the node name as a client certificate's subject CN (which AgentService
// checks against Register).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace berth::server::pki {

// A certificate and its private key, both PEM.
struct Credentials {
  std::string cert_pem;
  std::string key_pem;
};

// The files of a data dir's TLS state, all under <data-dir>/tls.
struct TlsFiles {
  std::filesystem::path dir;
  std::filesystem::path ca_cert;      // ca.pem: what clients and agents trust
  std::filesystem::path ca_key;       // ca-key.pem (0600): signs server and node certs
  std::filesystem::path server_cert;  // server.pem
  std::filesystem::path server_key;   // server-key.pem (0600)
};
TlsFiles FilesIn(const std::filesystem::path& data_dir);

// A self-signed CA certificate named `name`, valid from `now_ms` for 10 years.
Result<Credentials> CreateCa(const std::string& name, std::int64_t now_ms);

// A server certificate signed by `ca`. Its SANs are localhost, 127.0.0.1,
// ::1, this host's name and every entry of `extra_names` (an IP address
// literal becomes an IP SAN, anything else a DNS SAN).
Result<Credentials> IssueServerCert(const Credentials& ca,
                                    const std::vector<std::string>& extra_names,
                                    std::int64_t now_ms);

// How long node certificates live: berthd --node-cert-ttl, default and
// bounds. Short lives are what makes a stolen node key expire on its own;
// the lower bound leaves an agent time to renew (at 2/3 of the lifetime).
inline constexpr std::int64_t kDefaultNodeCertTtlMs = std::int64_t{7} * 24 * 3600 * 1000;
inline constexpr std::int64_t kMinNodeCertTtlMs = 10'000;
inline constexpr std::int64_t kMaxNodeCertTtlMs = std::int64_t{366} * 24 * 3600 * 1000;

// A client certificate for node `node`: subject CN = node, a URI SAN
// berth-node:<node>, and the clientAuth extended key usage, valid from
// `now_ms` (not backdated: only berthd, whose clock issued it, verifies it;
// its notBefore is its issue time, which the revocation rule reads) for
// `ttl_ms`.
Result<Credentials> IssueNodeCert(const Credentials& ca, const std::string& node,
                                  std::int64_t now_ms, std::int64_t ttl_ms = kDefaultNodeCertTtlMs);

// Signs a node's certificate signing request (PEM) for the node `node` the
// caller authenticated: PermissionDenied unless the CSR's subject CN is
// `node`; InvalidArgument when it is not a CSR or its signature does not
// verify (the requester does not hold the key). The certificate carries the
// CSR's public key, and otherwise what IssueNodeCert puts in one.
Result<std::string> SignNodeCsr(const Credentials& ca, const std::string& csr_pem,
                                const std::string& node, std::int64_t now_ms, std::int64_t ttl_ms);

// A certificate's validity window, unix ms (second precision). Whether a
// node's removal revoked it is model::NodeCertRevoked of its notBefore.
struct Validity {
  std::int64_t not_before_ms = 0;
  std::int64_t not_after_ms = 0;
};
Result<Validity> ValidityOf(const std::string& cert_pem);

// Whether `cert_pem` chains to `ca_cert_pem` and is valid at `now_ms`.
Status VerifyCert(const std::string& ca_cert_pem, const std::string& cert_pem, std::int64_t now_ms);

// The subject common name of a PEM certificate.
Result<std::string> CommonName(const std::string& cert_pem);

// Reads a certificate and its key from files and checks that they belong
// together. `cert_flag`/`key_flag` name the flags in error messages.
Result<Credentials> LoadCredentials(const std::filesystem::path& cert,
                                    const std::filesystem::path& key,
                                    const std::string& cert_flag = "--tls-cert",
                                    const std::string& key_flag = "--tls-key");

// Replaces `path` with `content` atomically (temp file, fsync, rename) with
// file mode `mode`: 0600 for keys, 0644 for certificates.
Status WriteFileAtomic(const std::filesystem::path& path, const std::string& content,
                       unsigned mode);

// The data dir's CA, created (ca.pem, ca-key.pem) when it does not exist yet.
Result<Credentials> EnsureCa(const std::filesystem::path& data_dir, std::int64_t now_ms);

// The data dir's CA; an error saying how to create one when it is missing.
Result<Credentials> LoadCa(const std::filesystem::path& data_dir);

// The data dir's server certificate, issued by its CA when missing.
Result<Credentials> EnsureServerCert(const std::filesystem::path& data_dir,
                                     const std::vector<std::string>& extra_names,
                                     std::int64_t now_ms);

// Writes DIR/ca.pem, DIR/NODE.pem and DIR/NODE-key.pem (0600) for `node`,
// signed by the data dir's CA, valid for `ttl_ms`.
Status WriteNodeCredentials(const std::filesystem::path& data_dir, const std::string& node,
                            const std::filesystem::path& out_dir, std::int64_t now_ms,
                            std::int64_t ttl_ms = kDefaultNodeCertTtlMs);

}  // namespace berth::server::pki
