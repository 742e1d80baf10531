// The CLI's HTTP client for berthd's REST API. It turns every way a request
// can fail (bad URL, unreachable server, HTTP error, non-JSON answer) into an
// Error value with a message fit to print on one line.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace httplib {
class Client;
}

namespace berth::cli {

// Where berthd listens: "http://host:port[/prefix]". A missing scheme means
// http; a missing port means 7460 (berthd's default); a path is a prefix put
// before every /v1 path (for berthd behind a reverse proxy).
struct ServerUrl {
  std::string scheme;
  std::string host;  // without IPv6 brackets
  int port = 0;
  std::string base_path;  // "" or "/prefix", never a trailing '/'
  std::string text;       // as the user wrote it, for messages
};

inline constexpr int kDefaultPort = 7460;

Result<ServerUrl> ParseServerUrl(std::string_view text);

// "?state=Pending%2CRunning&queue=gpu"; pairs with an empty value are left
// out, and so is the '?' when nothing is left.
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params);

class ApiClient;

// How the pages of a cursor-paged list (docs/api.md "Pages") fit together:
// each page goes on where the one before ended (jobs, quota requests), or
// each page is older than the one before and oldest first within, so the
// whole list reads oldest first once the later pages go in front (audit,
// alerts).
enum class PageOrder { kAppend, kPrepend };

// Rows a CLI page asks for: berthd's default page.
inline constexpr std::uint64_t kCliPageRows = 500;

// Every row under `key` of the paged list at `path` with `params`,
// following each page's `next` cursor until the last page or `limit` rows
// (0: no limit), in the list's order.
Result<nlohmann::json> GetAllPages(ApiClient& api, const std::string& path,
                                   std::vector<std::pair<std::string, std::string>> params,
                                   const std::string& key, std::uint64_t limit, PageOrder order);

class ApiClient {
 public:
  explicit ApiClient(ServerUrl url);
  // Several control-plane berthd (a leader and its standbys, docs/
  // operations.md "High availability"): a request that cannot connect, or
  // that a standby turns away (503, role "standby"), goes to the next
  // address, and the client stays with the one that answered. Nothing is
  // sent twice: a request is retried only when no berthd acted on it.
  explicit ApiClient(std::vector<ServerUrl> urls);
  ~ApiClient();
  ApiClient(ApiClient&&) noexcept;
  ApiClient& operator=(ApiClient&&) noexcept;

  Result<nlohmann::json> Get(const std::string& path);
  Result<nlohmann::json> Post(const std::string& path, const std::string& body,
                              const std::string& content_type);
  Result<nlohmann::json> Delete(const std::string& path);

  // Receives a text body piece by piece as it arrives; `sink` returns false
  // to stop early (stdout closed). For long-lived streams (logs --follow)
  // the read timeout is lifted: the server may stay quiet for hours.
  using Sink = std::function<bool(std::string_view)>;
  // `content_length` (when not null) gets the answer's Content-Length, if
  // it had one, before the first byte reaches `sink`.
  Status Stream(const std::string& path, const Sink& sink, bool long_lived,
                std::optional<std::uint64_t>* content_length = nullptr);

  // The address in use (the last that answered).
  const ServerUrl& url() const { return url_; }
  // Every address given, in order.
  const std::vector<ServerUrl>& urls() const { return urls_; }
  // GET from urls()[i] alone, never another (berth status asks each
  // berthd of the control plane in turn); the client then stays there.
  Result<nlohmann::json> GetFrom(std::size_t i, const std::string& path);
  // Sent as `Authorization: Bearer` on every request when not empty.
  void set_token(std::string token) { token_ = std::move(token); }
  // The PEM CA file an https server's certificate must chain to (--ca,
  // $BERTH_CA, <data-dir>/tls/ca.pem for berthd's own CA); empty: the
  // system trust store.
  void set_ca(std::string path);
  // The same with the PEM text itself ($BERTH_CA_PEM in a job); an error
  // when it holds no certificate.
  Status set_ca_pem(const std::string& pem);

 private:
  // Makes http_ a client of urls_[i], with the timeouts and CA in use.
  void Use(std::size_t i);
  // Runs `send` on the current address, then on the next ones while the
  // answer is "not here" (no connection, or a standby's 503).
  template <typename Send>
  auto WithFailover(const Send& send);

  std::vector<ServerUrl> urls_;
  std::size_t current_ = 0;
  ServerUrl url_;
  std::string token_;
  std::string ca_;
  std::string ca_pem_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace berth::cli
