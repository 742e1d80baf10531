// The body of POST /v1/quota-requests, decoded apart from its handler so the
// fuzz target (fuzz/fuzz_quota_request.cc) runs exactly what berthd runs.
#pragma once

#include <string_view>

#include "common/status.h"
#include "store/store.h"

namespace berth::server {

// YAML or JSON: {queue, resource, guaranteed, borrow_limit, weight,
// lending_limit, reason}, amounts as the policy YAML writes them for the
// resource named. Fills queue, resource, reason and the amounts given;
// errors are kInvalidArgument naming the field.
Result<store::QuotaRequest> ParseQuotaRequestBody(std::string_view body);

}  // namespace berth::server
