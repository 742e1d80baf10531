// Says why a TCP connection to berthd failed. cpp-httplib reports only "Could
// not establish connection"; users need the operating system's reason
// ("Connection refused", "Name or service not known") to tell a stopped
// server from a wrong address.
#pragma once

#include <optional>
#include <string>

namespace berth::cli {

// Resolves and connects once, blocking for at most `timeout_ms` per address.
// Returns the reason the connection fails, or nullopt when it now succeeds.
std::optional<std::string> ProbeConnectFailure(const std::string& host, int port,
                                               int timeout_ms = 3000);

}  // namespace berth::cli
