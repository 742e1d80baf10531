#include "gateway/route.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

namespace berth::gateway {

std::string_view BalanceName(Balance balance) {
  switch (balance) {
    case Balance::kLeastConn:
      return "leastconn";
    case Balance::kRoundRobin:
      return "roundrobin";
  }
  return "leastconn";
}

std::string RoutePrefix(const Route& route) {
  return fmt::format("/s/{}/{}/", route.tenant, route.service);
}

std::string BackendName(std::string_view tenant, std::string_view service) {
  return fmt::format("{}:{}", tenant, service);
}

std::string HostPort(const std::string& address, int port) {
  if (address.find(':') != std::string::npos) return fmt::format("[{}]:{}", address, port);
  return fmt::format("{}:{}", address, port);
}

bool IsGatewayName(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto edge = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  auto mid = [&](char c) { return edge(c) || c == '-' || c == '_' || c == '.'; };
  return edge(s.front()) && edge(s.back()) && std::all_of(s.begin(), s.end(), mid);
}

bool IsBackendId(std::string_view s) {
  if (s.empty() || s.size() > kMaxBackendIdLength) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  auto mid = [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; };
  return alnum(s.front()) && std::all_of(s.begin(), s.end(), mid);
}

bool IsIpLiteral(std::string_view s) {
  if (s.empty() || s.size() > 45) return false;
  const std::string text(s);
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

bool IsAddressPort(std::string_view s) {
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon + 1 >= s.size()) return false;
  std::string_view host = s.substr(0, colon);
  const std::string_view port = s.substr(colon + 1);
  int p = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) return false;
  if (host.starts_with('[') && host.ends_with(']')) {
    host = host.substr(1, host.size() - 2);
    return host.find(':') != std::string_view::npos && IsIpLiteral(host);
  }
  return host.find(':') == std::string_view::npos && IsIpLiteral(host);
}

bool IsPlainUrl(std::string_view s) {
  if (s.size() > 512) return false;
  std::string_view rest;
  if (s.starts_with("https://")) {
    rest = s.substr(8);
  } else if (s.starts_with("http://")) {
    rest = s.substr(7);
  } else {
    return false;
  }
  if (rest.empty()) return false;
  return std::all_of(rest.begin(), rest.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~' || c == ':' || c == '/' || c == '[' || c == ']';
  });
}

namespace {

Status ValidateRouteBackend(const RouteBackend& b, const std::string& field) {
  if (!IsBackendId(b.id)) {
    return InvalidField(field + ".id",
                        "must be 1-63 letters, digits, '-', '_' or '.', starting with a "
                        "letter or digit");
  }
  if (!IsIpLiteral(b.address)) {
    return InvalidField(field + ".address",
                        "must be an IPv4 or IPv6 address literal (no host names)");
  }
  if (b.port < 1 || b.port > 65535) return InvalidField(field + ".port", "must be 1..65535");
  if (b.weight < 0 || b.weight > kMaxBackendWeight) {
    return InvalidField(field + ".weight", fmt::format("must be 0..{}", kMaxBackendWeight));
  }
  return Ok();
}

}  // namespace

Status ValidateRoutes(const std::vector<Route>& routes) {
  std::set<std::pair<std::string, std::string>> seen;
  for (std::size_t i = 0; i < routes.size(); ++i) {
    const Route& r = routes[i];
    const std::string field = fmt::format("routes[{}]", i);
    if (!IsGatewayName(r.tenant)) {
      return InvalidField(field + ".tenant",
                          "must be a Berth name: 1-63 of a-z, 0-9, '-', '_', '.', starting "
                          "and ending with a letter or digit");
    }
    if (!IsGatewayName(r.service)) {
      return InvalidField(field + ".service",
                          "must be a Berth name: 1-63 of a-z, 0-9, '-', '_', '.', starting "
                          "and ending with a letter or digit");
    }
    if (!seen.emplace(r.tenant, r.service).second) {
      return InvalidField(field + ".service",
                          fmt::format("a second route for {}/{}", r.tenant, r.service));
    }
    if (r.hold_timeout_ms < 0 || r.hold_timeout_ms > kMaxHoldTimeoutMs) {
      return InvalidField(field + ".hold_timeout_ms",
                          fmt::format("must be 0..{}", kMaxHoldTimeoutMs));
    }
    if (!r.auth_url.empty() && !IsPlainUrl(r.auth_url)) {
      return InvalidField(field + ".auth_url",
                          "must be an http:// or https:// URL of letters, digits and - . _ ~ : / "
                          "[ ], at most 512 bytes");
    }
    if (!r.auth_url.empty() && !IsAddressPort(r.auth_address)) {
      return InvalidField(field + ".auth_address",
                          "must be IP:PORT or [IPv6]:PORT: where the gateway reaches auth_url");
    }
    if (r.max_conn_per_backend < 0 || r.max_conn_per_backend > kMaxConnPerBackend) {
      return InvalidField(field + ".max_conn_per_backend",
                          fmt::format("must be 0..{} (0: no limit)", kMaxConnPerBackend));
    }
    std::set<std::string> ids;
    for (std::size_t j = 0; j < r.backends.size(); ++j) {
      const std::string bfield = fmt::format("{}.backends[{}]", field, j);
      BERTH_RETURN_IF_ERROR(ValidateRouteBackend(r.backends[j], bfield));
      if (!ids.insert(r.backends[j].id).second) {
        return InvalidField(bfield + ".id", fmt::format("'{}' is already a backend of this route",
                                                        r.backends[j].id));
      }
    }
  }
  return Ok();
}

}  // namespace berth::gateway
