// Berth's local certificate authority: the keys and certificates that put the
// REST API behind TLS and let agents prove which node they are (mutual TLS on
// the agent stream). OpenSSL does the cryptography; this file keeps the
// choices in one place: ECDSA P-256 keys, SHA-256 signatures, a CA valid for
// ten years, leaf certificates for five, and the node name as a client
// certificate's subject CN (which AgentService checks against Register).
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

// A client certificate for node `node`: subject CN = node, a URI SAN
// berth-node:<node>, and the clientAuth extended key usage.
Result<Credentials> IssueNodeCert(const Credentials& ca, const std::string& node,
                                  std::int64_t now_ms);

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
// signed by the data dir's CA.
Status WriteNodeCredentials(const std::filesystem::path& data_dir, const std::string& node,
                            const std::filesystem::path& out_dir, std::int64_t now_ms);

}  // namespace berth::server::pki
