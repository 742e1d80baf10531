#include "common/status.h"

namespace berth {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kNotFound:
      return "NotFound";
    case Code::kAlreadyExists:
      return "AlreadyExists";
    case Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kResourceExhausted:
      return "ResourceExhausted";
    case Code::kInternal:
      return "Internal";
    case Code::kUnauthenticated:
      return "Unauthenticated";
    case Code::kPermissionDenied:
      return "PermissionDenied";
  }
  return "Internal";
}

int HttpStatus(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kInvalidArgument:
      return 400;
    case Code::kNotFound:
      return 404;
    case Code::kAlreadyExists:
      return 409;
    case Code::kFailedPrecondition:
      return 409;
    case Code::kUnavailable:
      return 503;
    case Code::kResourceExhausted:
      return 429;
    case Code::kInternal:
      return 500;
    case Code::kUnauthenticated:
      return 401;
    case Code::kPermissionDenied:
      return 403;
  }
  return 500;
}

}  // namespace berth
