// Inference services as stored objects, against a real berthd over HTTPS
// and the real `berth` CLI: a member applies, lists, scales, rolls back and
// deletes its service; a member of another tenant gets 404 for it and an
// empty list; no token gets 401; a training queue is refused naming
// `queue`; and every change is in `berth audit`. No replica runs: the
// status says so.
#include <fmt/format.h>

#include "integration/fixture.h"
#include "integration/tenants.h"

namespace berth::it {
namespace {

using nlohmann::json;

constexpr const char* kCoder = R"(name: coder
tenant: red
queue: serve
image: registry.example/coder:v1
command: [serve]
replicas: {min: 1, max: 2}
resources: {gpus: 1}
)";

class ServiceTest : public IntegrationTest {
 protected:
  CommandResult CliAs(const std::string& token, const Berthd& berthd,
                      const std::vector<std::string>& args) {
    const std::string admin = berthd.http().token();
    setenv("BERTH_TOKEN", token.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    CommandResult r = Cli(berthd, args);
    setenv("BERTH_TOKEN", admin.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    return r;
  }
};

TEST_F(ServiceTest, AMemberManagesItsServiceAndOtherTenantsCannotSeeIt) {
  BerthdOptions options = AllInOne();
  options.tls = true;
  Berthd& berthd = NewBerthd(options);
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_EQ(berthd.http().Post("/v1/policy", kRedBlueServe).status, 201);
  const std::string red = MemberToken(berthd.http(), "rita", "red", "member");
  const std::string blue = MemberToken(berthd.http(), "bo", "blue", "member");
  ASSERT_FALSE(red.empty());
  ASSERT_FALSE(blue.empty());

  // Apply: created, revision 1, no replica running and saying so.
  WriteFile(dir_ / "coder.yaml", kCoder);
  auto r = CliAs(red, berthd, {"svc", "apply", "-f", (dir_ / "coder.yaml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("service red/coder created (revision 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ready 0"), std::string::npos) << r.out;

  // A new image: revision 2.
  std::string v2 = kCoder;
  v2.replace(v2.find("coder:v1"), 8, "coder:v2");
  WriteFile(dir_ / "coder2.yaml", v2);
  r = CliAs(red, berthd, {"svc", "apply", "-f", (dir_ / "coder2.yaml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("revised (revision 2)"), std::string::npos) << r.out;

  r = CliAs(red, berthd, {"svc", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("coder"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1..2"), std::string::npos) << r.out;

  r = CliAs(red, berthd, {"svc", "scale", "coder", "--min", "2", "--max", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("scaled to replicas 2..4 (revision 3)"), std::string::npos) << r.out;

  r = CliAs(red, berthd, {"svc", "show", "coder", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  {
    const json s = json::parse(r.out);
    EXPECT_EQ(s.at("revision"), 3);
    EXPECT_EQ(s.at("status").at("desired"), 2);
    EXPECT_EQ(s.at("status").at("ready"), 0);
    EXPECT_EQ(s.at("spec").at("image"), "registry.example/coder:v2");
    EXPECT_EQ(s.at("revisions").size(), 3u);
  }

  // Rollback: revision 4 restores revision 2 (image v2, replicas 1..2).
  r = CliAs(red, berthd, {"svc", "rollback", "red/coder"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("revision 4 restores revision 2"), std::string::npos) << r.out;
  r = CliAs(red, berthd, {"svc", "show", "coder", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out).at("spec").at("replicas"), (json{{"min", 1}, {"max", 2}}));

  // Another tenant's member: 404 on show, scale and delete; an empty list.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"svc", "show", "red/coder"},
        std::vector<std::string>{"svc", "scale", "red/coder", "--max", "9"},
        std::vector<std::string>{"svc", "delete", "red/coder"}}) {
    r = CliAs(blue, berthd, args);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.err.find("service red/coder not found"), std::string::npos) << r.err;
  }
  Http blue_http(berthd.api_port(), 10s, berthd.ca_file());
  blue_http.set_token(blue);
  EXPECT_EQ(blue_http.Get("/v1/services/red/coder").status, 404);
  EXPECT_EQ(blue_http.Delete("/v1/services/red/coder").status, 404);
  auto blue_list = blue_http.Get("/v1/services");
  ASSERT_EQ(blue_list.status, 200) << blue_list.text;
  EXPECT_TRUE(blue_list.body.at("services").empty());
  r = CliAs(blue, berthd, {"svc", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("No services"), std::string::npos) << r.out;

  // No token: 401.
  Http anonymous(berthd.api_port(), 10s, berthd.ca_file());
  EXPECT_EQ(anonymous.Get("/v1/services").status, 401);
  EXPECT_EQ(anonymous.Get("/v1/services/red/coder").status, 401);
  EXPECT_EQ(anonymous.Post("/v1/services", kCoder, "application/yaml").status, 401);

  // A training queue: refused, naming `queue` and the inference queues.
  std::string training = kCoder;
  training.replace(training.find("name: coder"), 11, "name: batch");
  training.replace(training.find("queue: serve"), 12, "queue: main");
  WriteFile(dir_ / "batch.yaml", training);
  r = CliAs(red, berthd, {"svc", "apply", "-f", (dir_ / "batch.yaml").string()});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("queue"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("inference: serve"), std::string::npos) << r.err;

  r = CliAs(red, berthd, {"svc", "delete", "coder"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("service red/coder deleted"), std::string::npos) << r.out;
  r = CliAs(red, berthd, {"svc", "show", "coder"});
  EXPECT_NE(r.exit_code, 0);

  // Every change is in the audit trail, by who made it; the refusals too.
  r = Cli(berthd, {"audit", "--action", "service.", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> changes;
  int denied = 0;
  const json audit = json::parse(r.out);
  for (const auto& rec : audit.at("records")) {
    if (rec.value("outcome", "") == "ok") {
      changes.push_back(fmt::format("{} {} {}", rec.value("action", ""), rec.value("object", ""),
                                    rec.value("actor", "")));
    } else {
      ++denied;
    }
  }
  EXPECT_EQ(changes, (std::vector<std::string>{
                         "service.apply service/red/coder rita",
                         "service.apply service/red/coder rita",
                         "service.scale service/red/coder rita",
                         "service.rollback service/red/coder rita",
                         "service.delete service/red/coder rita",
                     }))
      << r.out;
  // bo's show, scale and delete (twice), and the training-queue apply.
  EXPECT_GE(denied, 5) << r.out;
}

}  // namespace
}  // namespace berth::it
