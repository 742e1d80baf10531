// Owning pointers for OpenSSL objects, and the last OpenSSL error as text:
// shared by berthd's CA (control/pki) and the agent's certificate renewal
// (agent/node_cert). Header-only; its users link OpenSSL themselves.
#pragma once

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <array>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace berth::ossl {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};

using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX_free>>;
using ReqPtr = std::unique_ptr<X509_REQ, Deleter<X509_REQ_free>>;

// The oldest queued OpenSSL error as text, and the queue cleared.
inline std::string LastError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  std::array<char, 256> buf{};
  ERR_error_string_n(code, buf.data(), buf.size());
  return buf.data();
}

// A failure naming what was attempted and OpenSSL's reason.
inline std::unexpected<Error> Failed(std::string_view what) {
  return Fail(Code::kInternal, std::string(what) + ": " + LastError());
}

// The bytes a memory BIO holds.
inline Result<std::string> BioText(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  if (len <= 0 || data == nullptr) return Failed("cannot encode PEM");
  return std::string(data, static_cast<std::size_t>(len));
}

// An ASN.1 time as unix milliseconds; 0 when it cannot be read.
inline std::int64_t AsnTimeMs(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

}  // namespace berth::ossl
