#include "api/redact.h"

namespace berth::server {
namespace {

constexpr std::string_view kPrefix = "berth_";
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // …

bool IdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Secrets are URL-safe base64 or hex; '-' included, '_' too (a secret may
// contain one: everything after the id's closing underscore is secret).
bool SecretChar(char c) {
  return IdChar(c) || c == '-' || c == '_' || c == '+' || c == '/' || c == '=' || c == '.' ||
         c == '~' || c == '%';
}

}  // namespace

std::string RedactSecrets(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    auto at = text.find(kPrefix, i);
    if (at == std::string_view::npos) break;
    std::size_t id_end = at + kPrefix.size();
    while (id_end < text.size() && IdChar(text[id_end])) ++id_end;
    const bool token = id_end > at + kPrefix.size() && id_end < text.size() &&
                       text[id_end] == '_' && id_end + 1 < text.size() &&
                       SecretChar(text[id_end + 1]);
    if (!token) {
      out.append(text.substr(i, id_end - i));
      i = id_end;
      continue;
    }
    out.append(text.substr(i, id_end + 1 - i));
    out.append(kEllipsis);
    std::size_t secret_end = id_end + 1;
    while (secret_end < text.size() && SecretChar(text[secret_end])) ++secret_end;
    i = secret_end;
  }
  out.append(text.substr(i));
  return out;
}

std::string BearerTokenId(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (!authorization.starts_with(kBearer)) return {};
  auto token = authorization.substr(kBearer.size());
  if (!token.starts_with(kPrefix)) return {};
  token.remove_prefix(kPrefix.size());
  auto underscore = token.find('_');
  if (underscore == 0 || underscore == std::string_view::npos || underscore + 1 == token.size()) {
    return {};
  }
  auto id = token.substr(0, underscore);
  for (char c : id) {
    if (!IdChar(c)) return {};
  }
  // The same shape RedactSecrets cuts, so a key is never taken from a token
  // that would be logged in full.
  for (char c : token.substr(underscore + 1)) {
    if (!SecretChar(c)) return {};
  }
  return std::string(id);
}

}  // namespace berth::server
