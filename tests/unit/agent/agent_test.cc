// The agent against a fake berthd on an in-process gRPC channel (no network):
// registration, orders, the order of reports, re-registration after a lost
// stream, jobs that outlive the agent, and fencing when berthd stays away.
#include "agent/agent.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "agent/sim_cluster.h"
#include "agent/sim_provider.h"
#include "test_util.h"

namespace berth::agent {
namespace {

using testing::TempDir;

class FakeBerthd final : public v1::AgentService::Service {
 public:
  grpc::Status Connect(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::ServerMessage, v1::AgentMessage>* stream) override {
    if (refusing_) {
      ++refused_;
      return {grpc::StatusCode::UNAVAILABLE, "berthd is away"};
    }
    {
      std::lock_guard lock(mu_);
      stream_ = stream;
      ctx_ = ctx;
    }
    v1::AgentMessage msg;
    while (stream->Read(&msg)) {
      std::lock_guard lock(mu_);
      if (msg.has_register_()) {
        ++registrations_;
        v1::ServerMessage reply;
        reply.mutable_registered()->set_node_name(msg.register_().node().name());
        reply.mutable_registered()->set_lease_ms(3000);
        reply.mutable_registered()->set_heartbeat_interval_ms(50);
        stream->Write(reply);
      }
      received_.push_back(msg);
      cv_.notify_all();
    }
    std::lock_guard lock(mu_);
    // Only its own: a restarted agent's new stream may have come in before
    // this old one ended, and must stay the one Send writes to.
    if (stream_ == stream) {
      stream_ = nullptr;
      ctx_ = nullptr;
    }
    return grpc::Status::OK;
  }

  void Send(const v1::ServerMessage& msg) {
    std::lock_guard lock(mu_);
    ASSERT_NE(stream_, nullptr);
    stream_->Write(msg);
  }

  void Drop() {
    std::lock_guard lock(mu_);
    if (ctx_) ctx_->TryCancel();
  }

  // While refusing, every connection ends at once, before registration: an
  // agent cut off from berthd.
  void Refuse(bool refuse) { refusing_ = refuse; }
  int refused() const { return refused_; }

  // Waits until `pred(received)` holds; returns false after 15 s (generous:
  // the suite runs beside compilers and under sanitizers).
  template <typename Pred>
  bool Await(Pred pred) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(15), [&] { return pred(received_); });
  }

  std::vector<v1::AgentMessage> Received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  int registrations() {
    std::lock_guard lock(mu_);
    return registrations_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  grpc::ServerReaderWriter<v1::ServerMessage, v1::AgentMessage>* stream_ = nullptr;
  grpc::ServerContext* ctx_ = nullptr;
  std::vector<v1::AgentMessage> received_;
  int registrations_ = 0;
  std::atomic<bool> refusing_ = false;
  std::atomic<int> refused_ = 0;
};

bool HasExit(const std::vector<v1::AgentMessage>& msgs, const std::string& run_id) {
  return std::any_of(msgs.begin(), msgs.end(), [&](const v1::AgentMessage& m) {
    return m.has_run_exited() && m.run_exited().run_id() == run_id;
  });
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&berthd_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    agent_.reset();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  void StartAgent(std::int64_t telemetry_interval_ms = 10'000, const Clock* clock = nullptr,
                  std::optional<std::int64_t> fence_grace_ms = model::kDefaultFenceGraceMs,
                  std::optional<std::string> podman_search_path = std::nullopt) {
    model::NodeInfo base;
    base.name = "node-a";
    base.hostname = "node-a.example";
    base.labels = {{"pool", "test"}};
    base.cpus = 4;
    base.memory_bytes = 16ULL << 30;
    model::NodeInfo sim = base;
    sim.driver_version = "sim";
    sim.cuda_version = "12.4";
    sim.gpus = SimulatedGpus("node-a", "H100-80GB", 80ULL << 30, 2, {{0, 1}});
    AgentOptions options;
    options.data_dir = dir_.path();
    options.shim_path = BERTH_SHIM_PATH;
    options.poll_interval_ms = 10;
    options.reconnect_backoff_ms = 20;
    options.telemetry_interval_ms = telemetry_interval_ms;
    // The stream protocol is what these tests are about; confined runs (run
    // identities, cgroups) are tested in confine_test.cc.
    options.single_user = true;
    options.fence_grace_ms = fence_grace_ms;
    options.podman_search_path = std::move(podman_search_path);
    agent_ = std::make_unique<Agent>(options, base, std::make_unique<SimulatedProvider>(sim),
                                     server_->InProcessChannel(grpc::ChannelArguments()),
                                     clock != nullptr ? *clock : clock_);
    agent_->Start();
  }

  void StartRun(const std::string& id, std::vector<std::string> command,
                const v1::LoadProfile* load = nullptr) {
    v1::ServerMessage msg;
    auto* m = msg.mutable_start_run();
    m->set_run_id(id);
    for (auto& c : command) m->add_command(c);
    m->add_gpu_indices(1);
    m->add_gpu_uuids("SIM-node-a-1");
    m->set_grace_ms(2000);
    if (load != nullptr) *m->mutable_load() = *load;
    berthd_.Send(msg);
  }

  TempDir dir_;
  SystemClock clock_;
  ManualClock manual_clock_;  // for tests that pass it to StartAgent
  FakeBerthd berthd_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, RegistersInventoryThenReportsStartLogAndExitInOrder) {
  StartAgent();
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return !m.empty(); }));
  const v1::AgentMessage first = berthd_.Received().front();
  ASSERT_TRUE(first.has_register_());
  const auto& node = first.register_().node();
  EXPECT_EQ(node.name(), "node-a");
  EXPECT_EQ(node.hostname(), "node-a.example");
  EXPECT_EQ(node.labels().at("pool"), "test");
  EXPECT_EQ(node.gpu_provider(), "simulated");
  EXPECT_EQ(node.agent_version(), "0.1.0");
  EXPECT_EQ(node.driver_version(), "sim");
  ASSERT_EQ(node.gpus_size(), 2);
  EXPECT_EQ(node.gpus(1).uuid(), "SIM-node-a-1");
  EXPECT_EQ(node.gpus(1).health(), "healthy");
  EXPECT_EQ(first.register_().runs_size(), 0);

  StartRun("r1", {"sh", "-c", "echo \"hi $CUDA_VISIBLE_DEVICES\""});
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return HasExit(m, "r1"); }));
  std::vector<std::string> order;
  std::string log;
  for (const auto& m : berthd_.Received()) {
    if (m.has_run_started() && m.run_started().run_id() == "r1") order.push_back("started");
    if (m.has_log_chunk() && m.log_chunk().run_id() == "r1") {
      order.push_back("log");
      EXPECT_EQ(m.log_chunk().offset(), log.size());
      log += m.log_chunk().data();
    }
    if (m.has_run_exited() && m.run_exited().run_id() == "r1") {
      order.push_back("exited");
      EXPECT_EQ(m.run_exited().exit_code(), 0);
      EXPECT_GT(m.run_exited().ended_at_ms(), 0);
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"started", "log", "exited"}));
  EXPECT_EQ(log, "hi 1\n");
  ASSERT_TRUE(berthd_.Await([](const auto& msgs) {
    return std::any_of(msgs.begin(), msgs.end(), [](const auto& m) { return m.has_heartbeat(); });
  }));

  v1::ServerMessage ack;
  ack.mutable_ack_exit()->set_run_id("r1");
  berthd_.Send(ack);
  EXPECT_TRUE(testing::WaitFor([&] { return !std::filesystem::exists(dir_.path() / "runs/r1"); }));
}

// berthd asked to stop a run whose StartRun never reached this agent: the
// agent answers with the run's exit marked never started (so berthd can
// settle it), while a run it does hold is stopped and reported as usual.
TEST_F(AgentTest, AStopForARunNeverStartedHereIsReportedAsNeverStarted) {
  StartAgent();
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return !m.empty(); }));
  StartRun("held", {"sleep", "30"});
  ASSERT_TRUE(berthd_.Await([](const auto& msgs) {
    return std::any_of(msgs.begin(), msgs.end(), [](const auto& m) {
      return m.has_run_started() && m.run_started().run_id() == "held";
    });
  }));
  for (const std::string id : {"held", "ghost"}) {
    v1::ServerMessage stop;
    stop.mutable_stop_run()->set_run_id(id);
    stop.mutable_stop_run()->set_reason("preempted");
    stop.mutable_stop_run()->set_grace_ms(100);
    berthd_.Send(stop);
  }
  ASSERT_TRUE(
      berthd_.Await([](const auto& m) { return HasExit(m, "ghost") && HasExit(m, "held"); }));
  for (const auto& m : berthd_.Received()) {
    if (!m.has_run_exited()) continue;
    const auto& e = m.run_exited();
    if (e.run_id() == "ghost") {
      EXPECT_TRUE(e.never_started());
      EXPECT_EQ(e.stopped_for(), "preempted");
      EXPECT_EQ(e.started_at_ms(), 0);
      EXPECT_EQ(e.exit_code(), 0);
    } else {
      EXPECT_FALSE(e.never_started()) << "a run that ran must never be reported as never started";
      EXPECT_GT(e.started_at_ms(), 0);
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "runs/ghost"))
      << "answering the stop must not create the run";
}

TEST_F(AgentTest, UnacknowledgedExitIsReportedAgainAfterReconnecting) {
  StartAgent();
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return !m.empty(); }));
  StartRun("r2", {"sh", "-c", "exit 3"});
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return HasExit(m, "r2"); }));
  berthd_.Drop();
  ASSERT_TRUE(testing::WaitFor([&] { return berthd_.registrations() >= 2; }));
  v1::Register again;
  for (const auto& m : berthd_.Received()) {
    if (m.has_register_()) again = m.register_();
  }
  ASSERT_EQ(again.runs_size(), 1);
  EXPECT_EQ(again.runs(0).run_id(), "r2");
  // Registration shows it running: its exit follows its log, from the
  // offset berthd names in Registered ...
  EXPECT_EQ(again.runs(0).phase(), v1::RunStatus::RUNNING);
  // ... as a RunExited message on the new stream, until acknowledged.
  ASSERT_TRUE(berthd_.Await([](const auto& msgs) {
    int exits = 0;
    for (const auto& m : msgs) exits += m.has_run_exited() && m.run_exited().run_id() == "r2";
    return exits >= 2;
  }));
  v1::ServerMessage ack;
  ack.mutable_ack_exit()->set_run_id("r2");
  berthd_.Send(ack);
  EXPECT_TRUE(testing::WaitFor([&] { return !std::filesystem::exists(dir_.path() / "runs/r2"); }));
}

TEST_F(AgentTest, JobsOutliveTheAgentAndTheNextAgentReattaches) {
  StartAgent();
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return !m.empty(); }));
  StartRun("r3", {"sleep", "30"});
  std::int64_t pid = 0;
  ASSERT_TRUE(berthd_.Await([&](const auto& msgs) {
    for (const auto& m : msgs) {
      if (m.has_run_started() && m.run_started().run_id() == "r3") pid = m.run_started().pid();
    }
    return pid > 0;
  }));
  agent_->Stop();
  agent_.reset();
  EXPECT_EQ(::kill(static_cast<pid_t>(pid), 0), 0) << "stopping the agent killed its job";

  StartAgent();
  ASSERT_TRUE(testing::WaitFor([&] { return berthd_.registrations() >= 2; }));
  v1::Register again;
  for (const auto& m : berthd_.Received()) {
    if (m.has_register_()) again = m.register_();
  }
  ASSERT_EQ(again.runs_size(), 1);
  EXPECT_EQ(again.runs(0).phase(), v1::RunStatus::RUNNING);
  EXPECT_EQ(again.runs(0).pid(), pid);

  v1::ServerMessage stop;
  stop.mutable_stop_run()->set_run_id("r3");
  stop.mutable_stop_run()->set_reason("cancelled");
  stop.mutable_stop_run()->set_grace_ms(1000);
  berthd_.Send(stop);
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return HasExit(m, "r3"); }));
  for (const auto& m : berthd_.Received()) {
    if (!m.has_run_exited()) continue;
    EXPECT_EQ(m.run_exited().signal(), SIGTERM);
    EXPECT_EQ(m.run_exited().stopped_for(), "cancelled");
  }
}

std::int64_t StartedPid(const std::vector<v1::AgentMessage>& msgs, const std::string& run_id) {
  for (const auto& m : msgs) {
    if (m.has_run_started() && m.run_started().run_id() == run_id) return m.run_started().pid();
  }
  return 0;
}

// Cut off from berthd (on a manual clock), the agent leaves its run alone
// until the lease (3 s, from the fake's Registered) plus its fence grace
// have passed since the last contact, then stops it with reason "fenced";
// back in contact, it reports the exit as usual.
TEST_F(AgentTest, ACutOffAgentFencesItsRunsAfterLeasePlusGraceAndReportsThemWhenBack) {
  ManualClock& clock = manual_clock_;
  StartAgent(10'000, &clock, /*fence_grace_ms=*/1'000);
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return !m.empty(); }));
  StartRun("fenced", {"sleep", "30"});
  std::int64_t pid = 0;
  ASSERT_TRUE(
      berthd_.Await([&](const auto& msgs) { return (pid = StartedPid(msgs, "fenced")) > 0; }));

  berthd_.Refuse(true);
  berthd_.Drop();
  // Out of contact from here: its stream is gone and it is being refused.
  ASSERT_TRUE(testing::WaitFor([&] { return berthd_.refused() > 0; }));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "contact.json"))
      << "the contact is kept for a restarted agent";
  clock.Advance(3'000 + 1'000 - 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // many supervision ticks
  EXPECT_EQ(::kill(static_cast<pid_t>(pid), 0), 0) << "fenced before the fence time";
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "runs/fenced/stop.json"));

  clock.Advance(100);
  ASSERT_TRUE(testing::WaitFor([&] { return ::kill(static_cast<pid_t>(pid), 0) != 0; }))
      << "still running after the fence time";

  const auto before = berthd_.registrations();
  berthd_.Refuse(false);
  ASSERT_TRUE(testing::WaitFor([&] { return berthd_.registrations() > before; }));
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return HasExit(m, "fenced"); }));
  for (const auto& m : berthd_.Received()) {
    if (!m.has_run_exited() || m.run_exited().run_id() != "fenced") continue;
    EXPECT_EQ(m.run_exited().stopped_for(), "fenced");
    EXPECT_EQ(m.run_exited().signal(), SIGTERM);
    EXPECT_TRUE(m.run_exited().clean_stop()) << "it ended within its grace";
  }
}

// Agents inside berthd never fence: they cannot be cut off from it.
TEST_F(AgentTest, AnAgentWithoutFencingLeavesItsRunsAlone) {
  ManualClock& clock = manual_clock_;
  StartAgent(10'000, &clock, std::nullopt);
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return !m.empty(); }));
  StartRun("kept", {"sleep", "30"});
  std::int64_t pid = 0;
  ASSERT_TRUE(
      berthd_.Await([&](const auto& msgs) { return (pid = StartedPid(msgs, "kept")) > 0; }));
  berthd_.Refuse(true);
  berthd_.Drop();
  ASSERT_TRUE(testing::WaitFor([&] { return berthd_.refused() > 0; }));
  clock.Advance(3'600'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(::kill(static_cast<pid_t>(pid), 0), 0);
  ::kill(static_cast<pid_t>(pid), SIGKILL);
}

// The last telemetry message whose GPU 1 sample satisfies `pred`, if any.
template <typename Pred>
std::optional<v1::GpuTelemetry> TelemetryWhere(const std::vector<v1::AgentMessage>& msgs,
                                               Pred pred) {
  std::optional<v1::GpuTelemetry> found;
  for (const auto& m : msgs) {
    if (m.has_telemetry() && m.telemetry().samples_size() == 2 && pred(m.telemetry().samples(1))) {
      found = m.telemetry();
    }
  }
  return found;
}

TEST_F(AgentTest, StreamsTelemetryFromTheRunningJobsLoadProfile) {
  StartAgent(50);
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return !m.empty(); }));
  // Before any run: every GPU reads idle, with no runs.
  ASSERT_TRUE(berthd_.Await([](const auto& msgs) {
    return TelemetryWhere(msgs, [](const v1::GpuSample& s) { return s.run_ids_size() == 0; })
        .has_value();
  }));
  v1::LoadProfile load;
  load.set_pattern(v1::LoadProfile::STEADY);
  load.set_util_pct(30);
  load.set_memory_pct(25);
  StartRun("t1", {"sleep", "30"}, &load);
  auto busy = [](const v1::GpuSample& s) { return s.run_ids_size() == 1 && s.run_ids(0) == "t1"; };
  ASSERT_TRUE(
      berthd_.Await([&](const auto& msgs) { return TelemetryWhere(msgs, busy).has_value(); }));
  auto check = [](const v1::GpuTelemetry& t) {
    const auto& idle = t.samples(0);
    EXPECT_EQ(idle.gpu(), 0u);
    EXPECT_EQ(idle.util_pct(), 0u);
    EXPECT_EQ(idle.run_ids_size(), 0);
    const auto& s = t.samples(1);
    EXPECT_EQ(s.gpu(), 1u);
    EXPECT_EQ(s.uuid(), "SIM-node-a-1");
    EXPECT_GE(s.util_pct(), 28u);
    EXPECT_LE(s.util_pct(), 32u);
    EXPECT_EQ(s.memory_total_bytes(), 80ULL << 30);
    EXPECT_EQ(s.memory_used_bytes(), 20ULL << 30);  // 25% of 80 GiB
    EXPECT_EQ(s.temperature_c(), 30 + static_cast<std::int32_t>(s.util_pct() / 2));
    EXPECT_GT(s.at_ms(), 0);
  };
  check(*TelemetryWhere(berthd_.Received(), busy));

  // The profile is part of the run's durable order: a restarted agent
  // reports the same load for the job it reattaches to.
  agent_->Stop();
  agent_.reset();
  const std::size_t before = berthd_.Received().size();
  StartAgent(50);
  ASSERT_TRUE(berthd_.Await([&](const auto& msgs) {
    std::vector<v1::AgentMessage> newer(msgs.begin() + static_cast<std::ptrdiff_t>(before),
                                        msgs.end());
    return TelemetryWhere(newer, busy).has_value();
  }));
  {
    auto all = berthd_.Received();
    std::vector<v1::AgentMessage> newer(all.begin() + static_cast<std::ptrdiff_t>(before),
                                        all.end());
    check(*TelemetryWhere(newer, busy));
  }

  // Once the job has exited its GPU reads idle again.
  v1::ServerMessage stop;
  stop.mutable_stop_run()->set_run_id("t1");
  stop.mutable_stop_run()->set_reason("cancelled");
  stop.mutable_stop_run()->set_grace_ms(1000);
  berthd_.Send(stop);
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return HasExit(m, "t1"); }));
  std::size_t exited_at = berthd_.Received().size();
  ASSERT_TRUE(berthd_.Await([&](const auto& msgs) {
    std::vector<v1::AgentMessage> newer(msgs.begin() + static_cast<std::ptrdiff_t>(exited_at),
                                        msgs.end());
    return TelemetryWhere(newer,
                          [](const v1::GpuSample& s) {
                            return s.run_ids_size() == 0 && s.util_pct() == 0 &&
                                   s.memory_used_bytes() == 0;
                          })
        .has_value();
  }));
}

TEST_F(AgentTest, TelemetryIntervalZeroSendsNone) {
  StartAgent(0);
  ASSERT_TRUE(berthd_.Await([](const auto& msgs) {
    return std::count_if(msgs.begin(), msgs.end(),
                         [](const auto& m) { return m.has_heartbeat(); }) >= 4;
  }));
  for (const auto& m : berthd_.Received()) EXPECT_FALSE(m.has_telemetry());
}

// The container runtimes the agent told berthd after registering, in order.
std::vector<std::string> RuntimeChanges(const std::vector<v1::AgentMessage>& msgs) {
  std::vector<std::string> out;
  for (const auto& m : msgs) {
    if (m.has_container_runtime()) out.push_back(m.container_runtime().container_runtime());
  }
  return out;
}

std::size_t Heartbeats(const std::vector<v1::AgentMessage>& msgs) {
  return static_cast<std::size_t>(
      std::count_if(msgs.begin(), msgs.end(), [](const auto& m) { return m.has_heartbeat(); }));
}

// podman installed on the node while the agent runs, then removed: the agent
// tells berthd each change once, between heartbeats, on the same stream;
// heartbeats with nothing changed say nothing about the runtime.
TEST_F(AgentTest, PodmanAppearingOrLeavingIsReportedOnceEachWithoutReconnecting) {
  const auto bin = dir_.path() / "later-bin";
  std::filesystem::create_directories(bin);
  StartAgent(10'000, nullptr, model::kDefaultFenceGraceMs, bin.string());
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return Heartbeats(m) >= 3; }));
  auto msgs = berthd_.Received();
  ASSERT_TRUE(msgs.front().has_register_());
  EXPECT_EQ(msgs.front().register_().node().container_runtime(), "");
  EXPECT_TRUE(RuntimeChanges(msgs).empty());

  {
    std::ofstream podman(bin / "podman");
    podman << "#!/bin/sh\nexit 0\n";
  }
  std::filesystem::permissions(bin / "podman", std::filesystem::perms::owner_all);
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return RuntimeChanges(m).size() == 1; }));
  const std::size_t heartbeats_then = Heartbeats(berthd_.Received());
  // Three more heartbeats with podman still there: no second report.
  ASSERT_TRUE(berthd_.Await([&](const auto& m) { return Heartbeats(m) >= heartbeats_then + 3; }));
  EXPECT_EQ(RuntimeChanges(berthd_.Received()), (std::vector<std::string>{"podman"}));

  std::filesystem::remove(bin / "podman");
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return RuntimeChanges(m).size() == 2; }));
  EXPECT_EQ(RuntimeChanges(berthd_.Received()), (std::vector<std::string>{"podman", ""}));
  EXPECT_EQ(berthd_.registrations(), 1);  // all on the first stream
}

// A podman file that is not executable is no runtime: nothing to report.
TEST_F(AgentTest, APodmanThatCannotBeRunIsNoRuntime) {
  const auto bin = dir_.path() / "later-bin";
  std::filesystem::create_directories(bin);
  {
    std::ofstream podman(bin / "podman");
    podman << "not a program\n";
  }
  std::filesystem::permissions(bin / "podman", std::filesystem::perms::owner_read);
  StartAgent(10'000, nullptr, model::kDefaultFenceGraceMs, bin.string());
  ASSERT_TRUE(berthd_.Await([](const auto& m) { return Heartbeats(m) >= 3; }));
  auto msgs = berthd_.Received();
  EXPECT_EQ(msgs.front().register_().node().container_runtime(), "");
  EXPECT_TRUE(RuntimeChanges(msgs).empty());
}

TEST(AgentTargetTest, OneAddressIsKeptAndSeveralBecomeOneTargetOfEveryBerthd) {
  EXPECT_EQ(AgentTarget("berth.example:7461").value(), "berth.example:7461");
  EXPECT_EQ(AgentTarget("10.0.0.1:7461,10.0.0.2:7461,10.0.0.3:7471").value(),
            "ipv4:10.0.0.1:7461,10.0.0.2:7461,10.0.0.3:7471");
  EXPECT_EQ(AgentTarget("[fd00::1]:7461,[fd00::2]:7461").value(),
            "ipv6:[fd00::1]:7461,[fd00::2]:7461");
  for (const char* bad : {"", "a.example:7461,b.example:7461", "10.0.0.1:7461,10.0.0.2",
                          "10.0.0.1:7461,10.0.0.2:99999", "10.0.0.1:7461,[fd00::2]:7461",
                          "10.0.0.1:7461,,10.0.0.2:7461"}) {
    auto target = AgentTarget(bad);
    ASSERT_FALSE(target.has_value()) << bad;
    EXPECT_EQ(target.error().field, "server") << bad;
  }
}

}  // namespace
}  // namespace berth::agent
