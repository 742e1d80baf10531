// Berth's one error vocabulary. Expected failures travel as values
// (Result<T>), never as exceptions across module borders. Codes map onto
// HTTP statuses at the REST edge and onto gRPC codes on the agent stream.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace berth {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // the caller sent something malformed; `field` names it
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,  // valid request, wrong state (e.g. cancel a finished job)
  kUnavailable,         // try again later (agent offline, store busy)
  kResourceExhausted,
  kInternal,
  kUnauthenticated,   // no credentials, or ones that are unknown, expired or revoked
  kPermissionDenied,  // known caller, not allowed to do this
};

std::string_view CodeName(Code code);
int HttpStatus(Code code);

struct Error {
  Code code = Code::kInternal;
  std::string message;
  // Dotted path of the offending input field ("resources.gpus"), if any.
  std::string field;
};

template <typename T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> Fail(Code code, std::string message, std::string field = {}) {
  return std::unexpected<Error>(Error{code, std::move(message), std::move(field)});
}

inline std::unexpected<Error> InvalidField(std::string field, std::string message) {
  return Fail(Code::kInvalidArgument, std::move(message), std::move(field));
}

inline Status Ok() {
  return {};
}

}  // namespace berth

// Returns the error of a Result/Status expression from the enclosing function.
#define BERTH_RETURN_IF_ERROR(expr)                                \
  do {                                                             \
    if (auto berth_status_ = (expr); !berth_status_.has_value()) { \
      return std::unexpected(std::move(berth_status_.error()));    \
    }                                                              \
  } while (false)
