#include "cli/api_client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>

#include "cli/api_error.h"
#include "cli/connect_probe.h"
#include "cli/version.h"

namespace berth::cli {
namespace {

using nlohmann::json;

constexpr auto kConnectTimeout = std::chrono::seconds(5);
// Ordinary requests answer from berthd's memory and store; 30 s only trips on
// a hung server. Follow streams use kStreamTimeout instead.
constexpr auto kRequestTimeout = std::chrono::seconds(30);
constexpr auto kStreamTimeout = std::chrono::hours(24 * 365);
// An error answer is one JSON object; do not buffer a runaway body.
constexpr std::size_t kMaxErrorBody = std::size_t{64} * 1024;

constexpr std::string_view kServerHint = "is berthd running? set --server or BERTH_SERVER";

Error UrlError(std::string_view text, std::string_view why) {
  return Error{Code::kInvalidArgument, fmt::format("invalid server URL '{}': {}", text, why), ""};
}

bool IsSuccess(int status) {
  return status >= 200 && status < 300;
}

httplib::Headers RequestHeaders(std::string_view accept, const std::string& token) {
  httplib::Headers headers{{"Accept", std::string(accept)},
                           {"User-Agent", fmt::format("berth/{}", Version())}};
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  return headers;
}

Error TransportError(const ServerUrl& url, const std::string& ca, httplib::Error err) {
  if (err == httplib::Error::SSLServerVerification) {
    return Error{Code::kUnavailable,
                 fmt::format("the certificate of berthd at {} does not verify against {}: pass "
                             "--ca <data-dir>/tls/ca.pem (or set BERTH_CA) to trust berthd's CA",
                             url.text, ca.empty() ? "the system trust store" : ca),
                 ""};
  }
  if (err == httplib::Error::SSLLoadingCerts) {
    return Error{Code::kInvalidArgument,
                 fmt::format("cannot load the CA file '{}' (--ca or BERTH_CA): it must be a PEM "
                             "certificate such as <data-dir>/tls/ca.pem",
                             ca),
                 ""};
  }
  if (err == httplib::Error::SSLConnection) {
    return Error{Code::kUnavailable,
                 fmt::format("TLS handshake with berthd at {} failed (does it serve plain HTTP? "
                             "then use http://)",
                             url.text),
                 ""};
  }
  if (url.scheme == "http" && (err == httplib::Error::Read || err == httplib::Error::Write)) {
    return Error{Code::kUnavailable,
                 fmt::format("berthd at {} closed the connection: berthd serves HTTPS unless "
                             "started with --plain-http; use https:// and --ca "
                             "<data-dir>/tls/ca.pem",
                             url.text),
                 ""};
  }
  if (err == httplib::Error::Connection) {
    // httplib keeps the operating system's reason to itself; ask again.
    std::string why = ProbeConnectFailure(url.host, url.port).value_or(httplib::to_string(err));
    return Error{Code::kUnavailable,
                 fmt::format("cannot reach berthd at {}: {} ({})", url.text, why, kServerHint), ""};
  }
  if (err == httplib::Error::ConnectionTimeout) {
    return Error{
        Code::kUnavailable,
        fmt::format("cannot reach berthd at {}: Connection timed out ({})", url.text, kServerHint),
        ""};
  }
  return Error{Code::kUnavailable,
               fmt::format("request to berthd at {} failed: {}", url.text, httplib::to_string(err)),
               ""};
}

Result<json> DecodeJson(int status, const std::string& body) {
  if (!IsSuccess(status)) return std::unexpected(ParseApiError(status, body));
  auto doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return Fail(Code::kInternal,
                fmt::format("berthd answered HTTP {} with a body that is not JSON", status));
  }
  return doc;
}

}  // namespace

Result<ServerUrl> ParseServerUrl(std::string_view text) {
  ServerUrl url;
  url.text = std::string(text);
  std::string_view rest = text;
  if (auto sep = rest.find("://"); sep != std::string_view::npos) {
    url.scheme = std::string(rest.substr(0, sep));
    std::transform(url.scheme.begin(), url.scheme.end(), url.scheme.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    rest.remove_prefix(sep + 3);
  } else {
    url.scheme = "http";
  }
  if (url.scheme != "http" && url.scheme != "https") {
    return std::unexpected(UrlError(text, "the scheme must be http or https"));
  }
  std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  while (path.ends_with('/')) path.remove_suffix(1);
  url.base_path = std::string(path);

  std::string_view port_text;
  if (authority.starts_with('[')) {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::unexpected(UrlError(text, "unclosed '['"));
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) {
      return std::unexpected(UrlError(text, "expected ':' after ']'"));
    }
    port_text = after.empty() ? "" : after.substr(1);
  } else {
    std::size_t colon = authority.find(':');
    if (colon != std::string_view::npos &&
        authority.find(':', colon + 1) != std::string_view::npos) {
      return std::unexpected(UrlError(text, "write an IPv6 address as [addr]:port"));
    }
    url.host = std::string(authority.substr(0, colon));
    port_text = colon == std::string_view::npos ? "" : authority.substr(colon + 1);
  }
  if (url.host.empty()) return std::unexpected(UrlError(text, "no host"));
  if (port_text.empty()) {
    url.port = url.scheme == "https" ? 443 : kDefaultPort;
  } else {
    auto [ptr, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), url.port);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || url.port < 1 ||
        url.port > 65535) {
      return std::unexpected(UrlError(text, "the port must be a number from 1 to 65535"));
    }
  }
  return url;
}

Result<nlohmann::json> GetAllPages(ApiClient& api, const std::string& path,
                                   std::vector<std::pair<std::string, std::string>> params,
                                   const std::string& key, std::uint64_t limit, PageOrder order) {
  std::vector<nlohmann::json> pages;
  std::uint64_t got = 0;
  std::string after;
  params.emplace_back("limit", "");
  params.emplace_back("after", "");
  for (;;) {
    params[params.size() - 2].second =
        limit == 0 ? std::string() : std::to_string(std::min(kCliPageRows, limit - got));
    params.back().second = after;
    auto page = api.Get(path + QueryString(params));
    if (!page) return std::unexpected(page.error());
    nlohmann::json rows = page->value(key, nlohmann::json::array());
    got += rows.size();
    pages.push_back(std::move(rows));
    if (limit > 0 && got >= limit) break;
    auto next = page->find("next");
    if (next == page->end() || !next->is_string()) break;
    after = next->get<std::string>();
  }
  if (order == PageOrder::kPrepend) std::reverse(pages.begin(), pages.end());
  nlohmann::json all = nlohmann::json::array();
  for (auto& rows : pages) {
    for (auto& r : rows) all.push_back(std::move(r));
  }
  return all;
}

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params) {
  auto encode = [](std::string_view value) {
    std::string out;
    for (unsigned char c : value) {
      if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
        out += static_cast<char>(c);
      } else {
        out += fmt::format("%{:02X}", c);
      }
    }
    return out;
  };
  std::string out;
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    out += out.empty() ? '?' : '&';
    out += encode(key) + "=" + encode(value);
  }
  return out;
}

ApiClient::ApiClient(ServerUrl url) : ApiClient(std::vector<ServerUrl>{std::move(url)}) {}

ApiClient::ApiClient(std::vector<ServerUrl> urls) : urls_(std::move(urls)) {
  Use(0);
}

void ApiClient::Use(std::size_t i) {
  current_ = i;
  url_ = urls_.at(i);
  std::string host = url_.host.find(':') != std::string::npos ? "[" + url_.host + "]" : url_.host;
  http_ =
      std::make_unique<httplib::Client>(fmt::format("{}://{}:{}", url_.scheme, host, url_.port));
  http_->set_connection_timeout(kConnectTimeout);
  http_->set_read_timeout(kRequestTimeout);
  http_->set_write_timeout(kRequestTimeout);
  if (!ca_pem_.empty()) {
    (void)set_ca_pem(ca_pem_);
  } else if (!ca_.empty()) {
    http_->set_ca_cert_path(ca_);
  }
}

template <typename Send>
auto ApiClient::WithFailover(const Send& send) {
  for (std::size_t tried = 1;; ++tried) {
    auto res = send(*http_);
    const bool last = tried >= urls_.size();
    // Not connected: nothing reached a berthd. A standby's 503 says it did
    // not act on the request.
    const bool elsewhere =
        (!res && res.error() == httplib::Error::Connection) ||
        (res && res->status == 503 && res->body.find("\"role\":\"standby\"") != std::string::npos);
    if (!elsewhere || last) return res;
    Use((current_ + 1) % urls_.size());
  }
}

void ApiClient::set_ca(std::string path) {
  ca_ = std::move(path);
  if (!ca_.empty()) http_->set_ca_cert_path(ca_);
}

Status ApiClient::set_ca_pem(const std::string& pem) {
  ca_pem_ = pem;
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    added += X509_STORE_add_cert(store, cert) == 1 ? 1 : 0;
    X509_free(cert);
  }
  BIO_free(bio);
  if (added == 0) {
    X509_STORE_free(store);
    return Fail(Code::kInvalidArgument,
                "BERTH_CA_PEM holds no PEM certificate; unset it, or pass --ca FILE");
  }
  ca_ = "BERTH_CA_PEM";
  // The TLS context takes the store over; a plain http client never uses it.
  if (url_.scheme == "https") {
    http_->set_ca_cert_store(store);
  } else {
    X509_STORE_free(store);
  }
  return {};
}

ApiClient::~ApiClient() = default;
ApiClient::ApiClient(ApiClient&&) noexcept = default;
ApiClient& ApiClient::operator=(ApiClient&&) noexcept = default;

Result<json> ApiClient::Get(const std::string& path) {
  auto res = WithFailover([&](httplib::Client& c) {
    return c.Get(url_.base_path + path, RequestHeaders("application/json", token_));
  });
  if (!res) return std::unexpected(TransportError(url_, ca_, res.error()));
  return DecodeJson(res->status, res->body);
}

Result<json> ApiClient::GetFrom(std::size_t i, const std::string& path) {
  if (i >= urls_.size()) {
    return Fail(Code::kInvalidArgument, fmt::format("no server #{} of {}", i + 1, urls_.size()));
  }
  Use(i);
  auto res = http_->Get(url_.base_path + path, RequestHeaders("application/json", token_));
  if (!res) return std::unexpected(TransportError(url_, ca_, res.error()));
  return DecodeJson(res->status, res->body);
}

Result<json> ApiClient::Post(const std::string& path, const std::string& body,
                             const std::string& content_type) {
  auto res = WithFailover([&](httplib::Client& c) {
    return c.Post(url_.base_path + path, RequestHeaders("application/json", token_), body,
                  content_type);
  });
  if (!res) return std::unexpected(TransportError(url_, ca_, res.error()));
  return DecodeJson(res->status, res->body);
}

Result<json> ApiClient::Delete(const std::string& path) {
  auto res = WithFailover([&](httplib::Client& c) {
    return c.Delete(url_.base_path + path, RequestHeaders("application/json", token_));
  });
  if (!res) return std::unexpected(TransportError(url_, ca_, res.error()));
  return DecodeJson(res->status, res->body);
}

Status ApiClient::Stream(const std::string& path, const Sink& sink, bool long_lived,
                         std::optional<std::uint64_t>* content_length) {
  int status = 0;
  std::string error_body;
  bool sink_stopped = false;
  bool received = false;  // a byte reached `sink`: never sent again
  auto attempt = [&]() {
    status = 0;
    error_body.clear();
    if (content_length != nullptr) content_length->reset();
    http_->set_read_timeout(long_lived ? kStreamTimeout : kRequestTimeout);
    return http_->Get(
        url_.base_path + path, RequestHeaders("text/plain", token_),
        [&](const httplib::Response& response) {
          status = response.status;
          if (content_length != nullptr && response.has_header("Content-Length")) {
            std::uint64_t n = 0;
            const std::string v = response.get_header_value("Content-Length");
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
            if (ec == std::errc() && p == v.data() + v.size()) *content_length = n;
          }
          return true;
        },
        [&](const char* data, std::size_t len) {
          if (!IsSuccess(status)) {
            // Keep reading so the error body is whole, but only up to a bound.
            error_body.append(
                data, std::min(len, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
            return true;
          }
          received = true;
          if (!sink(std::string_view(data, len))) {
            sink_stopped = true;
            return false;
          }
          return true;
        });
  };
  // As WithFailover: no connection, or a standby's 503, means no berthd
  // acted on it and nothing reached `sink`; the next address is asked.
  auto elsewhere = [&](const httplib::Result& r) {
    return !received && ((!r && r.error() == httplib::Error::Connection) ||
                         (r && r->status == 503 &&
                          error_body.find("\"role\":\"standby\"") != std::string::npos));
  };
  auto res = attempt();
  for (std::size_t tried = 1; elsewhere(res) && tried < urls_.size(); ++tried) {
    Use((current_ + 1) % urls_.size());
    res = attempt();
  }
  http_->set_read_timeout(kRequestTimeout);
  if (!res) {
    if (sink_stopped) return Ok();
    return std::unexpected(TransportError(url_, ca_, res.error()));
  }
  if (!IsSuccess(res->status)) return std::unexpected(ParseApiError(res->status, error_body));
  return Ok();
}

}  // namespace berth::cli
