#include "agent/node_cert.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <array>
#include <ctime>
#include <memory>

#include "common/openssl_ptr.h"

namespace berth::agent {
namespace {

using ossl::AsnTimeMs;
using ossl::BioPtr;
using ossl::BioText;
using ossl::KeyPtr;
using ossl::ReqPtr;
using ossl::X509Ptr;

std::unexpected<Error> SslFail(std::string_view what) {
  return ossl::Failed(what);
}

Result<X509Ptr> ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    ERR_clear_error();
    return Fail(Code::kInvalidArgument, "not a PEM certificate");
  }
  return cert;
}

}  // namespace

Result<NodeKeyRequest> MakeNodeCsr(const std::string& node) {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return SslFail("cannot generate an ECDSA P-256 key");
  ReqPtr req(X509_REQ_new());
  if (!req || X509_REQ_set_version(req.get(), 0) != 1 ||
      X509_REQ_set_pubkey(req.get(), key.get()) != 1) {
    return SslFail("cannot create a certificate request");
  }
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): OpenSSL takes bytes
  const auto* bytes = reinterpret_cast<const unsigned char*>(node.c_str());
  if (X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(req.get()), "CN", MBSTRING_UTF8, bytes,
                                 -1, -1, 0) != 1 ||
      X509_REQ_sign(req.get(), key.get(), EVP_sha256()) == 0) {
    return SslFail("cannot sign the certificate request");
  }
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  BioPtr req_bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
          1 ||
      PEM_write_bio_X509_REQ(req_bio.get(), req.get()) != 1) {
    return SslFail("cannot encode PEM");
  }
  auto key_pem = BioText(key_bio.get());
  if (!key_pem) return std::unexpected(key_pem.error());
  auto csr_pem = BioText(req_bio.get());
  if (!csr_pem) return std::unexpected(csr_pem.error());
  return NodeKeyRequest{std::move(*key_pem), std::move(*csr_pem)};
}

Result<NodeCertInfo> ReadNodeCert(const std::string& cert_pem) {
  auto cert = ParseCert(cert_pem);
  if (!cert) return std::unexpected(cert.error());
  NodeCertInfo info;
  info.not_before_ms = AsnTimeMs(X509_get0_notBefore(cert->get()));
  info.not_after_ms = AsnTimeMs(X509_get0_notAfter(cert->get()));
  X509_NAME* name = X509_get_subject_name(cert->get());
  int index = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (index >= 0) {
    unsigned char* utf8 = nullptr;
    int len =
        ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index)));
    if (len >= 0) {
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): OpenSSL gives bytes
      info.common_name.assign(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(len));
      OPENSSL_free(utf8);
    }
  }
  return info;
}

Status CheckCertMatchesKey(const std::string& cert_pem, const std::string& key_pem) {
  auto cert = ParseCert(cert_pem);
  if (!cert) return std::unexpected(cert.error());
  BioPtr bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key || X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return Fail(Code::kInvalidArgument, "the certificate is not for this node's new key");
  }
  return Ok();
}

}  // namespace berth::agent
