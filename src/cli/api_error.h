// Turns berthd's error answers into Berth's Error value and into the one line
// the CLI prints. berthd sends {"error":{"code","field","message"}}; proxies
// and crashed servers send anything at all, so parsing never fails.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace berth::cli {

// The Error carried by an HTTP error answer. A body that is not Berth's error
// shape still yields an Error naming the HTTP status and the body's start.
Error ParseApiError(int http_status, std::string_view body);

// "resources.gpus: must be between 0 and 64", or just the message when the
// error names no field. Always a single line.
std::string FormatError(const Error& error);

// FormatError(ParseApiError(...)).
std::string FormatApiError(int http_status, std::string_view body);

}  // namespace berth::cli
