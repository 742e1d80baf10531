// The whole CLI, in-process, against a loopback httplib server that answers
// with canned berthd responses: argument parsing, the real HTTP client path,
// output and exit codes together.
#include "cli/app.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/clock.h"

namespace berth::cli {
namespace {

using nlohmann::json;

constexpr std::int64_t kNow = 1'764'444'744'000;

const char* kJob = R"({"id": 12, "name": "resnet50", "tenant": "default", "queue": "default",
  "state": "Pending", "submitted_at_ms": 1764444444000,
  "spec": {"replicas": 2, "resources": {"gpus": 4}}})";

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};

// An ostream buffer that reports when a given text has been flushed, so a
// test can tell streamed output from output that came all at once.
class WatchingBuf : public std::stringbuf {
 public:
  explicit WatchingBuf(std::string wanted) : wanted_(std::move(wanted)) {}
  std::future<void> Seen() { return seen_.get_future(); }

 protected:
  int sync() override {
    if (!signalled_ && str().find(wanted_) != std::string::npos) {
      signalled_ = true;
      seen_.set_value();
    }
    return 0;
  }

 private:
  std::string wanted_;
  bool signalled_ = false;
  std::promise<void> seen_;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }

  void TearDown() override {
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server_.stop();
    thread_.join();
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  CliRun Cli(std::vector<std::string> args, const std::string& stdin_text = "",
             std::ostream* out_override = nullptr) {
    args.insert(args.begin(), "berth");
    std::istringstream in(stdin_text);
    std::ostringstream out;
    std::ostringstream err;
    ManualClock clock(kNow);
    CliRun run;
    run.code = RunCli(
        args, {in, out_override ? *out_override : out, err, Url(), clock, "alice", {}, locale_});
    run.out = out.str();
    run.err = err.str();
    return run;
  }

  httplib::Server server_;
  std::optional<std::string> locale_;  // what main() reads from $LANG
  int port_ = 0;
  std::thread thread_;
};

TEST_F(CliTest, SubmitSendsTheFileBytesAsYaml) {
  std::string body;
  std::string content_type;
  server_.Post("/v1/jobs", [&](const httplib::Request& req, httplib::Response& res) {
    body = req.body;
    content_type = req.get_header_value("Content-Type");
    res.status = 201;
    res.set_content(kJob, "application/json");
  });
  CliRun run = Cli({"submit", "-"}, "name: resnet50\ncommand: [python3, train.py]\n");
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "job 12 submitted (resnet50)\n");
  EXPECT_EQ(body, "name: resnet50\ncommand: [python3, train.py]\n");
  EXPECT_EQ(content_type, "application/yaml");

  run = Cli({"submit", "-", "-o", "json"}, "name: x\n");
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(json::parse(run.out), json::parse(kJob));
}

TEST_F(CliTest, ApiErrorIsOneLineWithFieldAndExitsOne) {
  server_.Post("/v1/jobs", [](const httplib::Request&, httplib::Response& res) {
    res.status = 400;
    res.set_content(R"({"error":{"code":"InvalidArgument","field":"resources.gpus",)"
                    R"("message":"must be between 0 and 64"}})",
                    "application/json");
  });
  CliRun run = Cli({"submit", "-"}, "resources: {gpus: 65}\n");
  EXPECT_EQ(run.code, kExitError);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "berth: resources.gpus: must be between 0 and 64\n");
}

TEST_F(CliTest, JobsSendsNormalisedFiltersAndGlobalFlagsWorkAfterTheCommand) {
  std::string state;
  std::string queue;
  bool has_tenant = true;
  server_.Get("/v1/jobs", [&](const httplib::Request& req, httplib::Response& res) {
    state = req.get_param_value("state");
    queue = req.get_param_value("queue");
    has_tenant = req.has_param("tenant");
    res.set_content(std::string(R"({"jobs":[)") + kJob + "]}", "application/json");
  });
  CliRun run = Cli({"jobs", "--state", "pending,running", "--queue", "default", "-o", "json"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(state, "Pending,Running");
  EXPECT_EQ(queue, "default");
  EXPECT_FALSE(has_tenant);
  EXPECT_EQ(json::parse(run.out)["jobs"][0]["id"], 12);

  run = Cli({"-o", "table", "jobs"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_NE(run.out.find("12   resnet50   default   default   Pending   2x4    5m"),
            std::string::npos)
      << run.out;
}

TEST_F(CliTest, JobsFollowsEveryPageAndStopsAtTheLimit) {
  // Page 1 names a next page; page 2 (after=j11) is the last. Summaries
  // carry replicas and resources at the top level, no spec.
  std::vector<std::string> afters;
  std::vector<std::string> limits;
  server_.Get("/v1/jobs", [&](const httplib::Request& req, httplib::Response& res) {
    afters.push_back(req.get_param_value("after"));
    limits.push_back(req.get_param_value("limit"));
    auto row = [](int id) {
      return fmt::format(R"({{"id": {}, "name": "j{}", "tenant": "default", "queue": "q",
        "state": "Pending", "submitted_at_ms": 1764444444000, "replicas": 2,
        "resources": {{"gpus": 4}}}})",
                         id, id);
    };
    if (!req.has_param("after")) {
      res.set_content(fmt::format(R"({{"jobs":[{},{}],"next":"j11"}})", row(12), row(11)),
                      "application/json");
    } else {
      res.set_content(fmt::format(R"({{"jobs":[{}]}})", row(10)), "application/json");
    }
  });
  CliRun run = Cli({"jobs", "-o", "json"});
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(afters, (std::vector<std::string>{"", "j11"}));
  const json jobs = json::parse(run.out)["jobs"];
  ASSERT_EQ(jobs.size(), 3U);
  EXPECT_EQ(jobs[2]["id"], 10);
  EXPECT_FALSE(json::parse(run.out).contains("next"));

  run = Cli({"jobs"});
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_NE(run.out.find("2x4"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("j10"), std::string::npos) << run.out;

  // --limit 2: one page of two, no second request.
  afters.clear();
  limits.clear();
  run = Cli({"jobs", "--limit", "2", "-o", "json"});
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(afters, (std::vector<std::string>{""}));
  EXPECT_EQ(limits, (std::vector<std::string>{"2"}));
  EXPECT_EQ(json::parse(run.out)["jobs"].size(), 2U);
}

TEST_F(CliTest, NotFoundJobAndCancel) {
  server_.Get("/v1/jobs/99", [](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(R"({"error":{"code":"NotFound","message":"job 99 not found"}})",
                    "application/json");
  });
  server_.Post("/v1/jobs/12/cancel", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"id":12,"state":"Running"})", "application/json");
  });
  CliRun run = Cli({"job", "99"});
  EXPECT_EQ(run.code, kExitError);
  EXPECT_EQ(run.err, "berth: job 99 not found\n");

  run = Cli({"cancel", "12"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "job 12 cancelling\n");
}

TEST_F(CliTest, LogsFollowPrintsChunksAsTheyArrive) {
  WatchingBuf buf("first\n");
  std::future<void> seen = buf.Seen();
  std::string replica;
  std::string follow;
  server_.Get("/v1/jobs/12/logs", [&](const httplib::Request& req, httplib::Response& res) {
    replica = req.get_param_value("replica");
    follow = req.get_param_value("follow");
    res.set_chunked_content_provider("text/plain", [&](std::size_t, httplib::DataSink& sink) {
      sink.write("first\n", 6);
      // The second chunk waits until the client has printed the first.
      bool printed = seen.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
      std::string second = printed ? "second\n" : "not streamed\n";
      sink.write(second.data(), second.size());
      sink.done();
      return true;
    });
  });
  std::ostream out(&buf);
  CliRun run = Cli({"logs", "12", "--replica", "1", "-f"}, "", &out);
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(buf.str(), "first\nsecond\n");
  EXPECT_EQ(replica, "1");
  EXPECT_EQ(follow, "true");
}

TEST_F(CliTest, LogsErrorBodyBecomesTheMessage) {
  server_.Get("/v1/jobs/7/logs", [](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(R"({"error":{"code":"NotFound","message":"job 7 not found"}})",
                    "application/json");
  });
  CliRun run = Cli({"logs", "7"});
  EXPECT_EQ(run.code, kExitError);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "berth: job 7 not found\n");
}

TEST_F(CliTest, GpusTableAndNonJsonAnswer) {
  server_.Get("/v1/gpus", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"gpus":[{"node":"gpu-a1","index":0,"model":"H100-80GB",)"
                    R"("memory_bytes":85899345920,"health":"Healthy",)"
                    R"("job":{"id":12,"name":"resnet50","replica":0}}]})",
                    "application/json");
  });
  server_.Get("/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("<html>oops</html>", "text/html");
  });
  CliRun run = Cli({"gpus"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_NE(
      run.out.find("gpu-a1   0       H100-80GB   80Gi     Healthy   -         12 resnet50/r0\n"),
      std::string::npos)
      << run.out;

  run = Cli({"nodes"});
  EXPECT_EQ(run.code, kExitError);
  EXPECT_EQ(run.err, "berth: berthd answered HTTP 200 with a body that is not JSON\n");
}

TEST_F(CliTest, UsageErrorsExitTwoWithOneLine) {
  for (const auto& args : std::vector<std::vector<std::string>>{{},
                                                                {"jobs", "--state", "bogus"},
                                                                {"job", "abc"},
                                                                {"jobs", "-o", "yaml"},
                                                                {"--server", "ftp://x", "nodes"}}) {
    CliRun run = Cli(args);
    EXPECT_EQ(run.code, kExitUsage) << ::testing::PrintToString(args);
    EXPECT_TRUE(run.err.starts_with("berth: ")) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
}

TEST_F(CliTest, UnreadableSpecFile) {
  CliRun run = Cli({"submit", "/nonexistent/job.yaml"});
  EXPECT_EQ(run.code, kExitError);
  EXPECT_EQ(run.err,
            "berth: cannot read job spec '/nonexistent/job.yaml': No such file or directory\n");
}

TEST_F(CliTest, VersionNeedsNoServer) {
  CliRun run = Cli({"--server", "http://127.0.0.1:1", "version"});
  EXPECT_EQ(run.code, kExitOk);
  EXPECT_TRUE(run.out.starts_with("berth ")) << run.out;
}

// Finds a loopback port nothing listens on: bind, read the port, close.
int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST_F(CliTest, UnreachableServerSaysWhyAndExitsThree) {
  std::string url = "http://127.0.0.1:" + std::to_string(UnusedPort());
  CliRun run = Cli({"--server", url, "jobs"});
  EXPECT_EQ(run.code, kExitUnavailable);
  EXPECT_EQ(run.err, "berth: cannot reach berthd at " + url +
                         ": Connection refused (is berthd running? set --server or "
                         "BERTH_SERVER)\n");
}

// --- berth policy ---

const char* kPolicyV3 = R"({"version": 3, "active": true, "applied_at_ms": 1764444444000,
  "applied_by": "alice", "comment": "vision gets 8 GPUs", "rolled_back_from": null,
  "restores": null, "yaml": "queues:\n  - name: vision\n",
  "policy": {"queues": [
    {"path": "default", "kind": "training", "pools": [], "quota": {}},
    {"path": "vision", "kind": "training", "pools": ["a100", "h100"],
     "quota": {"gpus": {"guaranteed": 8000, "borrow_limit": null, "weight": 2, "lending_limit": 0},
               "memory": {"guaranteed": 549755813888, "borrow_limit": 0, "weight": 1,
                          "lending_limit": 0}}},
    {"path": "vision/training", "kind": "training", "pools": [],
     "quota": {"gpus": {"guaranteed": 500, "borrow_limit": 4000, "weight": 1,
                        "lending_limit": 0}}}]}})";

TEST_F(CliTest, PolicyShowTableYamlAndOneVersion) {
  server_.Get("/v1/policy", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kPolicyV3, "application/json");
  });
  server_.Get("/v1/policy/versions/2", [](const httplib::Request&, httplib::Response& res) {
    json v = json::parse(kPolicyV3);
    v["version"] = 2;
    v["active"] = false;
    res.set_content(v.dump(), "application/json");
  });
  CliRun run = Cli({"policy", "show"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.out,
            "Policy v3 (active), applied 5m ago by alice: vision gets 8 GPUs\n"
            "\n"
            "QUEUE             KIND       POOLS       RESOURCE   GUARANTEED   BORROW LIMIT   "
            "WEIGHT   LENDING LIMIT\n"
            "default           training   all         -          -            -              -"
            "        -\n"
            "vision            training   a100,h100   gpus       8            none           2"
            "        0\n"
            "vision            training   a100,h100   memory     512Gi        0              1"
            "        0\n"
            "vision/training   training   all         gpus       0.5          4              1"
            "        0\n");

  run = Cli({"policy", "show", "--yaml"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "queues:\n  - name: vision\n");

  run = Cli({"policy", "show", "2", "-o", "json"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(json::parse(run.out)["version"], 2);
}

TEST_F(CliTest, PolicyVersionsTable) {
  server_.Get("/v1/policy/versions", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"active": 3, "versions": [
      {"version": 1, "active": false, "applied_at_ms": 1764444444000, "applied_by": "berthd",
       "comment": "the default policy of a fresh install"},
      {"version": 2, "active": false, "applied_at_ms": 1764444444000, "applied_by": "alice",
       "comment": ""},
      {"version": 3, "active": true, "applied_at_ms": 1764444444000, "applied_by": "bob",
       "comment": "undo", "rolled_back_from": 2, "restores": 1}]})",
                    "application/json");
  });
  CliRun run = Cli({"policy", "versions"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.out,
            "VERSION   ACTIVE   APPLIED   BY       COMMENT\n"
            "1         -        5m ago    berthd   the default policy of a fresh install\n"
            "2         -        5m ago    alice    -\n"
            "3         *        5m ago    bob      undo (restores v1)\n");
}

TEST_F(CliTest, PolicyApplySendsTheFileWithCommentAndToken) {
  std::string body;
  std::string content_type;
  std::string comment;
  std::string user;
  server_.Post("/v1/policy", [&](const httplib::Request& req, httplib::Response& res) {
    body = req.body;
    content_type = req.get_header_value("Content-Type");
    comment = req.get_param_value("comment");
    user = req.get_header_value("Authorization");
    res.status = 201;
    res.set_content(R"({"version": 4})", "application/json");
  });
  CliRun run = Cli({"policy", "apply", "-", "--comment", "more GPUs for vision"},
                   "queues:\n  - name: vision\n");
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "policy v4 applied; see what changed with: berth policy diff\n");
  EXPECT_EQ(body, "queues:\n  - name: vision\n");
  EXPECT_EQ(content_type, "application/yaml");
  EXPECT_EQ(comment, "more GPUs for vision");
  EXPECT_EQ(user, "Bearer alice");

  run = Cli({"policy", "apply", "/nonexistent/policy.yaml"});
  EXPECT_EQ(run.code, kExitError);
  EXPECT_EQ(run.err,
            "berth: cannot read policy '/nonexistent/policy.yaml': No such file or directory\n");
}

TEST_F(CliTest, PolicyApplyRefusalNamesTheField) {
  server_.Post("/v1/policy", [](const httplib::Request&, httplib::Response& res) {
    res.status = 400;
    res.set_content(R"({"error":{"code":"InvalidArgument","field":"queues",)"
                    R"("message":"this policy removes a queue that still holds pending or )"
                    R"j(running jobs: vision/training (2 jobs)"}})j",
                    "application/json");
  });
  CliRun run = Cli({"policy", "apply", "-"}, "queues: []\n");
  EXPECT_EQ(run.code, kExitError);
  EXPECT_EQ(run.err,
            "berth: queues: this policy removes a queue that still holds pending or running "
            "jobs: vision/training (2 jobs)\n");
}

TEST_F(CliTest, PolicyDiffPassesVersionsAndSummarises) {
  std::vector<std::string> queries;
  server_.Get("/v1/policy/diff", [&](const httplib::Request& req, httplib::Response& res) {
    queries.push_back(req.get_param_value("from") + ":" + req.get_param_value("to"));
    res.set_content(R"({"from": 2, "to": 3,
      "diff": "--- policy v2\n+++ policy v3\n@@ -1,1 +1,1 @@\n-a\n+b\n",
      "changes": {"queues_added": ["vision/nlp"], "queues_removed": ["vision/old"],
        "quota_changes": [{"queue": "vision", "resource": "gpus", "field": "guaranteed",
                           "from": 8000, "to": 16000},
                          {"queue": "vision", "resource": "memory", "field": "borrow_limit",
                           "from": null, "to": 1099511627776}],
        "queue_changes": [{"queue": "vision", "field": "pools", "from": [], "to": ["h100"]}],
        "settings_changed": ["priority_classes"]}})",
                    "application/json");
  });
  CliRun run = Cli({"policy", "diff"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.out,
            "--- policy v2\n+++ policy v3\n@@ -1,1 +1,1 @@\n-a\n+b\n"
            "\n"
            "Summary v2 -> v3:\n"
            "  + queue vision/nlp\n"
            "  - queue vision/old\n"
            "  ~ vision gpus guaranteed: 8 -> 16\n"
            "  ~ vision memory borrow_limit: none -> 1Ti\n"
            "  ~ vision pools: all -> h100\n"
            "  ~ priority_classes changed\n");
  ASSERT_EQ(Cli({"policy", "diff", "2"}).code, kExitOk);
  ASSERT_EQ(Cli({"policy", "diff", "1", "3", "-o", "json"}).code, kExitOk);
  EXPECT_EQ(queries, (std::vector<std::string>{":", "2:", "1:3"}));
}

TEST_F(CliTest, PolicyDiffOfAFileIsADryRun) {
  std::string body;
  std::string dry_run;
  server_.Post("/v1/policy", [&](const httplib::Request& req, httplib::Response& res) {
    body = req.body;
    dry_run = req.get_param_value("dry_run");
    res.set_content(R"({"dry_run": true, "from": 3, "to": 4,
      "diff": "--- policy v3\n+++ policy v4 (not applied)\n@@ -1,1 +1,1 @@\n-a\n+b\n",
      "changes": {"queues_added": ["vision/nlp"]}})",
                    "application/json");
  });
  CliRun run = Cli({"policy", "diff", "-f", "-"}, "queues: []\n");
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(dry_run, "true");
  EXPECT_EQ(body, "queues: []\n");
  EXPECT_EQ(run.out,
            "--- policy v3\n+++ policy v4 (not applied)\n@@ -1,1 +1,1 @@\n-a\n+b\n"
            "\n"
            "Summary v3 -> v4 (not applied):\n"
            "  + queue vision/nlp\n");
  // Versions and a file do not mix.
  EXPECT_EQ(Cli({"policy", "diff", "2", "-f", "-"}).code, kExitUsage);
}

TEST_F(CliTest, PolicyRollback) {
  std::string to;
  server_.Post("/v1/policy/rollback", [&](const httplib::Request& req, httplib::Response& res) {
    to = req.get_param_value("to");
    res.status = 201;
    res.set_content(R"({"version": 5, "restores": 2})", "application/json");
  });
  CliRun run = Cli({"policy", "rollback", "2"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.out, "policy v5 applied: rollback to v2\n");
  EXPECT_EQ(to, "2");
}

TEST_F(CliTest, PolicyUsageErrors) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"policy"},
                                                                {"policy", "rollback"},
                                                                {"policy", "rollback", "0"},
                                                                {"policy", "show", "abc"},
                                                                {"policy", "diff", "1", "2", "3"},
                                                                {"policy", "apply"}}) {
    CliRun run = Cli(args);
    EXPECT_EQ(run.code, kExitUsage) << ::testing::PrintToString(args);
    EXPECT_TRUE(run.err.starts_with("berth: ")) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
}

// A canned GET /v1/jobs/12/why answer in the asked language.
json WhyAnswer(const std::string& lang) {
  return json{
      {"id", 12},
      {"name", "resnet50"},
      {"tenant", "default"},
      {"queue", "default"},
      {"state", "Pending"},
      {"lang", lang},
      {"reason",
       {{"code", "NoNodeFits"},
        {"counts",
         {{"gpus_per_replica", 2}, {"node_not_ready", 1}, {"nodes", 3}, {"too_few_free_gpus", 2}}},
        {"detail", ""},
        {"message", lang == "zh"
                        ? "0/3 个节点可以容纳需要 2 块 GPU 的副本：1 个未就绪，2 个空闲 GPU 不足"
                        : "0/3 nodes can take a replica needing 2 GPUs: 1 not ready, 2 too "
                          "few free GPUs"}}},
      {"timeline",
       {{{"time_ms", 1764444444000},
         {"state", "Pending"},
         {"event", "Requeued"},
         {"message", "every replica stopped after it was preempted; waiting to be placed again"},
         {"policy_version", nullptr}}}}};
}

TEST_F(CliTest, WhyPrintsTheSentenceTheNumbersAndTheTimeline) {
  std::vector<std::string> langs;
  server_.Get("/v1/jobs/12/why", [&](const httplib::Request& req, httplib::Response& res) {
    std::string lang = req.has_param("lang") ? req.get_param_value("lang") : "";
    langs.push_back(lang);
    res.set_content(WhyAnswer(lang).dump(), "application/json");
  });
  CliRun run = Cli({"why", "12"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(
      run.out,
      "0/3 nodes can take a replica needing 2 GPUs: 1 not ready, 2 too few free GPUs\n"
      "\n"
      "job:              12 (resnet50)\n"
      "queue:            default/default\n"
      "state:            Pending\n"
      "code:             NoNodeFits\n"
      "per replica:      2 GPUs\n"
      "nodes looked at:  3\n"
      "nodes rejected:   1 not ready, 2 too few free GPUs\n"
      "\n"
      "TIME" +
          std::string(23, ' ') + "EVENT      MESSAGE\n" +
          "2025-11-29T19:27:24.000Z   Requeued   every replica stopped after it was preempted; "
          "waiting to be placed again\n");

  run = Cli({"why", "12", "--lang", "zh"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  // Labels and units in Chinese too, lined up in terminal columns (a Han
  // character takes two).
  EXPECT_TRUE(run.out.starts_with(
      "0/3 个节点可以容纳需要 2 块 GPU 的副本：1 个未就绪，2 个空闲 GPU 不足\n\n"
      "作业:          12 (resnet50)\n"
      "队列:          default/default\n"))
      << run.out;
  EXPECT_NE(run.out.find("\n被排除的节点:  1 个未就绪，2 个空闲 GPU 不足\n"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("\n时间"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("nodes rejected"), std::string::npos) << run.out;

  // The locale picks the default; --lang wins over it.
  locale_ = "zh_CN.UTF-8";
  run = Cli({"why", "12"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  run = Cli({"why", "12", "--lang", "en"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  locale_ = "en_US.UTF-8";
  run = Cli({"why", "12"});
  EXPECT_EQ(langs, (std::vector<std::string>{"en", "zh", "zh", "en", "en"}));

  run = Cli({"why", "12", "-o", "json", "--lang", "zh"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(json::parse(run.out), WhyAnswer("zh"));
}

// The numbers a person reads: GPUs, GiB, durations and clock times, and the
// cause of an unknown start in words, never milli-GPUs or enum numbers.
TEST_F(CliTest, WhyPrintsTheNumbersInAPersonsUnits) {
  json answer = WhyAnswer("en");
  answer["reason"] = {{"code", "OverQuota"},
                      {"counts",
                       {{"requested_mgpu", 500},
                        {"queue_used_mgpu", 6000},
                        {"queue_guaranteed_mgpu", 6000},
                        {"queue_borrow_limit_mgpu", 2000},
                        {"borrowable_now_mgpu", 6000},
                        {"position", 3},
                        {"ahead_jobs", 2},
                        {"ahead_gpus", 12},
                        {"eta_unknown", 3}}},
                      {"detail", "vision/train gpus"},
                      {"message", "over its queue's quota"}};
  server_.Get("/v1/jobs/12/why", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(answer.dump(), "application/json");
  });
  CliRun run = Cli({"why", "12"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  for (const char* line :
       {"asks for:          0.5 GPU\n", "queue uses:        6 GPUs\n",
        "queue guaranteed:  6 GPUs\n", "may borrow:        up to 2 GPUs more\n",
        "borrowable now:    6 GPUs\n",
        "position:          3 in its queue (2 job(s) ahead, "
        "asking for 12 GPUs)\n",
        "estimated start:   unknown: it waits for its queue's quota, not for GPUs\n"}) {
    EXPECT_NE(run.out.find(line), std::string::npos) << line << " in:\n" << run.out;
  }
  EXPECT_EQ(run.out.find("_mgpu"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("eta_unknown"), std::string::npos) << run.out;

  answer["reason"]["code"] = "BehindInQueue";
  answer["reason"]["counts"] = {{"blocked_by", 10},
                                {"not_before_ms", 1'700'007'200'000},
                                {"not_before_in_ms", 8'100'000},
                                {"work_lost_ms", 90'000}};
  run = Cli({"why", "12"});
  EXPECT_NE(run.out.find("not before:    in about 2h 15m, around 2023-11-15 00:13 UTC\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("waits behind:  job 10\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("work lost:     1m 30s\n"), std::string::npos) << run.out;
  // -o json keeps the raw numbers.
  run = Cli({"why", "12", "-o", "json"});
  EXPECT_EQ(json::parse(run.out)["reason"]["counts"]["not_before_in_ms"], 8'100'000);
}

TEST_F(CliTest, WhyErrors) {
  server_.Get("/v1/jobs/99/why", [](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(R"({"error":{"code":"NotFound","message":"job 99 not found"}})",
                    "application/json");
  });
  CliRun run = Cli({"why", "99"});
  EXPECT_EQ(run.code, kExitError);
  EXPECT_EQ(run.err, "berth: job 99 not found\n");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"why"}, {"why", "12", "--lang", "fr"}, {"why", "abc"}}) {
    run = Cli(args);
    EXPECT_EQ(run.code, kExitUsage) << ::testing::PrintToString(args);
    EXPECT_TRUE(run.err.starts_with("berth: ")) << run.err;
  }
}

}  // namespace
}  // namespace berth::cli
