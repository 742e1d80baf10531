// A real berthd's request limits: a caller over --rate-limit gets 429 with
// Retry-After and gets through again after waiting that long; a body over
// --max-body gets a JSON 413 naming the limit; an oversized request line or
// header is refused (cpp-httplib's compile-time caps) and berthd carries on.
#include <httplib.h>

#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

// A real token per label (each has a rate bucket of its own), made by the
// platform admin, whose own requests wait out its rate limit.
class Tokens {
 public:
  explicit Tokens(const Berthd& berthd) : berthd_(berthd) {}
  httplib::Headers operator()(const std::string& label) {
    if (!made_.contains(label)) {
      for (int attempt = 0; attempt < 50; ++attempt) {
        auto r = berthd_.http().Post("/v1/tokens", json{{"description", label}}.dump(),
                                     "application/json");
        if (r.status == 201) {
          made_[label] = r.body.at("token").get<std::string>();
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      }
    }
    return {{"Authorization", "Bearer " + made_[label]}};
  }

 private:
  const Berthd& berthd_;
  std::map<std::string, std::string> made_;
};

TEST_F(IntegrationTest, RequestLimitsRefuseClearlyAndBerthdCarriesOn) {
  Berthd& berthd =
      NewBerthd(AllInOne({"--rate-limit", "2", "--rate-burst", "3", "--max-body", "64Ki"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  Tokens Token(berthd);
  for (const char* label : {"ratelimited", "body", "uri", "header", "query", "after"}) Token(label);
  httplib::Client client("127.0.0.1", berthd.api_port());
  client.set_read_timeout(10, 0);

  // Over the rate: 429, Retry-After, and a message naming the flag.
  int status = 0;
  std::string body;
  std::string retry_header;
  int admitted = 0;
  for (int i = 0; i < 10 && status != 429; ++i) {
    auto res = client.Get("/v1/nodes", Token("ratelimited"));
    ASSERT_TRUE(res) << "no answer: " << httplib::to_string(res.error());
    status = res->status;
    body = res->body;
    retry_header = res->get_header_value("Retry-After");
    if (status == 200) ++admitted;
  }
  ASSERT_EQ(status, 429) << body;
  EXPECT_GE(admitted, 3);  // the burst
  ASSERT_FALSE(retry_header.empty());
  const int retry_after = std::stoi(retry_header);
  EXPECT_GE(retry_after, 1);
  auto error = json::parse(body)["error"];
  EXPECT_EQ(error.value("field", ""), "rate_limit");
  EXPECT_NE(error.value("message", "").find("--rate-limit"), std::string::npos) << body;
  // Probes are never limited; after Retry-After the caller is admitted again.
  EXPECT_EQ(client.Get("/healthz", Token("ratelimited"))->status, 200);
  std::this_thread::sleep_for(std::chrono::seconds(retry_after));
  auto again = client.Get("/v1/nodes", Token("ratelimited"));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << again->body;

  // A body over --max-body.
  auto big = client.Post("/v1/jobs", Token("body"),
                         "name: x\ncommand: [\"true\"]\n#" + std::string(100 * 1024, 'x'),
                         "application/yaml");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("65536 bytes"), std::string::npos) << big->body;
  EXPECT_NE(big->body.find("--max-body"), std::string::npos) << big->body;

  // A request line and a header past cpp-httplib's 8 KiB caps.
  auto long_uri = client.Get("/v1/jobs?tenant=" + std::string(20000, 'a'), Token("uri"));
  ASSERT_TRUE(long_uri) << httplib::to_string(long_uri.error());
  EXPECT_EQ(long_uri->status, 414);
  httplib::Headers huge = Token("header");
  huge.emplace("X-Padding", std::string(20000, 'h'));
  auto long_header = client.Get("/v1/nodes", huge);
  if (long_header) {
    EXPECT_GE(long_header->status, 400);  // or the connection is closed
  }
  // An undeclared query parameter.
  auto unknown = client.Get("/v1/jobs?stat=Running", Token("query"));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 400);
  EXPECT_NE(unknown->body.find("unknown query parameter 'stat'"), std::string::npos)
      << unknown->body;

  // berthd is unharmed and no secret reached its log.
  EXPECT_EQ(client.Get("/v1/nodes", Token("after"))->status, 200);
  EXPECT_TRUE(berthd.running());
  EXPECT_EQ(berthd.log().find("c2VjcmV0LXNlY3JldA"), std::string::npos);
}

}  // namespace
}  // namespace berth::it
