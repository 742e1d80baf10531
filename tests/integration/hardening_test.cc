// A real berthd's request limits: a caller over --rate-limit gets 429 with
// Retry-After and gets through again after waiting that long; a body over
// --max-body gets a JSON 413 naming the limit; an oversized request line or
// header is refused (cpp-httplib's compile-time caps) and berthd carries on;
// a flag berthd refuses leaves its data dir empty.
#include <fmt/format.h>
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
  for (const char* label :
       {"ratelimited", "body", "uri", "header", "query", "after", "fields", "utf8"})
    Token(label);
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

  // A request target past 8 KiB, and a header past --max-header-bytes
  // (16 KiB): refused before routing, in Berth's error shape.
  auto long_uri = client.Get("/v1/jobs?tenant=" + std::string(10000, 'a'), Token("uri"));
  ASSERT_TRUE(long_uri) << httplib::to_string(long_uri.error());
  EXPECT_EQ(long_uri->status, 414);
  EXPECT_EQ(nlohmann::json::parse(long_uri->body, nullptr, false)["error"].value("field", ""),
            "path")
      << long_uri->body;
  httplib::Headers huge = Token("header");
  huge.emplace("X-Padding", std::string(20000, 'h'));
  auto long_header = client.Get("/v1/nodes", huge);
  ASSERT_TRUE(long_header) << httplib::to_string(long_header.error());
  EXPECT_EQ(long_header->status, 431);
  EXPECT_NE(long_header->body.find("--max-header-bytes"), std::string::npos) << long_header->body;
  httplib::Headers many = Token("fields");
  for (int i = 0; i < 150; ++i) many.emplace("X-F" + std::to_string(i), "v");
  auto many_fields = client.Get("/v1/nodes", many);
  ASSERT_TRUE(many_fields) << httplib::to_string(many_fields.error());
  EXPECT_EQ(many_fields->status, 431);
  // Counted by reason in /metrics.
  Reply metrics;
  for (int attempt = 0; attempt < 20 && metrics.status != 200; ++attempt) {
    metrics = berthd.http().Get("/metrics");
    if (metrics.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_EQ(metrics.status, 200) << metrics.text;
  EXPECT_NE(metrics.text.find("berth_http_refused_total{reason=\"header_too_large\"} 2"),
            std::string::npos)
      << metrics.text.substr(metrics.text.find("berth_http"));
  // A path and a parameter that are not UTF-8: refused, naming which.
  auto bad_path = client.Get("/v1/jobs/%FF", Token("utf8"));
  ASSERT_TRUE(bad_path);
  EXPECT_EQ(bad_path->status, 400);
  EXPECT_NE(bad_path->body.find(R"("field":"path")"), std::string::npos) << bad_path->body;
  auto bad_param = client.Get("/v1/jobs?tenant=%FF%FE", Token("utf8"));
  ASSERT_TRUE(bad_param);
  EXPECT_EQ(bad_param->status, 400);
  EXPECT_NE(bad_param->body.find(R"("field":"tenant")"), std::string::npos) << bad_param->body;
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

// A flag berthd refuses stops it before its data dir holds anything: the
// error names the flag, and no berth.db (nor a CA) is left to confuse the
// next start.
TEST_F(IntegrationTest, BerthdRefusesABadFlagBeforeItWritesItsDataDir) {
  const std::filesystem::path missing = dir_.path() / "no-such-file";
  struct Case {
    std::vector<std::string> flags;
    std::string named;
  };
  const std::vector<Case> cases{
      {{"--max-body", "1"}, "--max-body"},
      {{"--rate-burst", "0"}, "--rate-burst"},
      {{"--http-timeout", "soon"}, "--http-timeout"},
      {{"--idle-window", "never"}, "--idle-window"},
      {{"--webhook-secret-dir", missing.string()}, "--webhook-secret-dir"},
      {{"--gateway-listen", "127.0.0.1:0"}, "--gateway-listen"},
      {{"--gateway-listen", "8480"}, "--gateway-listen"},
      {{"--tls-cert", missing.string(), "--tls-key", missing.string()}, "--tls-cert"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::filesystem::path data = dir_.path() / fmt::format("refused-{}", n++);
    std::vector<std::string> args{"--data-dir",  data.string(),    "--listen",
                                  "127.0.0.1:0", "--agent-listen", "127.0.0.1:0"};
    if (c.named != "--tls-cert") args.insert(args.end(), {"--plain-http", "--plain-agents"});
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const CommandResult r = RunCommand(BinDir() / "berthd", args, dir_.path());
    const std::string said = r.out + r.err;  // berthd logs to stdout
    EXPECT_NE(r.exit_code, 0) << c.named << ": " << said;
    EXPECT_NE(said.find(c.named), std::string::npos) << c.named << ": " << said;
    EXPECT_FALSE(std::filesystem::exists(data / "berth.db")) << c.named;
    EXPECT_FALSE(std::filesystem::exists(data / "tls" / "ca.pem")) << c.named;
  }
}

}  // namespace
}  // namespace berth::it
