#include "http/message.h"

#include <algorithm>
#include <cctype>

namespace berth::http {
namespace {

unsigned char Lower(unsigned char c) {
  return static_cast<unsigned char>(std::tolower(c));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool CaseInsensitiveLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return Lower(static_cast<unsigned char>(x)) < Lower(static_cast<unsigned char>(y));
  });
}

bool Request::has_param(std::string_view name) const {
  return params.find(std::string(name)) != params.end();
}

std::string Request::get_param_value(std::string_view name, std::size_t index) const {
  auto [begin, end] = params.equal_range(std::string(name));
  for (auto it = begin; it != end; ++it) {
    if (index-- == 0) return it->second;
  }
  return {};
}

bool Request::has_header(std::string_view name) const {
  return headers.find(name) != headers.end();
}

std::string Request::get_header_value(std::string_view name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

void Response::set_header(std::string_view name, std::string_view value) {
  // A value with CR or LF would split the header: it is dropped.
  if (value.find_first_of("\r\n") != std::string_view::npos) return;
  auto [begin, end] = headers.equal_range(name);
  headers.erase(begin, end);
  headers.emplace(std::string(name), std::string(value));
}

bool Response::has_header(std::string_view name) const {
  return headers.find(name) != headers.end();
}

std::string Response::get_header_value(std::string_view name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

void Response::set_content(std::string content, std::string_view content_type) {
  body = std::move(content);
  producer = nullptr;
  stream_length.reset();
  set_header("Content-Type", content_type);
}

void Response::set_stream(std::string_view content_type, Producer p,
                          std::optional<std::uint64_t> length) {
  body.clear();
  producer = std::move(p);
  stream_length = length;
  set_header("Content-Type", content_type);
}

std::string DecodeUrl(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%' && i + 2 < s.size()) {
      const int hi = HexValue(s[i + 1]);
      const int lo = HexValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
}

Params ParseQuery(std::string_view query) {
  Params out;
  while (!query.empty()) {
    const auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    std::string name = DecodeUrl(pair.substr(0, eq), true);
    std::string value =
        eq == std::string_view::npos ? std::string() : DecodeUrl(pair.substr(eq + 1), true);
    out.emplace(std::move(name), std::move(value));
  }
  return out;
}

}  // namespace berth::http
