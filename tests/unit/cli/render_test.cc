// The human views: exact text for the common cases, and no crash (only "-")
// when berthd leaves keys out or sends null.
#include "cli/render.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

constexpr std::int64_t kRenderNow = 1'764'444'744'000;  // 5 minutes after kSubmitted
constexpr std::int64_t kSubmitted = 1'764'444'444'000;

json PendingJob() {
  return json::parse(R"({
    "id": 12, "name": "resnet50", "tenant": "default", "queue": "default", "state": "Pending",
    "reason": {"code": "NoNodeFits", "message": "no node has 4 free H100-80GB GPUs"},
    "submitted_at_ms": 1764444444000, "started_at_ms": null, "finished_at_ms": null,
    "exit_code": null, "signal": null,
    "spec": {"name": "resnet50", "command": ["python3", "train.py"], "replicas": 2,
             "resources": {"gpus": 4, "gpu_model": "H100-80GB", "gpu_memory_bytes": 85899345920,
                           "cpu_millis": 16000, "memory_bytes": 137438953472},
             "priority": "normal", "max_runtime_ms": 43200000},
    "placement": [],
    "timeline": [{"time_ms": 1764444444000, "state": "Pending", "event": "Submitted",
                  "message": "submitted by CLI"}]})");
}

TEST(RenderJobs, OneRowPerJob) {
  json response = {{"jobs", json::array({PendingJob()})}};
  EXPECT_EQ(RenderJobs(response, kRenderNow),
            "ID   NAME       TENANT    QUEUE     STATE     GPUS   AGE   REASON\n"
            "12   resnet50   default   default   Pending   2x4    5m    "
            "no node has 4 free H100-80GB GPUs\n");
}

TEST(RenderJobs, LongReasonsAreTruncated) {
  json job = PendingJob();
  job["reason"]["message"] = std::string(200, 'r');
  std::string text = RenderJobs({{"jobs", {job}}}, kRenderNow);
  EXPECT_NE(text.find(std::string(57, 'r') + "...\n"), std::string::npos);
  EXPECT_EQ(text.find(std::string(58, 'r')), std::string::npos);
}

TEST(RenderJobs, MissingKeysRenderAsDash) {
  json response = {{"jobs", {{{"id", 3}, {"state", "Running"}, {"spec", nullptr}}}}};
  EXPECT_EQ(RenderJobs(response, kRenderNow),
            "ID   NAME   TENANT   QUEUE   STATE     GPUS   AGE   REASON\n"
            "3    -      -        -       Running   -      -     -\n");
}

TEST(RenderJobs, EmptyListSaysSo) {
  EXPECT_EQ(RenderJobs({{"jobs", json::array()}}, kRenderNow), "No jobs found.\n");
  EXPECT_EQ(RenderJobs(json::object(), kRenderNow), "No jobs found.\n");
}

TEST(JobGpus, ReplicasTimesGpus) {
  EXPECT_EQ(JobGpus(PendingJob()), "2x4");
  EXPECT_EQ(JobGpus({{"spec", {{"resources", {{"gpus", 1}}}}}}), "1x1");
  EXPECT_EQ(JobGpus({{"spec",
                      {{"replicas", 2}, {"resources", {{"gpus", 0}, {"gpu_share_millis", 250}}}}}}),
            "2x0.25");
  EXPECT_EQ(JobGpus({{"spec", {{"resources", {{"gpus", 0}, {"gpu_share_bytes", 21474836480}}}}}}),
            "1x20Gi");
  EXPECT_EQ(JobGpus(json::object()), "-");
}

TEST(GpuHolder, JobIdNameAndReplica) {
  EXPECT_EQ(GpuHolder({{"job", {{"id", 12}, {"name", "resnet50"}, {"replica", 0}}}}),
            "12 resnet50/r0");
  EXPECT_EQ(GpuHolder({{"job", nullptr}}), "-");
  EXPECT_EQ(GpuHolder(json::object()), "-");
  EXPECT_EQ(GpuHolder({{"job", "another tenant"}}), "another tenant");
  EXPECT_EQ(GpuHolder({{"job", {{"tenant", "team-b"}}}}), "team-b");
  EXPECT_EQ(GpuHolder({{"job", json::object()}}), "(held)");
}

TEST(RenderGpus, FreeAndHeldGpus) {
  json response = json::parse(R"({"gpus": [
    {"node": "gpu-a1", "index": 0, "model": "H100-80GB", "memory_bytes": 85899345920,
     "health": "Healthy", "health_detail": "", "job": {"id": 12, "name": "resnet50", "replica": 0}},
    {"node": "gpu-a1", "index": 1, "model": "H100-80GB", "memory_bytes": 85899345920,
     "health": "Unhealthy", "health_detail": "XID 79", "job": null}]})");
  EXPECT_EQ(RenderGpus(response),
            "NODE     INDEX   MODEL       MEMORY   HEALTH               SHARING   JOB\n"
            "gpu-a1   0       H100-80GB   80Gi     Healthy              -         12 resnet50/r0\n"
            "gpu-a1   1       H100-80GB   80Gi     Unhealthy (XID 79)   -         -\n");
}

TEST(RenderGpus, ACordonedGpuAddsTheCordonColumn) {
  json response = json::parse(R"({"gpus": [
    {"node": "gpu-a1", "index": 0, "model": "H100-80GB", "memory_bytes": 85899345920,
     "health": "Healthy", "job": null, "cordon": null},
    {"node": "gpu-a1", "index": 1, "model": "H100-80GB", "memory_bytes": 85899345920,
     "health": "Unhealthy", "health_detail": "Xid 79", "job": null,
     "cordon": {"kind": "cordon", "by": "berth", "reason": "Xid 79", "automatic": true}}]})");
  EXPECT_EQ(
      RenderGpus(response),
      "NODE     INDEX   MODEL       MEMORY   HEALTH               CORDON                      "
      "SHARING   JOB\n"
      "gpu-a1   0       H100-80GB   80Gi     Healthy              -                           "
      "-         -\n"
      "gpu-a1   1       H100-80GB   80Gi     Unhealthy (Xid 79)   cordoned by berth: Xid 79   "
      "-         -\n");
}

TEST(RenderNodes, ACordonedOrDrainingNodeSaysSo) {
  json response = json::parse(R"({"nodes": [
    {"name": "a", "state": "Ready", "gpus_free": 0, "gpus_total": 8, "models": ["H100-80GB"],
     "cpus": 16, "memory_bytes": 68719476736, "gpu_provider": "simulated",
     "last_heartbeat_ms": 1000, "cordon": {"kind": "drain", "by": "ops", "reason": "reboot"}},
    {"name": "b", "state": "Ready", "gpus_free": 8, "gpus_total": 8, "models": ["H100-80GB"],
     "cpus": 16, "memory_bytes": 68719476736, "gpu_provider": "simulated",
     "last_heartbeat_ms": 1000, "cordon": {"kind": "cordon", "by": "ops", "reason": ""}}]})");
  std::string out = RenderNodes(response, 2000);
  EXPECT_NE(out.find("Ready,Draining"), std::string::npos) << out;
  EXPECT_NE(out.find("Ready,Cordoned"), std::string::npos) << out;
}

TEST(RenderGpus, SharedGpuShowsEachSliceAndFreeMemory) {
  json response = json::parse(R"({"gpus": [
    {"node": "gpu-a1", "index": 2, "model": "H100-80GB", "memory_bytes": 85899345920,
     "health": "Healthy", "job": null,
     "sharing": {"used_mgpu": 750, "used_memory_bytes": 64424509440,
                 "free_memory_bytes": 21474836480,
                 "holders": [{"id": 12, "name": "infer", "replica": 0, "gpu_share_mgpu": 250},
                             {"id": 13, "name": "chat", "replica": 1, "gpu_share_mgpu": 500}]}},
    {"node": "gpu-a1", "index": 3, "model": "H100-80GB", "memory_bytes": 85899345920,
     "health": "Healthy", "job": null,
     "sharing": {"used_mgpu": 0, "used_memory_bytes": 0, "free_memory_bytes": 85899345920,
                 "holders": []}}]})");
  EXPECT_EQ(RenderGpus(response),
            "NODE     INDEX   MODEL       MEMORY   HEALTH    SHARING                JOB\n"
            "gpu-a1   2       H100-80GB   80Gi     Healthy   0.75 used, 20Gi free  "
            " 12 infer/r0 0.25; 13 chat/r1 0.5\n"
            "gpu-a1   3       H100-80GB   80Gi     Healthy   0 used, 80Gi free      -\n");
}

TEST(RenderNodes, FreeOverTotalAndHeartbeatAge) {
  json response = json::parse(R"({"nodes": [
    {"name": "gpu-a1", "state": "Ready", "cpus": 128, "memory_bytes": 2063731998720,
     "gpu_provider": "nvml", "gpus_total": 8, "gpus_free": 6, "models": ["H100-80GB"],
     "confinement": {"mode": "enforced", "cgroup": "v2", "missing": ["devices: ..."]},
     "last_heartbeat_ms": 1764444741000},
    {"name": "gpu-b1", "state": "NotReady", "models": []}]})");
  EXPECT_EQ(RenderNodes(response, kRenderNow),
            "NAME     STATE      GPUS(FREE/TOTAL)   MODELS      CPUS   MEMORY   PROVIDER   "
            "CONFINEMENT       HEARTBEAT\n"
            "gpu-a1   Ready      6/8                H100-80GB   128    1.9Ti    nvml       "
            "enforced (v2) !   3s\n"
            "gpu-b1   NotReady   -/-                -           -      -        -          "
            "-                 -\n");
}

TEST(RenderJob, PendingJobShowsSpecReasonAndTimeline) {
  std::string text = RenderJob(PendingJob(), kRenderNow);
  EXPECT_NE(text.find("Job:          12 (resnet50)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Tenant/Queue: default/default\n"), std::string::npos) << text;
  EXPECT_NE(text.find("State:        Pending (NoNodeFits: no node has 4 free H100-80GB GPUs)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Command:      python3 train.py\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Resources:    gpus=4 model=H100-80GB gpu_memory>=80Gi cpu=16 "
                      "memory=128Gi (per replica)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Max runtime:  12h\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Submitted:    2025-11-29T19:27:24.000Z (5m ago)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Started:      -\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Placement:    none\n"), std::string::npos) << text;
  EXPECT_NE(text.find("TIME                       STATE     EVENT       MESSAGE\n"
                      "2025-11-29T19:27:24.000Z   Pending   Submitted   submitted by CLI\n"),
            std::string::npos)
      << text;
}

TEST(RenderJob, PlacementRowsShowGpusPidAndExit) {
  json job = PendingJob();
  job["state"] = "Failed";
  job["reason"] = nullptr;
  job["signal"] = 9;
  job["placement"] = json::parse(R"([
    {"replica": 0, "node": "gpu-a1", "gpus": [0, 1], "state": "Succeeded", "pid": 1234,
     "exit_code": 0, "signal": null},
    {"replica": 1, "node": "gpu-a2", "gpus": [4, 5], "state": "Failed", "pid": 99,
     "exit_code": null, "signal": 9}])");
  std::string text = RenderJob(job, kRenderNow);
  EXPECT_NE(text.find("State:        Failed\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Exit:         SIGKILL\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("Policy:"), std::string::npos) << text;  // only once scheduled
  job["policy_version"] = 3;
  text = RenderJob(job, kRenderNow);
  EXPECT_NE(text.find("State:        Failed\nPolicy:       v3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("REPLICA   NODE     GPUS   STATE       PID    EXIT\n"
                      "0         gpu-a1   0,1    Succeeded   1234   0\n"
                      "1         gpu-a2   4,5    Failed      99     SIGKILL\n"),
            std::string::npos)
      << text;
}

TEST(RenderJob, ASliceShowsItsShareInResourcesAndPlacement) {
  json job = PendingJob();
  job["spec"]["resources"] = {{"gpus", 0}, {"gpu_share_millis", 250}};
  job["placement"] = json::parse(R"([
    {"replica": 0, "node": "gpu-a1", "gpus": [2], "state": "Running", "pid": 7,
     "gpu_share_mgpu": 250, "gpu_share_bytes": 21474836480}])");
  std::string text = RenderJob(job, kRenderNow);
  EXPECT_NE(text.find("gpu_share=0.25"), std::string::npos) << text;
  EXPECT_NE(text.find("2 (250 mGPU, 20Gi)"), std::string::npos) << text;
  job["spec"]["resources"] = {{"gpu_share_bytes", 21474836480}};
  EXPECT_NE(RenderJob(job, kRenderNow).find("gpu_share=20Gi"), std::string::npos);
  job["spec"]["resources"] = {{"gpu_share_millis", 5}};
  EXPECT_NE(RenderJob(job, kRenderNow).find("gpu_share=0.005"), std::string::npos);
}

TEST(RenderJob, NearlyEmptyObjectStillRenders) {
  std::string text = RenderJob({{"id", 5}}, kRenderNow);
  EXPECT_NE(text.find("Job:          5 (-)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Resources:    -\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Timeline:     none\n"), std::string::npos) << text;
  EXPECT_NO_THROW(RenderJob(json("not an object"), kRenderNow));
  EXPECT_NO_THROW(
      RenderJob({{"spec", "weird"}, {"placement", {1, 2}}, {"timeline", 3}}, kRenderNow));
}

TEST(RenderJob, UtilizationLinesFromTelemetry) {
  json job = PendingJob();
  // An older berthd sends no utilization: no lines at all.
  EXPECT_EQ(RenderJob(job, kRenderNow).find("GPU util"), std::string::npos);
  job["utilization"] = nullptr;
  EXPECT_NE(RenderJob(job, kRenderNow).find("GPU util:     no telemetry yet\n"), std::string::npos);
  job["utilization"] = json::parse(R"({"avg_util_pct": 62.5, "max_util_pct": 100,
    "avg_memory_used_bytes": 42949672960, "max_memory_used_bytes": 64424509440,
    "memory_total_bytes": 85899345920, "idle_fraction": 0.25, "longest_idle_ms": 900000,
    "samples": 120, "first_ms": 1, "last_ms": 2})");
  std::string text = RenderJob(job, kRenderNow);
  EXPECT_NE(text.find("GPU util:     avg 62.5%, max 100% (120 samples)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU memory:   avg 40Gi, max 60Gi of 80Gi\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU idle:     25% of samples (longest idle stretch 15m)\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace berth::cli

namespace berth::cli {
namespace {

// `berth svc why`: what is missing and why, from a service's status.
TEST(RenderServiceWhy, SaysTheBackoffTheRefusalAndEachWaitingReplicasReason) {
  const nlohmann::json s = nlohmann::json::parse(R"({
    "tenant": "ml", "name": "coder",
    "status": {"desired": 3, "ready": 1, "phase": "backing_off", "recent_crashes": 2,
               "backoff_until_ms": 1796400000000, "refused": "tenant ml has 10 pending jobs",
               "replicas": [
                 {"job": 7, "revision": 2, "state": "Running", "stopping": false, "reason": null},
                 {"job": 8, "revision": 2, "state": "Pending", "stopping": false,
                  "reason": {"code": "QuotaExceeded", "message": "queue ml/serving is at its guarantee"}},
                 {"job": 5, "revision": 1, "state": "Running", "stopping": true, "reason": null}]}
  })");
  const std::string out = RenderServiceWhy(s);
  EXPECT_NE(out.find("service ml/coder: 1 of 3 replicas ready (backing_off)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("replicas crashed 2 times in the last 10 minutes: the next starts after " +
                     FormatTimeMs(1796400000000)),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("refused as a job would be: tenant ml has 10 pending jobs"), std::string::npos)
      << out;
  EXPECT_NE(out.find("replica job 8 (revision 2) is Pending: queue ml/serving is at its guarantee"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("replica job 5 (revision 1) is stopping"), std::string::npos) << out;
  EXPECT_EQ(out.find("job 7"), std::string::npos) << out;
  EXPECT_EQ(out.find("nothing is missing"), std::string::npos) << out;
}

TEST(RenderServiceWhy, ARunningReplicaThatIsNotReadySaysItsProbeAndWhatTheRolloutWaitsFor) {
  const nlohmann::json s = nlohmann::json::parse(R"({
    "tenant": "ml", "name": "coder",
    "status": {"desired": 1, "ready": 0, "phase": "rollout_paused", "backoff_until_ms": null,
               "refused": null,
               "waiting": "replica job 9 of revision 3 not ready for 10m: GET /health: HTTP 503",
               "replicas": [
                 {"job": 4, "revision": 2, "state": "Running", "stopping": false, "ready": true},
                 {"job": 9, "revision": 3, "state": "Running", "stopping": false, "ready": false,
                  "node": "gpu-7", "probe": "GET /health: HTTP 503"}]}
  })");
  const std::string out = RenderServiceWhy(s);
  EXPECT_NE(out.find("- waiting: replica job 9 of revision 3 not ready for 10m"), std::string::npos)
      << out;
  EXPECT_NE(out.find("- replica job 9 (revision 3) runs on gpu-7 but is not ready: GET /health: "
                     "HTTP 503"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("job 4 "), std::string::npos) << out;
  EXPECT_EQ(out.find("nothing is missing"), std::string::npos) << out;
}

TEST(RenderServiceWhy, AServiceWithEveryReplicaReadySaysNothingIsMissing) {
  const nlohmann::json s = nlohmann::json::parse(R"({
    "tenant": "ml", "name": "coder",
    "status": {"desired": 1, "ready": 1, "phase": "steady", "backoff_until_ms": null,
               "refused": null,
               "replicas": [{"job": 7, "revision": 1, "state": "Running", "stopping": false}]}
  })");
  EXPECT_EQ(RenderServiceWhy(s),
            "service ml/coder: 1 of 1 replicas ready (steady)\n- nothing is missing\n");
}

TEST(RenderServiceWhy, AServiceAtZeroSaysTheAutoscalersReasonAndTheHeldRequests) {
  const nlohmann::json s = nlohmann::json::parse(R"({
    "tenant": "ml", "name": "coder",
    "status": {"desired": 1, "ready": 0, "phase": "scaling", "backoff_until_ms": null,
               "refused": null, "cold_start_since_ms": 1796458948165,
               "autoscale": {"code": "scale_from_zero", "desired": 1,
                             "reason": "scale from zero: 2 requests waiting"},
               "traffic": {"held": 2, "in_flight": 2},
               "replicas": [{"job": 9, "revision": 1, "state": "Pending", "stopping": false,
                             "reason": {"message": "placing"}}]}
  })");
  const std::string out = RenderServiceWhy(s);
  EXPECT_NE(out.find("- the autoscaler wants 1: scale from zero: 2 requests waiting\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("- 2 request(s) held at the gateway until a replica is ready (scaling from "
                     "zero since "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("replica job 9 (revision 1) is Pending: placing"), std::string::npos) << out;
  // Without a gateway (no autoscale, no traffic) neither line appears.
  nlohmann::json plain = s;
  plain["status"].erase("autoscale");
  plain["status"]["traffic"] = nullptr;
  const std::string without = RenderServiceWhy(plain);
  EXPECT_EQ(without.find("autoscaler"), std::string::npos) << without;
  EXPECT_EQ(without.find("held at the gateway"), std::string::npos) << without;
}

}  // namespace
}  // namespace berth::cli
