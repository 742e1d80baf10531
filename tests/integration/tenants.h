// Two tenants for the tenancy tests (authz, tenant scope, the operations
// report, outputs): red and blue, each with a queue `main`, and a member of
// one of them holding a token, made as the platform admin makes them.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "integration/harness.h"

namespace berth::it {

// Tenants red and blue (queue main each) next to default/default.
constexpr const char* kRedBlue = R"(queues:
  - name: default
    children:
      - name: default
  - name: red
    children:
      - name: main
  - name: blue
    children:
      - name: main
)";

// kRedBlue with an inference queue `serve` in each tenant, for services.
constexpr const char* kRedBlueServe = R"(queues:
  - name: default
    children:
      - name: default
  - name: red
    children:
      - name: main
      - name: serve
        kind: inference
  - name: blue
    children:
      - name: main
      - name: serve
        kind: inference
)";

// Makes identity `name` with `role` ("member", "viewer", "tenant-admin") in
// `tenant`, and a token for it that lives `ttl` (empty: the default), as
// the platform admin `admin`. Returns the token; "" when either was
// refused, which is then a test failure.
inline std::string MemberToken(const Http& admin, const std::string& name,
                               const std::string& tenant, const std::string& role,
                               const std::string& ttl = "") {
  auto made = admin.Post("/v1/identities",
                         nlohmann::json{{"name", name}, {"tenants", {{tenant, role}}}}.dump(),
                         "application/json");
  EXPECT_EQ(made.status, 201) << made.text;
  nlohmann::json ask{{"identity", name}};
  if (!ttl.empty()) ask["ttl"] = ttl;
  auto token = admin.Post("/v1/tokens", ask.dump(), "application/json");
  EXPECT_EQ(token.status, 201) << token.text;
  if (made.status != 201 || token.status != 201 || !token.body.is_object()) return "";
  return token.body.value("token", "");
}

}  // namespace berth::it
