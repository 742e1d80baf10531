#include "control/pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/openssl_ptr.h"

namespace berth::server::pki {
namespace {

namespace fs = std::filesystem;

constexpr long kCaDays = 3650;    // the CA outlives every certificate it signs
constexpr long kLeafDays = 1825;  // servers: five years
// notBefore lies a little in the past, so a peer whose clock is slightly
// behind still accepts a certificate issued a moment ago.
constexpr long kBackdateSeconds = 300;

using ossl::AsnTimeMs;
using ossl::BioPtr;
using ossl::BioText;
using ossl::BnPtr;
using ossl::ExtPtr;
using ossl::KeyPtr;
using ossl::ReqPtr;
using ossl::StoreCtxPtr;
using ossl::StorePtr;
using ossl::X509Ptr;

std::unexpected<Error> SslFail(std::string_view what) {
  return ossl::Failed(what);
}

std::string ErrnoText(int err) {
  std::array<char, 128> buf{};
  return strerror_r(err, buf.data(), buf.size());
}

Result<X509Ptr> ParseCert(const std::string& pem, std::string_view what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    ERR_clear_error();
    return Fail(Code::kInvalidArgument, fmt::format("{} is not a PEM certificate", what));
  }
  return cert;
}

Result<KeyPtr> ParseKey(const std::string& pem, std::string_view what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    ERR_clear_error();
    return Fail(Code::kInvalidArgument,
                fmt::format("{} is not an unencrypted PEM private key", what));
  }
  return key;
}

Result<Credentials> ToPem(X509* cert, EVP_PKEY* key) {
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(cert_bio.get(), cert) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return SslFail("cannot encode PEM");
  }
  auto cert_pem = BioText(cert_bio.get());
  if (!cert_pem) return std::unexpected(cert_pem.error());
  auto key_pem = BioText(key_bio.get());
  if (!key_pem) return std::unexpected(key_pem.error());
  return Credentials{std::move(*cert_pem), std::move(*key_pem)};
}

// A P-256 key: small, fast, and accepted by every TLS stack Berth meets.
Result<KeyPtr> NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return SslFail("cannot generate an ECDSA P-256 key");
  return key;
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return SslFail(fmt::format("cannot add extension {}={}", OBJ_nid2sn(nid), value));
  }
  return Ok();
}

// A certificate for `key` named `cn`, before its extensions and signature:
// valid from `backdate_s` before `now_ms` for `life_s`.
Result<X509Ptr> NewCert(EVP_PKEY* key, const std::string& cn, long backdate_s, long life_s,
                        std::int64_t now_ms) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return SslFail("cannot create certificate");
  // A random 127-bit serial: unique without keeping a counter.
  BnPtr serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return SslFail("cannot pick a serial number");
  }
  time_t now = static_cast<time_t>(now_ms / 1000);
  if (X509_time_adj_ex(X509_getm_notBefore(cert.get()), 0, -backdate_s, &now) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), static_cast<int>(life_s / 86400),
                       life_s % 86400, &now) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return SslFail("cannot set validity or public key");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): OpenSSL takes bytes
  const auto* bytes = reinterpret_cast<const unsigned char*>(cn.c_str());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, bytes, -1, -1, 0) != 1) {
    return SslFail(fmt::format("cannot set the subject CN '{}'", cn));
  }
  return cert;
}

using Extensions = std::vector<std::pair<int, std::string>>;

// The lifetime of a leaf: its backdate and length, seconds.
struct Life {
  long backdate_s = kBackdateSeconds;
  long life_s = kLeafDays * 86400;
};

// A leaf certificate for `key` named `cn`, signed with `ca`; `extensions`
// are (nid, value) pairs in OpenSSL's config syntax.
Result<X509Ptr> SignLeaf(const Credentials& ca, EVP_PKEY* key, const std::string& cn,
                         const Extensions& extensions, Life life, std::int64_t now_ms) {
  auto ca_cert = ParseCert(ca.cert_pem, "the CA certificate");
  if (!ca_cert) return std::unexpected(ca_cert.error());
  auto ca_key = ParseKey(ca.key_pem, "the CA key");
  if (!ca_key) return std::unexpected(ca_key.error());
  if (X509_check_private_key(ca_cert->get(), ca_key->get()) != 1) {
    ERR_clear_error();
    return Fail(Code::kInvalidArgument, "the CA key does not belong to the CA certificate");
  }
  auto cert = NewCert(key, cn, life.backdate_s, life.life_s, now_ms);
  if (!cert) return std::unexpected(cert.error());
  if (X509_set_issuer_name(cert->get(), X509_get_subject_name(ca_cert->get())) != 1) {
    return SslFail("cannot set the issuer");
  }
  BERTH_RETURN_IF_ERROR(
      AddExtension(cert->get(), ca_cert->get(), NID_basic_constraints, "critical,CA:FALSE"));
  BERTH_RETURN_IF_ERROR(AddExtension(cert->get(), ca_cert->get(), NID_key_usage,
                                     "critical,digitalSignature,keyEncipherment"));
  BERTH_RETURN_IF_ERROR(
      AddExtension(cert->get(), ca_cert->get(), NID_subject_key_identifier, "hash"));
  BERTH_RETURN_IF_ERROR(
      AddExtension(cert->get(), ca_cert->get(), NID_authority_key_identifier, "keyid:always"));
  for (const auto& [nid, value] : extensions) {
    BERTH_RETURN_IF_ERROR(AddExtension(cert->get(), ca_cert->get(), nid, value));
  }
  if (X509_sign(cert->get(), ca_key->get(), EVP_sha256()) == 0) return SslFail("cannot sign");
  return cert;
}

// SignLeaf for a fresh key; the certificate and the key.
Result<Credentials> IssueLeaf(const Credentials& ca, const std::string& cn,
                              const Extensions& extensions, std::int64_t now_ms, Life life = {}) {
  auto key = NewKey();
  if (!key) return std::unexpected(key.error());
  auto cert = SignLeaf(ca, key->get(), cn, extensions, life, now_ms);
  if (!cert) return std::unexpected(cert.error());
  return ToPem(cert->get(), key->get());
}

Extensions NodeExtensions(const std::string& node) {
  return {{NID_subject_alt_name, "URI:berth-node:" + node}, {NID_ext_key_usage, "clientAuth"}};
}

Life NodeLife(std::int64_t ttl_ms) {
  return {0, static_cast<long>(ttl_ms / 1000)};
}

Status CheckNodeTtl(std::int64_t ttl_ms) {
  if (ttl_ms < kMinNodeCertTtlMs || ttl_ms > kMaxNodeCertTtlMs) {
    return InvalidField(
        "--node-cert-ttl",
        fmt::format("a node certificate lives between 10s and 366d, not {} ms", ttl_ms));
  }
  return Ok();
}

bool IsIpLiteral(const std::string& name) {
  std::array<unsigned char, 16> buf{};
  return inet_pton(AF_INET, name.c_str(), buf.data()) == 1 ||
         inet_pton(AF_INET6, name.c_str(), buf.data()) == 1;
}

// Names that can sit in a SAN list without breaking OpenSSL's "a,b" syntax.
bool IsPlainName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' || c == ':';
    if (!ok) return false;
  }
  return true;
}

std::string SanEntry(const std::string& name) {
  return (IsIpLiteral(name) ? "IP:" : "DNS:") + name;
}

Result<std::string> ReadText(const fs::path& path, std::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Fail(Code::kInvalidArgument,
                fmt::format("{} {}: cannot read it: {}", flag, path.string(), ErrnoText(errno)),
                std::string(flag));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

Status EnsurePrivateDir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Fail(Code::kInternal, fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  }
  // Only the owner lists the directory that holds the CA key.
  if (::chmod(dir.c_str(), 0700) != 0) {
    return Fail(Code::kInternal,
                fmt::format("cannot chmod 0700 {}: {}", dir.string(), ErrnoText(errno)));
  }
  return Ok();
}

}  // namespace

TlsFiles FilesIn(const fs::path& data_dir) {
  fs::path dir = data_dir / "tls";
  return {dir, dir / "ca.pem", dir / "ca-key.pem", dir / "server.pem", dir / "server-key.pem"};
}

Result<Credentials> CreateCa(const std::string& name, std::int64_t now_ms) {
  auto key = NewKey();
  if (!key) return std::unexpected(key.error());
  auto cert = NewCert(key->get(), name, kBackdateSeconds, kCaDays * 86400, now_ms);
  if (!cert) return std::unexpected(cert.error());
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(c)) != 1) return SslFail("cannot set issuer");
  BERTH_RETURN_IF_ERROR(AddExtension(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  BERTH_RETURN_IF_ERROR(AddExtension(c, c, NID_key_usage, "critical,keyCertSign,cRLSign"));
  BERTH_RETURN_IF_ERROR(AddExtension(c, c, NID_subject_key_identifier, "hash"));
  if (X509_sign(c, key->get(), EVP_sha256()) == 0) return SslFail("cannot self-sign the CA");
  return ToPem(c, key->get());
}

Result<Credentials> IssueServerCert(const Credentials& ca,
                                    const std::vector<std::string>& extra_names,
                                    std::int64_t now_ms) {
  std::vector<std::string> names{"localhost", "127.0.0.1", "::1"};
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) == 0 && IsPlainName(host.data())) {
    names.emplace_back(host.data());
  }
  for (const auto& name : extra_names) {
    if (!IsPlainName(name)) {
      return InvalidField("--tls-san",
                          fmt::format("'{}' is neither a host name nor an IP address", name));
    }
    names.push_back(name);
  }
  std::string san;
  for (const auto& name : names) {
    if (!san.empty()) san += ',';
    san += SanEntry(name);
  }
  return IssueLeaf(ca, "berthd", {{NID_subject_alt_name, san}, {NID_ext_key_usage, "serverAuth"}},
                   now_ms);
}

Result<Credentials> IssueNodeCert(const Credentials& ca, const std::string& node,
                                  std::int64_t now_ms, std::int64_t ttl_ms) {
  if (!IsPlainName(node) || node.find(':') != std::string::npos) {
    return InvalidField("NODE", fmt::format("node name '{}' must be letters, digits, '.', '-' or "
                                            "'_' (as berth-agent reports it, e.g. gpu-07)",
                                            node));
  }
  BERTH_RETURN_IF_ERROR(CheckNodeTtl(ttl_ms));
  return IssueLeaf(ca, node, NodeExtensions(node), now_ms, NodeLife(ttl_ms));
}

Result<std::string> SignNodeCsr(const Credentials& ca, const std::string& csr_pem,
                                const std::string& node, std::int64_t now_ms, std::int64_t ttl_ms) {
  BERTH_RETURN_IF_ERROR(CheckNodeTtl(ttl_ms));
  BioPtr bio(BIO_new_mem_buf(csr_pem.data(), static_cast<int>(csr_pem.size())));
  ReqPtr req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (!req) {
    ERR_clear_error();
    return Fail(Code::kInvalidArgument, "the renewal request is not a PEM certificate request");
  }
  KeyPtr key(X509_REQ_get_pubkey(req.get()));
  if (!key || X509_REQ_verify(req.get(), key.get()) != 1) {
    ERR_clear_error();
    return Fail(Code::kInvalidArgument,
                "the renewal request's signature does not verify with its own public key");
  }
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  int index = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  std::string cn;
  if (index >= 0) {
    unsigned char* utf8 = nullptr;
    int len =
        ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index)));
    if (len >= 0) {
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): OpenSSL gives bytes
      cn.assign(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(len));
      OPENSSL_free(utf8);
    }
  }
  if (cn != node) {
    return Fail(Code::kPermissionDenied,
                fmt::format("a stream authenticated as node '{}' cannot get a certificate for "
                            "'{}'",
                            node, cn));
  }
  auto cert = SignLeaf(ca, key.get(), node, NodeExtensions(node), NodeLife(ttl_ms), now_ms);
  if (!cert) return std::unexpected(cert.error());
  BioPtr out(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(out.get(), cert->get()) != 1) return SslFail("cannot encode PEM");
  return BioText(out.get());
}

Result<Validity> ValidityOf(const std::string& cert_pem) {
  auto cert = ParseCert(cert_pem, "the certificate");
  if (!cert) return std::unexpected(cert.error());
  return Validity{AsnTimeMs(X509_get0_notBefore(cert->get())),
                  AsnTimeMs(X509_get0_notAfter(cert->get()))};
}

Status VerifyCert(const std::string& ca_cert_pem, const std::string& cert_pem,
                  std::int64_t now_ms) {
  auto ca = ParseCert(ca_cert_pem, "the CA certificate");
  if (!ca) return std::unexpected(ca.error());
  auto cert = ParseCert(cert_pem, "the certificate");
  if (!cert) return std::unexpected(cert.error());
  StorePtr store(X509_STORE_new());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca->get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert->get(), nullptr) != 1) {
    return SslFail("cannot set up verification");
  }
  X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx.get()),
                             static_cast<time_t>(now_ms / 1000));
  if (X509_verify_cert(ctx.get()) != 1) {
    int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return Fail(Code::kFailedPrecondition,
                fmt::format("the certificate does not verify against the CA: {}",
                            X509_verify_cert_error_string(err)));
  }
  return Ok();
}

Result<std::string> CommonName(const std::string& cert_pem) {
  auto cert = ParseCert(cert_pem, "the certificate");
  if (!cert) return std::unexpected(cert.error());
  X509_NAME* name = X509_get_subject_name(cert->get());
  int index = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (index < 0) return Fail(Code::kInvalidArgument, "the certificate has no subject CN");
  unsigned char* utf8 = nullptr;
  int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index)));
  if (len < 0) return SslFail("cannot read the subject CN");
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): OpenSSL gives bytes
  std::string cn(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(len));
  OPENSSL_free(utf8);
  return cn;
}

Result<Credentials> LoadCredentials(const fs::path& cert, const fs::path& key,
                                    const std::string& cert_flag, const std::string& key_flag) {
  auto cert_pem = ReadText(cert, cert_flag);
  if (!cert_pem) return std::unexpected(cert_pem.error());
  auto key_pem = ReadText(key, key_flag);
  if (!key_pem) return std::unexpected(key_pem.error());
  auto x = ParseCert(*cert_pem, fmt::format("{} {}", cert_flag, cert.string()));
  if (!x) return std::unexpected(x.error());
  auto k = ParseKey(*key_pem, fmt::format("{} {}", key_flag, key.string()));
  if (!k) return std::unexpected(k.error());
  if (X509_check_private_key(x->get(), k->get()) != 1) {
    ERR_clear_error();
    return InvalidField(key_flag, fmt::format("{} {} is not the key of {} {}", key_flag,
                                              key.string(), cert_flag, cert.string()));
  }
  return Credentials{std::move(*cert_pem), std::move(*key_pem)};
}

Status WriteFileAtomic(const fs::path& path, const std::string& content, unsigned mode) {
  std::string tmp = path.string() + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmp.data());  // created 0600: a key is never readable by others
  if (fd < 0) {
    return Fail(Code::kInternal,
                fmt::format("cannot create {}: {}", path.string(), ErrnoText(errno)));
  }
  auto fail = [&](std::string_view step) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Fail(Code::kInternal,
                fmt::format("cannot {} {}: {}", step, path.string(), ErrnoText(err)));
  };
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) return fail("chmod");
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync");
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Fail(Code::kInternal,
                fmt::format("cannot rename into {}: {}", path.string(), ErrnoText(err)));
  }
  fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Ok();
}

Result<Credentials> LoadCa(const fs::path& data_dir) {
  TlsFiles files = FilesIn(data_dir);
  std::error_code ec;
  if (!fs::exists(files.ca_key, ec)) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("no CA key at {}: start berthd once with --data-dir {} to create the "
                            "data dir's CA, or issue node certificates with your own CA",
                            files.ca_key.string(), data_dir.string()));
  }
  return LoadCredentials(files.ca_cert, files.ca_key, "CA certificate", "CA key");
}

Result<Credentials> EnsureCa(const fs::path& data_dir, std::int64_t now_ms) {
  TlsFiles files = FilesIn(data_dir);
  std::error_code ec;
  bool has_cert = fs::exists(files.ca_cert, ec);
  bool has_key = fs::exists(files.ca_key, ec);
  if (has_cert && has_key) return LoadCa(data_dir);
  if (has_cert != has_key) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("{} exists without {}: restore the missing file, or remove both to "
                            "create a new CA (every node certificate must then be reissued)",
                            (has_cert ? files.ca_cert : files.ca_key).string(),
                            (has_cert ? files.ca_key : files.ca_cert).string()));
  }
  BERTH_RETURN_IF_ERROR(EnsurePrivateDir(files.dir));
  std::array<char, 256> host{};
  std::string name = "Berth CA";
  if (::gethostname(host.data(), host.size() - 1) == 0 && host[0] != '\0') {
    name = fmt::format("Berth CA ({})", host.data());
  }
  auto ca = CreateCa(name, now_ms);
  if (!ca) return std::unexpected(ca.error());
  // The key first: a crash in between leaves a key without a certificate,
  // which the next start reports rather than silently replacing.
  BERTH_RETURN_IF_ERROR(WriteFileAtomic(files.ca_key, ca->key_pem, 0600));
  BERTH_RETURN_IF_ERROR(WriteFileAtomic(files.ca_cert, ca->cert_pem, 0644));
  return ca;
}

Result<Credentials> EnsureServerCert(const fs::path& data_dir,
                                     const std::vector<std::string>& extra_names,
                                     std::int64_t now_ms) {
  TlsFiles files = FilesIn(data_dir);
  std::error_code ec;
  if (fs::exists(files.server_cert, ec) && fs::exists(files.server_key, ec)) {
    auto existing =
        LoadCredentials(files.server_cert, files.server_key, "server certificate", "server key");
    if (!existing) return existing;
    // Reissue when a name the operator asks for is missing from the old one.
    auto cert = ParseCert(existing->cert_pem, "the server certificate");
    if (!cert) return std::unexpected(cert.error());
    bool covers = true;
    for (const auto& name : extra_names) {
      int match = IsIpLiteral(name) ? X509_check_ip_asc(cert->get(), name.c_str(), 0)
                                    : X509_check_host(cert->get(), name.c_str(), 0, 0, nullptr);
      covers = covers && match == 1;
    }
    if (covers) return existing;
  }
  auto ca = EnsureCa(data_dir, now_ms);
  if (!ca) return std::unexpected(ca.error());
  auto server = IssueServerCert(*ca, extra_names, now_ms);
  if (!server) return server;
  BERTH_RETURN_IF_ERROR(WriteFileAtomic(files.server_key, server->key_pem, 0600));
  BERTH_RETURN_IF_ERROR(WriteFileAtomic(files.server_cert, server->cert_pem, 0644));
  return server;
}

Status WriteNodeCredentials(const fs::path& data_dir, const std::string& node,
                            const fs::path& out_dir, std::int64_t now_ms, std::int64_t ttl_ms) {
  auto ca = LoadCa(data_dir);
  if (!ca) return std::unexpected(ca.error());
  auto creds = IssueNodeCert(*ca, node, now_ms, ttl_ms);
  if (!creds) return std::unexpected(creds.error());
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) {
    return InvalidField("--out",
                        fmt::format("cannot create {}: {}", out_dir.string(), ec.message()));
  }
  BERTH_RETURN_IF_ERROR(WriteFileAtomic(out_dir / (node + "-key.pem"), creds->key_pem, 0600));
  BERTH_RETURN_IF_ERROR(WriteFileAtomic(out_dir / (node + ".pem"), creds->cert_pem, 0644));
  return WriteFileAtomic(out_dir / "ca.pem", ca->cert_pem, 0644);
}

}  // namespace berth::server::pki
