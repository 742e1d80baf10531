#include "cli/api_error.h"

#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>

#include "cli/json_view.h"
#include "cli/table.h"

namespace berth::cli {
namespace {

// How much of a non-Berth error body to quote; an HTML error page from a
// proxy should not flood the terminal.
constexpr std::size_t kBodyQuoteWidth = 120;

Code CodeFromHttp(int http_status) {
  switch (http_status) {
    case 400:
      return Code::kInvalidArgument;
    case 401:
      return Code::kUnauthenticated;
    case 403:
      return Code::kPermissionDenied;
    case 404:
      return Code::kNotFound;
    case 409:
      return Code::kFailedPrecondition;
    case 429:
      return Code::kResourceExhausted;
    case 502:
    case 503:
    case 504:
      return Code::kUnavailable;
    default:
      return Code::kInternal;
  }
}

Code CodeFromName(std::string_view name, int http_status) {
  static constexpr std::array kCodes{
      Code::kInvalidArgument,    Code::kNotFound,        Code::kAlreadyExists,
      Code::kFailedPrecondition, Code::kUnavailable,     Code::kResourceExhausted,
      Code::kInternal,           Code::kUnauthenticated, Code::kPermissionDenied};
  for (Code code : kCodes) {
    if (CodeName(code) == name) return code;
  }
  return CodeFromHttp(http_status);
}

std::string_view Reason(int http_status) {
  switch (http_status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

std::string StatusLine(int http_status) {
  std::string_view reason = Reason(http_status);
  return reason.empty() ? fmt::format("HTTP {}", http_status)
                        : fmt::format("HTTP {} {}", http_status, reason);
}

std::string Trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  std::size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  std::size_t end = text.find_last_not_of(kSpace);
  return std::string(text.substr(begin, end - begin + 1));
}

}  // namespace

Error ParseApiError(int http_status, std::string_view body) {
  auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* err = Field(doc, "error");
  if (err != nullptr && err->is_object()) {
    std::string message = Text(*err, "message");
    std::string field = Text(*err, "field");
    std::string code = Text(*err, "code");
    if (message == "-" || Trim(message).empty()) {
      message = fmt::format("berthd answered {}", StatusLine(http_status));
      if (code != "-") message += fmt::format(" ({})", code);
    }
    return Error{CodeFromName(code, http_status), message, field == "-" ? std::string() : field};
  }
  std::string quote = Trim(OneLine(body));
  std::string message = quote.empty()
                            ? fmt::format("berthd answered {}", StatusLine(http_status))
                            : fmt::format("berthd answered {}: {}", StatusLine(http_status),
                                          Truncate(quote, kBodyQuoteWidth));
  return Error{CodeFromHttp(http_status), message, ""};
}

std::string FormatError(const Error& error) {
  std::string line = error.field.empty() ? error.message : error.field + ": " + error.message;
  return Trim(OneLine(line));
}

std::string FormatApiError(int http_status, std::string_view body) {
  return FormatError(ParseApiError(http_status, body));
}

}  // namespace berth::cli
