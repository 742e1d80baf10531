// Error answers become one printable line; server URLs and queries are
// built the way berthd expects.
#include "cli/api_error.h"

#include <gtest/gtest.h>

#include "cli/api_client.h"
#include "cli/commands.h"

namespace berth::cli {
namespace {

TEST(ApiError, FieldPrefixesTheMessage) {
  std::string body =
      R"({"error":{"code":"InvalidArgument","field":"resources.gpus","message":"must be between 0 and 64"}})";
  Error error = ParseApiError(400, body);
  EXPECT_EQ(error.code, Code::kInvalidArgument);
  EXPECT_EQ(error.field, "resources.gpus");
  EXPECT_EQ(FormatApiError(400, body), "resources.gpus: must be between 0 and 64");
}

TEST(ApiError, AbsentOrEmptyFieldIsJustTheMessage) {
  EXPECT_EQ(FormatApiError(404, R"({"error":{"code":"NotFound","message":"job 99 not found"}})"),
            "job 99 not found");
  EXPECT_EQ(FormatApiError(409, R"({"error":{"code":"FailedPrecondition","field":"",)"
                                R"("message":"job 3 already finished"}})"),
            "job 3 already finished");
  EXPECT_EQ(ParseApiError(409, R"({"error":{"code":"FailedPrecondition","message":"x"}})").code,
            Code::kFailedPrecondition);
}

TEST(ApiError, MalformedBodyNamesTheHttpStatus) {
  EXPECT_EQ(FormatApiError(502, "<html>\n<body>upstream down</body>\n</html>"),
            "berthd answered HTTP 502 Bad Gateway: <html> <body>upstream down</body> </html>");
  EXPECT_EQ(FormatApiError(500, ""), "berthd answered HTTP 500 Internal Server Error");
  EXPECT_EQ(FormatApiError(418, "  "), "berthd answered HTTP 418");
  EXPECT_EQ(ParseApiError(503, "busy").code, Code::kUnavailable);
}

TEST(ApiError, ErrorObjectWithoutMessageFallsBackToStatusAndCode) {
  EXPECT_EQ(FormatApiError(404, R"({"error":{"code":"NotFound"}})"),
            "berthd answered HTTP 404 Not Found (NotFound)");
  EXPECT_EQ(ParseApiError(404, R"({"error":{"code":"Teapot","message":"m"}})").code,
            Code::kNotFound);
}

TEST(ApiError, LongBodiesAreCutAndMultiLineMessagesFlattened) {
  std::string line = FormatApiError(500, std::string(1000, 'x'));
  EXPECT_LT(line.size(), 200U);
  EXPECT_TRUE(line.ends_with("..."));
  EXPECT_EQ(FormatApiError(400, R"({"error":{"message":"bad\nspec"}})"), "bad spec");
}

TEST(ServerUrl, DefaultsAndForms) {
  auto url = ParseServerUrl("http://127.0.0.1:7460");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->scheme, "http");
  EXPECT_EQ(url->host, "127.0.0.1");
  EXPECT_EQ(url->port, 7460);
  EXPECT_EQ(url->base_path, "");

  url = ParseServerUrl("berth.example.com");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->port, kDefaultPort);

  url = ParseServerUrl("https://[::1]/berth/");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->base_path, "/berth");
}

TEST(ServerUrl, RejectsWhatCannotWork) {
  EXPECT_FALSE(ParseServerUrl("ftp://host"));
  EXPECT_FALSE(ParseServerUrl("http://host:99999"));
  EXPECT_FALSE(ParseServerUrl("http://host:80x"));
  EXPECT_FALSE(ParseServerUrl("http://:80"));
  EXPECT_FALSE(ParseServerUrl("::1:80"));
}

TEST(QueryString, SkipsEmptyValuesAndEncodes) {
  EXPECT_EQ(QueryString({{"state", ""}, {"queue", ""}}), "");
  EXPECT_EQ(QueryString({{"state", "Pending,Running"}, {"queue", ""}, {"tenant", "a b"}}),
            "?state=Pending%2CRunning&tenant=a%20b");
}

TEST(NormalizeStates, CanonicalisesCaseAndRejectsTypos) {
  auto states = NormalizeStates("pending,RUNNING");
  ASSERT_TRUE(states);
  EXPECT_EQ(*states, "Pending,Running");
  EXPECT_EQ(NormalizeStates("").value(), "");
  auto bad = NormalizeStates("Pending,Runing");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'Runing'"), std::string::npos);
}

}  // namespace
}  // namespace berth::cli
