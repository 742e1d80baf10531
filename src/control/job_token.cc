#include "control/job_token.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <array>
#include <charconv>
#include <fstream>
#include <sstream>

#include "control/pki.h"
#include "store/identity_store.h"

namespace berth::server {
namespace {

constexpr std::string_view kPrefix = "berth_j";
constexpr std::string_view kKeyFile = "job-token.key";
constexpr std::size_t kKeyBytes = 32;
constexpr std::size_t kMacHex = 64;

Error Unauthenticated(std::string message) {
  return Error{Code::kUnauthenticated, std::move(message), "Authorization"};
}

// Digits of a non-negative decimal number without a leading zero (so one
// run has exactly one spelling), read from the front of `s`.
template <typename T>
bool TakeNumber(std::string_view& s, T& out) {
  std::size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0 || n > 18 || (n > 1 && s[0] == '0')) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + n, out);
  if (ec != std::errc() || p != s.data() + n) return false;
  s.remove_prefix(n);
  return true;
}

bool TakeChar(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

}  // namespace

bool IsJobTokenShaped(std::string_view token) {
  return token.starts_with(kPrefix);
}

Result<JobTokenKey> JobTokenKey::LoadOrCreate(const std::filesystem::path& data_dir) {
  const auto path = data_dir / kKeyFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    auto key = store::RandomHex(kKeyBytes);
    if (!key) return std::unexpected(key.error());
    BERTH_RETURN_IF_ERROR(pki::WriteFileAtomic(path, *key + "\n", 0600));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Fail(Code::kUnavailable, fmt::format("cannot read {}", path.string()));
  }
  if ((st.st_mode & 077) != 0) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("{} is readable by others (mode {:o}); whoever reads it can act as "
                            "any running job: chmod 600 it, or delete it to revoke every job "
                            "token (docs/security.md)",
                            path.string(), st.st_mode & 0777));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string key = text.str();
  while (!key.empty() && (key.back() == '\n' || key.back() == ' ')) key.pop_back();
  if (key.size() != kKeyBytes * 2) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("{} does not hold a job token key ({} hex digits); delete it and "
                            "berthd makes a new one (running jobs' tokens stop working)",
                            path.string(), kKeyBytes * 2));
  }
  return JobTokenKey(std::move(key));
}

std::string JobTokenKey::Mac(std::string_view run_id, std::int64_t job_id) const {
  // The NULs keep "1.2.3" + 45 apart from "1.2.34" + 5.
  std::string message = "berth-job-token/v1";
  message.push_back('\0');
  message.append(run_id);
  message.push_back('\0');
  message.append(std::to_string(job_id));
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(), &len);
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kDigits[mac[i] >> 4]);
    out.push_back(kDigits[mac[i] & 0xf]);
  }
  return out;
}

std::string JobTokenKey::Issue(std::int64_t job_id, std::uint32_t replica,
                               std::uint32_t attempt) const {
  const std::string run_id = fmt::format("{}.{}.{}", job_id, replica, attempt);
  return fmt::format("{}{}r{}a{}_{}", kPrefix, job_id, replica, attempt, Mac(run_id, job_id));
}

Result<JobTokenClaim> JobTokenKey::Verify(std::string_view token) const {
  const auto malformed = [] {
    return std::unexpected(
        Unauthenticated("the bearer token is not a Berth job token (berth_j<job>r<replica>a<"
                        "attempt>_<secret>); use BERTH_JOB_TOKEN as the job was given it"));
  };
  if (!IsJobTokenShaped(token)) return malformed();
  std::string_view rest = token.substr(kPrefix.size());
  JobTokenClaim c;
  if (!TakeNumber(rest, c.job_id) || c.job_id <= 0 || !TakeChar(rest, 'r') ||
      !TakeNumber(rest, c.replica) || !TakeChar(rest, 'a') || !TakeNumber(rest, c.attempt) ||
      !TakeChar(rest, '_') || rest.size() != kMacHex) {
    return malformed();
  }
  c.token_id = fmt::format("j{}r{}a{}", c.job_id, c.replica, c.attempt);
  c.run_id = fmt::format("{}.{}.{}", c.job_id, c.replica, c.attempt);
  const std::string want = Mac(c.run_id, c.job_id);
  if (CRYPTO_memcmp(want.data(), rest.data(), kMacHex) != 0) {
    return std::unexpected(Unauthenticated(
        fmt::format("job token {} is not valid (a job token is made by this berthd for one "
                    "run; use BERTH_JOB_TOKEN as the job was given it)",
                    c.token_id)));
  }
  return c;
}

}  // namespace berth::server
