// An HTTP request as a handler sees it, and the response it fills: plain
// values with no server types in them, so handlers and their tests need no
// Asio or Beast. The server (http/server.h) percent-decodes the path and the
// query before the handler runs and leaves their bytes as sent: whoever
// stores or echoes them checks they are text (berthd's gate refuses a path
// or a parameter that is not UTF-8 before any route runs).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth::http {

// Header names compare without case (RFC 9110 §5.1).
struct CaseInsensitiveLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};
using Headers = std::multimap<std::string, std::string, CaseInsensitiveLess>;
// Query parameters in arrival order per name.
using Params = std::multimap<std::string, std::string>;

struct Request {
  std::string method;
  std::string target;  // as sent, percent-encoded
  std::string path;    // percent-decoded
  Params params;       // percent-decoded ('+' is a space)
  Headers headers;
  std::string body;
  std::string remote_addr;
  std::uint16_t remote_port = 0;
  // The route pattern's whole match and its captures, as std::smatch has
  // them (matches[1] is the first capture).
  std::vector<std::string> matches;

  bool has_param(std::string_view name) const;
  // The value of the `index`th `name`, or "" when there is none.
  std::string get_param_value(std::string_view name, std::size_t index = 0) const;
  bool has_header(std::string_view name) const;
  std::string get_header_value(std::string_view name) const;
};

// How a streamed body goes on after one call of its producer.
enum class Step {
  kMore,   // call again as soon as what it wrote is sent
  kWait,   // nothing more yet: call again after the server's poll interval
  kDone,   // the body is complete
  kAbort,  // give up: the connection closes, the body stays short
};
// Appends the next piece of a streamed body to `out` (kept small: the server
// sends it before asking again). It runs on the server's worker pool, never
// while the stream waits, so an idle stream holds no thread.
using Producer = std::function<Step(std::string& out)>;

struct Response {
  int status = -1;  // -1: the handler left it; 200 when it wrote a body
  Headers headers;
  std::string body;
  // A streamed body: chunked, or exactly `stream_length` bytes when known.
  Producer producer;
  std::optional<std::uint64_t> stream_length;
  // The server's own words for a request it refused before any route ran
  // (400, 413, 414, 431), for the error handler to render.
  std::string reason;

  void set_header(std::string_view name, std::string_view value);
  bool has_header(std::string_view name) const;
  std::string get_header_value(std::string_view name) const;
  void set_content(std::string content, std::string_view content_type);
  // Streams the body from `producer`; `length` sends a Content-Length, else
  // the body is chunked.
  void set_stream(std::string_view content_type, Producer producer,
                  std::optional<std::uint64_t> length = std::nullopt);
};

using Handler = std::function<void(const Request&, Response&)>;

// Percent-decoding of a path (`plus_is_space` false) or a query component
// (true). Malformed escapes are kept as they are.
std::string DecodeUrl(std::string_view s, bool plus_is_space);
// The query string split into decoded name/value pairs; a name without '='
// gets "".
Params ParseQuery(std::string_view query);

}  // namespace berth::http
