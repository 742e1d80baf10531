// berthd's own decoders of text from outside (a quota request's body, the
// prices of a policy preview) refuse bytes that are not UTF-8 naming the
// field, and an error that still quotes such a byte is written escaped, so
// it reaches the caller as its own status, never as a 500.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/policy_preview.h"
#include "api/quota_request_decode.h"
#include "api/render.h"
#include "common/utf8.h"

namespace berth::server {
namespace {

TEST(Utf8Input, QuotaRequestBodyNamesTheField) {
  auto r =
      ParseQuotaRequestBody("{queue: v/t, resource: gpus, guaranteed: 4, reason: \"m\xFFre\"}");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_EQ(r.error().field, "reason");
  EXPECT_NE(r.error().message.find("is not valid UTF-8 (byte 0xFF at offset 1); send UTF-8 text"),
            std::string::npos)
      << r.error().message;
  r = ParseQuotaRequestBody("{\"queue\": \"v/\xFF\", \"resource\": \"gpus\"}");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().field, "queue");
  r = ParseQuotaRequestBody("{queue: v/t, resource: gpus, guaranteed: 4, reason: more}");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->guaranteed, 4000);
}

TEST(Utf8Input, PreviewPricesNameTheParameter) {
  auto p = ParsePrices("H100-80GB:3.5,\xFF:1");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().field, "prices");
  EXPECT_NE(p.error().message.find("byte 0xFF at offset 14"), std::string::npos)
      << p.error().message;
}

TEST(Utf8Input, AnErrorQuotingAnOddByteIsWrittenEscaped) {
  const auto j = ErrorJson(Error{Code::kInvalidArgument, "'\xFF' is not a name", "env.\xFF"});
  const std::string text = j.dump();  // throws (type_error 316) if not escaped
  EXPECT_EQ(j["error"]["message"], "'\\xFF' is not a name");
  EXPECT_EQ(j["error"]["field"], "env.\\xFF");
  EXPECT_TRUE(ValidUtf8(text));
}

}  // namespace
}  // namespace berth::server
