// berthd's side of GPU telemetry in one process: the StartRun order carries
// the job's load profile, and OnTelemetry hands a node's samples to the sink
// under the stream's node name, dropping samples of GPUs the node never
// registered and of runs not active on it.
#include <gtest/gtest.h>

#include <mutex>

#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

// The agent's end of the stream, as the controller sees it: what it was sent.
class RecordingSession final : public AgentSession {
 public:
  explicit RecordingSession(std::string node) : node_(std::move(node)) {}
  bool Send(const berth::v1::ServerMessage& msg) override {
    std::lock_guard lock(mu_);
    sent_.push_back(msg);
    return true;
  }
  const std::string& node() const override { return node_; }
  std::vector<berth::v1::ServerMessage> sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }

 private:
  std::string node_;
  std::mutex mu_;
  std::vector<berth::v1::ServerMessage> sent_;
};

class TelemetryTest : public ApiHarness {
 protected:
  // Registers node `name` with two H100s and returns its session.
  std::shared_ptr<RecordingSession> Register(const std::string& name) {
    berth::v1::Register reg;
    auto* node = reg.mutable_node();
    node->set_name(name);
    node->set_hostname(name);
    node->set_cpus(16);
    node->set_memory_bytes(64ULL << 30);
    node->set_gpu_provider("simulated");
    for (std::uint32_t i = 0; i < 2; ++i) {
      auto* g = node->add_gpus();
      g->set_index(i);
      g->set_uuid(name + "-gpu-" + std::to_string(i));
      g->set_model("H100-80GB");
      g->set_memory_bytes(80ULL << 30);
      g->set_health("healthy");
      g->set_numa_node(-1);
    }
    auto session = std::make_shared<RecordingSession>(name);
    EXPECT_TRUE(controller_->OnRegister(reg, session).has_value());
    return session;
  }

  static berth::v1::GpuSample Sample(std::uint32_t gpu, std::vector<std::string> runs,
                                     std::uint32_t util) {
    berth::v1::GpuSample s;
    s.set_at_ms(1'000);
    s.set_gpu(gpu);
    s.set_uuid("u" + std::to_string(gpu));
    s.set_util_pct(util);
    s.set_memory_used_bytes(1ULL << 30);
    s.set_memory_total_bytes(80ULL << 30);
    s.set_temperature_c(45);
    s.set_power_mw(250'000);
    s.set_last_xid(0);
    for (auto& r : runs) s.add_run_ids(r);
    return s;
  }

  std::vector<model::GpuSample> received_;
};

TEST_F(TelemetryTest, StartOrdersCarryTheLoadAndSamplesReachTheSinkFiltered) {
  controller_->set_telemetry_sink([this](std::span<const model::GpuSample> samples) {
    received_.insert(received_.end(), samples.begin(), samples.end());
  });
  auto n1 = Register("n1");
  auto job = Post("/v1/jobs",
                  "name: t\ncommand: [sleep, '60']\nresources: {gpus: 1}\n"
                  "load: {pattern: periodic, utilization: 30, memory: 20%, period: 2m}\n");
  ASSERT_EQ(job.status, 201) << job.body.dump();
  ASSERT_TRUE(controller_->RunPass().has_value());
  std::string run_id;
  std::uint32_t gpu = 0;
  for (const auto& m : n1->sent()) {
    if (!m.has_start_run()) continue;
    const auto& o = m.start_run();
    run_id = o.run_id();
    ASSERT_EQ(o.gpu_indices_size(), 1);
    gpu = o.gpu_indices(0);
    ASSERT_TRUE(o.has_load());
    EXPECT_EQ(o.load().pattern(), berth::v1::LoadProfile::PERIODIC);
    EXPECT_EQ(o.load().util_pct(), 30u);
    EXPECT_EQ(o.load().memory_pct(), 20u);
    EXPECT_EQ(o.load().period_ms(), 120'000);
    EXPECT_EQ(o.load().idle_after_ms(), 0);
  }
  ASSERT_FALSE(run_id.empty()) << "no StartRun was sent";
  const std::uint32_t other = 1 - gpu;

  berth::v1::GpuTelemetry t;
  *t.add_samples() = Sample(gpu, {run_id}, 31);
  *t.add_samples() = Sample(other, {}, 0);
  *t.add_samples() = Sample(7, {}, 0);                // never registered
  *t.add_samples() = Sample(other, {"999.0.1"}, 50);  // no such run
  controller_->OnTelemetry("n1", t);
  ASSERT_EQ(received_.size(), 2u);
  EXPECT_EQ(received_[0].node, "n1");
  EXPECT_EQ(received_[0].gpu, gpu);
  EXPECT_EQ(received_[0].util_pct, 31u);
  EXPECT_EQ(received_[0].temperature_c, 45);
  EXPECT_EQ(received_[0].power_mw, 250'000u);
  EXPECT_EQ(received_[0].memory_used_bytes, 1ULL << 30);
  EXPECT_EQ(received_[0].run_ids, std::vector<std::string>{run_id});
  EXPECT_EQ(received_[1].gpu, other);
  EXPECT_TRUE(received_[1].run_ids.empty());
  auto counts = controller_->telemetry_counts();
  EXPECT_EQ(counts.accepted, 2u);
  EXPECT_EQ(counts.dropped_unknown_gpu, 1u);
  EXPECT_EQ(counts.dropped_inactive_run, 1u);

  // Another node may not report on n1's run, nor n1's GPUs count for it.
  Register("n2");
  received_.clear();
  berth::v1::GpuTelemetry spoof;
  *spoof.add_samples() = Sample(0, {run_id}, 99);
  *spoof.add_samples() = Sample(1, {}, 3);
  controller_->OnTelemetry("n2", spoof);
  ASSERT_EQ(received_.size(), 1u);
  EXPECT_EQ(received_[0].node, "n2");
  EXPECT_EQ(received_[0].util_pct, 3u);
  EXPECT_EQ(controller_->telemetry_counts().dropped_inactive_run, 2u);
  // A node that never registered has no GPUs to report on.
  controller_->OnTelemetry("ghost", spoof);
  EXPECT_EQ(controller_->telemetry_counts().dropped_unknown_gpu, 3u);
}

TEST_F(TelemetryTest, WithoutASinkSamplesAreDroppedAndCounted) {
  Register("n1");
  berth::v1::GpuTelemetry t;
  *t.add_samples() = Sample(0, {}, 0);
  *t.add_samples() = Sample(1, {}, 0);
  controller_->OnTelemetry("n1", t);
  auto counts = controller_->telemetry_counts();
  EXPECT_EQ(counts.accepted, 0u);
  EXPECT_EQ(counts.dropped_no_sink, 2u);
}

TEST_F(TelemetryTest, StartOrdersCarryTheTenantsIdentityAndContainerNetwork) {
  auto n1 = Register("n1");
  auto policy = Post("/v1/policy", R"(queues:
  - name: default
    children: [{name: default}]
tenants:
  default:
    run_as: {uid: 20001, gid: 20002}
    container_network: none
)",
                     "application/yaml");
  ASSERT_EQ(policy.status, 201) << policy.body.dump();
  auto job = Post("/v1/jobs", "name: t\ncommand: [sleep, '60']\nresources: {gpus: 1}\n");
  ASSERT_EQ(job.status, 201) << job.body.dump();
  ASSERT_TRUE(controller_->RunPass().has_value());
  int orders = 0;
  for (const auto& m : n1->sent()) {
    if (!m.has_start_run()) continue;
    ++orders;
    EXPECT_EQ(m.start_run().tenant(), "default");
    EXPECT_EQ(m.start_run().run_as().uid(), 20001U);
    EXPECT_EQ(m.start_run().container_network(), "none");
  }
  EXPECT_EQ(orders, 1);
}

}  // namespace
}  // namespace berth::server
