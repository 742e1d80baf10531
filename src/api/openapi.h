// The OpenAPI 3 description of the REST API, served at /v1/openapi.json.
#pragma once

#include <string_view>

namespace berth::server {

std::string_view OpenApiDocument();

}  // namespace berth::server
