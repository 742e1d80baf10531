#include <gtest/gtest.h>

#include "model/job.h"
#include "model/json.h"

namespace berth::model {
namespace {

constexpr const char* kJobExample = R"(
name: resnet50
tenant: vision
queue: training
command: ["python3", "train.py", "--epochs", "90"]
env: {NCCL_DEBUG: WARN}
replicas: 2
resources: {gpus: 4, gpu_model: H100-80GB, gpu_memory: 80Gi, cpu: 16, memory: 128Gi}
priority: normal
max_runtime: 12h
)";

TEST(JobSpec, ParsesTheDocumentedExample) {
  auto spec = ParseJobSpec(kJobExample);
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->name, "resnet50");
  EXPECT_EQ(spec->tenant, "vision");
  EXPECT_EQ(spec->command.size(), 4U);
  EXPECT_EQ(spec->env.at("NCCL_DEBUG"), "WARN");
  EXPECT_EQ(spec->replicas, 2U);
  EXPECT_EQ(spec->resources.gpus, 4U);
  EXPECT_EQ(spec->resources.gpu_memory_bytes, 80ULL << 30);
  EXPECT_EQ(spec->resources.cpu_millis, 16000U);
  EXPECT_EQ(spec->resources.memory_bytes, 128ULL << 30);
  EXPECT_EQ(spec->max_runtime_ms, 12LL * 3600 * 1000);
}

TEST(JobSpec, DefaultsNeedNoSetUp) {
  auto spec = ParseJobSpec("name: hello\ncommand: [echo, hi]\n");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->tenant, "default");
  EXPECT_EQ(spec->queue, "default");
  EXPECT_EQ(spec->replicas, 1U);
  EXPECT_EQ(spec->resources.gpus, 0U);
  EXPECT_EQ(spec->priority, Priority::kNormal);
}

TEST(JobSpec, ArgsAreAppendedToCommand) {
  auto spec = ParseJobSpec("name: a\ncommand: [python3]\nargs: [train.py, '--lr', '0.1']\n");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->command, (std::vector<std::string>{"python3", "train.py", "--lr", "0.1"}));
}

TEST(JobSpec, JsonIsAcceptedToo) {
  auto spec = ParseJobSpec(R"({"name": "j", "command": ["true"], "resources": {"gpus": 2}})");
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->resources.gpus, 2U);
}

TEST(JobSpec, CpuAcceptsFractionsAndMillicores) {
  auto a = ParseJobSpec("name: a\ncommand: [x]\nresources: {cpu: 0.5}\n");
  auto b = ParseJobSpec("name: a\ncommand: [x]\nresources: {cpu: 250m}\n");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->resources.cpu_millis, 500U);
  EXPECT_EQ(b->resources.cpu_millis, 250U);
}

struct JobBadCase {
  const char* yaml;
  const char* field;
  const char* hint;  // a word the message must contain
};

class JobSpecRejects : public ::testing::TestWithParam<JobBadCase> {};

TEST_P(JobSpecRejects, NamesTheFieldAndTheFix) {
  auto spec = ParseJobSpec(GetParam().yaml);
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().code, Code::kInvalidArgument);
  EXPECT_EQ(spec.error().field, GetParam().field);
  EXPECT_NE(spec.error().message.find(GetParam().hint), std::string::npos) << spec.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, JobSpecRejects,
    ::testing::Values(
        JobBadCase{"name: a\ncommand: [x]\ngpus: 2\n", "gpus", "allowed fields"},
        // A field given twice: whichever copy a reader keeps, it is refused.
        JobBadCase{R"({"name": "a", "command": ["x"], "tenant": "a", "tenant": "b"})", "tenant",
                   "given twice"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpus: 1, gpus: 8}\n", "resources.gpus",
                   "given twice"},
        JobBadCase{"name: a\ncommand: [x]\nenv: {A: 1, A: 2}\n", "env.A", "given twice"},
        JobBadCase{"name: a\ncommand: [x]\nnode_selector: {zone: a, zone: b}\n",
                   "node_selector.zone", "given twice"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu: 2}\n", "resources.gpu", "allowed"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpus: -1}\n", "resources.gpus", "0 to 64"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpus: 65}\n", "resources.gpus", "0 to 64"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpus: two}\n", "resources.gpus", "integer"},
        JobBadCase{"name: [a\ncommand: x", "", "YAML"},
        JobBadCase{
            "name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\ncommand: "
            "[x]\n",
            "name", "at most 63"},
        JobBadCase{"name: Bad_Name!\ncommand: [x]\n", "name", "lower-case"},
        JobBadCase{"command: [x]\n", "name", "required"},
        JobBadCase{"name: a\n", "command", "required"},
        JobBadCase{"name: a\ncommand: python3 train.py\n", "command", "list"},
        JobBadCase{"name: a\ncommand: []\n", "command", "program"},
        JobBadCase{"name: a\ncommand: [x]\nreplicas: 0\n", "replicas", "1 to 1024"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpus: 1, gpu_memory: 80GB}\n",
                   "resources.gpu_memory", "Gi"},
        JobBadCase{"name: a\ncommand: [x]\nmax_runtime: 12\n", "max_runtime", "unit"},
        JobBadCase{"name: a\ncommand: [x]\npriority: urgent\n", "priority", "critical"},
        JobBadCase{"name: a\ncommand: [x]\nenv: {BERTH_JOB_ID: '1'}\n", "env.BERTH_JOB_ID",
                   "set by Berth"},
        JobBadCase{"name: a\ncommand: [x]\nworking_dir: rel/path\n", "working_dir", "absolute"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_model: H100-80GB}\n", "resources.gpus",
                   "at least one GPU"},
        JobBadCase{"- just\n- a list\n", "", "mapping"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpus: 1, gpu_share: 0.5}\n",
                   "resources.gpu_share", "remove one of them"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_share: 0}\n", "resources.gpu_share",
                   "above 0 and below 1"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_share: 0.0}\n", "resources.gpu_share",
                   "above 0 and below 1"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_share: 0.1234}\n", "resources.gpu_share",
                   "at most 3 decimals"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_share: 1}\n", "resources.gpu_share",
                   "use resources.gpus"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_share: 1.5}\n", "resources.gpu_share",
                   "use resources.gpus"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_share: -0.5}\n", "resources.gpu_share",
                   "fraction of one GPU"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_share: 20GB}\n", "resources.gpu_share",
                   "memory size"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_share: 0Gi}\n", "resources.gpu_share",
                   "larger than zero"},
        JobBadCase{"name: a\ncommand: [x]\nresources: {gpu_share: [0.5]}\n", "resources.gpu_share",
                   "string"},
        JobBadCase{"name: a\ncommand: [x]\ncheckpoint: /ckpt\n", "checkpoint", "mapping"},
        JobBadCase{"name: a\ncommand: [x]\ncheckpoint: {dir: ckpt}\n", "checkpoint.dir",
                   "absolute"},
        JobBadCase{"name: a\ncommand: [x]\ncheckpoint: {grace: 2h}\n", "checkpoint.grace",
                   "between 1s and 1h"},
        JobBadCase{"name: a\ncommand: [x]\ncheckpoint: {signal: USR1}\n", "checkpoint.signal",
                   "SIGUSR1"},
        JobBadCase{"name: a\ncommand: [x]\ncheckpoint: {file: latest}\n", "checkpoint.file",
                   "absolute"},
        JobBadCase{"name: a\ncommand: [x]\nretry: 3\n", "retry", "mapping"},
        JobBadCase{"name: a\ncommand: [x]\nretry: {max_attempts: 0}\n", "retry.max_attempts",
                   "from 1"},
        JobBadCase{"name: a\ncommand: [x]\nretry: {backoff: 2h}\n", "retry.backoff",
                   "between 0s and 1h"},
        JobBadCase{"name: a\ncommand: [x]\nretry: {on: [oom]}\n", "retry.on[0]",
                   "gpu_out_of_memory"},
        JobBadCase{"name: a\ncommand: [x]\nretry: {on: [node_lost], attempts: 2}\n",
                   "retry.attempts", "unknown"},
        JobBadCase{"name: a\ncommand: [x]\nimage: \"my image\"\n", "image", "without spaces"}));

TEST(JobSpec, RetryPolicyDefaultsToFailuresThatAreNotTheJobsOwn) {
  auto none = ParseJobSpec("name: a\ncommand: [x]\n");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->retry.max_attempts, 3U);
  EXPECT_EQ(none->retry.backoff_ms, 10'000);
  EXPECT_EQ(none->retry.on, (std::vector<std::string>{"node_lost", "gpu_hardware"}));
  auto spec = ParseJobSpec(
      "name: a\ncommand: [x]\nimage: docker.io/library/busybox:1.36\n"
      "retry: {max_attempts: 5, backoff: 1m, on: [communication, node_lost, communication]}\n");
  ASSERT_TRUE(spec.has_value()) << spec.error().field << ": " << spec.error().message;
  EXPECT_EQ(spec->retry.max_attempts, 5U);
  EXPECT_EQ(spec->retry.backoff_ms, 60'000);
  EXPECT_EQ(spec->retry.on, (std::vector<std::string>{"communication", "node_lost"}));
  EXPECT_EQ(spec->image, "docker.io/library/busybox:1.36");
  auto back = JobSpecFromJson(ToJson(*spec));
  EXPECT_EQ(back.retry, spec->retry);
  EXPECT_EQ(back.image, spec->image);
  EXPECT_EQ(JobSpecFromJson(ToJson(*none)).retry, none->retry);
}

TEST(JobSpec, CheckpointBlockDeclaresAJobThatSavesItsWork) {
  auto none = ParseJobSpec("name: a\ncommand: [x]\n");
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->checkpoint.enabled);
  auto spec = ParseJobSpec("name: a\ncommand: [x]\ncheckpoint: {dir: /ckpt/a, grace: 2m}\n");
  ASSERT_TRUE(spec.has_value()) << spec.error().field << ": " << spec.error().message;
  EXPECT_EQ(spec->checkpoint, (Checkpoint{true, 120'000, "/ckpt/a", "SIGTERM", ""}));
  auto usr1 =
      ParseJobSpec("name: a\ncommand: [x]\ncheckpoint: {signal: SIGUSR1, file: /ckpt/a/latest}\n");
  ASSERT_TRUE(usr1.has_value()) << usr1.error().field << ": " << usr1.error().message;
  EXPECT_EQ(usr1->checkpoint, (Checkpoint{true, 0, "", "SIGUSR1", "/ckpt/a/latest"}));
  EXPECT_EQ(JobSpecFromJson(ToJson(*usr1)).checkpoint, usr1->checkpoint);
  auto bare = ParseJobSpec("name: a\ncommand: [x]\ncheckpoint: {}\n");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->checkpoint, (Checkpoint{true, 0, "", "SIGTERM", ""}));
  EXPECT_EQ(JobSpecFromJson(ToJson(*spec)).checkpoint, spec->checkpoint);
  EXPECT_EQ(JobSpecFromJson(ToJson(*none)).checkpoint, none->checkpoint);
}

TEST(JobSpec, GpuShareIsAFractionOrAMemorySize) {
  auto frac = ParseJobSpec("name: a\ncommand: [x]\nresources: {gpu_share: 0.25}\n");
  auto mem =
      ParseJobSpec("name: a\ncommand: [x]\nresources: {gpu_share: 20Gi, gpu_model: A100-40GB}\n");
  auto short_form = ParseJobSpec("name: a\ncommand: [x]\nresources: {gpu_share: .5}\n");
  ASSERT_TRUE(frac.has_value()) << frac.error().message;
  ASSERT_TRUE(mem.has_value()) << mem.error().message;
  ASSERT_TRUE(short_form.has_value()) << short_form.error().message;
  EXPECT_EQ(frac->resources.gpu_share_millis, 250U);
  EXPECT_EQ(frac->resources.gpus, 0U);
  EXPECT_TRUE(IsSlice(frac->resources));
  EXPECT_EQ(mem->resources.gpu_share_bytes, 20ULL << 30);
  EXPECT_EQ(mem->resources.gpu_model, "A100-40GB");
  EXPECT_EQ(short_form->resources.gpu_share_millis, 500U);
  JobSpec back = JobSpecFromJson(ToJson(*mem));
  EXPECT_EQ(back.resources.gpu_share_bytes, 20ULL << 30);
  EXPECT_EQ(JobSpecFromJson(ToJson(*frac)).resources.gpu_share_millis, 250U);
  EXPECT_EQ(ToJson(*frac)["resources"]["gpu_share_millis"], 250);
}

TEST(JobSpec, SliceOfACard) {
  Resources quarter;
  quarter.gpu_share_millis = 250;
  EXPECT_EQ(SliceOf(quarter, 80ULL << 30), (GpuSlice{250, 20ULL << 30}));
  Resources mem;
  mem.gpu_share_bytes = 20ULL << 30;
  EXPECT_EQ(SliceOf(mem, 80ULL << 30), (GpuSlice{250, 20ULL << 30}));
  EXPECT_EQ(SliceOf(mem, 40ULL << 30).millis, 500U);
  mem.gpu_share_bytes = 1;  // rounds up to one milli-GPU
  EXPECT_EQ(SliceOf(mem, 80ULL << 30).millis, 1U);
  mem.gpu_share_bytes = (50ULL << 30) + 1;  // 625.0000x -> 626
  EXPECT_EQ(SliceOf(mem, 80ULL << 30).millis, 626U);
  mem.gpu_share_bytes = 90ULL << 30;  // larger than the card: fits none
  EXPECT_EQ(SliceOf(mem, 80ULL << 30).millis, 1000U);
  EXPECT_FALSE(IsSlice(Resources{}));
}

TEST(JobSpec, RoundTripsThroughJson) {
  auto spec = ParseJobSpec(kJobExample);
  ASSERT_TRUE(spec.has_value());
  JobSpec back = JobSpecFromJson(ToJson(*spec));
  EXPECT_EQ(back.name, spec->name);
  EXPECT_EQ(back.command, spec->command);
  EXPECT_EQ(back.env, spec->env);
  EXPECT_EQ(back.resources.gpu_memory_bytes, spec->resources.gpu_memory_bytes);
  EXPECT_EQ(back.max_runtime_ms, spec->max_runtime_ms);
  EXPECT_EQ(back.priority, spec->priority);
}

}  // namespace
}  // namespace berth::model

namespace berth::model {
namespace {

TEST(JobSpec, ParsesPlacementFields) {
  auto spec = ParseJobSpec(R"(
name: a
command: [x]
resources: {gpus: 4}
preemptible: false
node_selector: {zone: b, rack: "7"}
tolerations: [{key: dedicated, value: ops, effect: NoSchedule}, {key: spot}]
pool: training
topology: {one_node: true, nvlink_island: require}
)");
  ASSERT_TRUE(spec.has_value()) << spec.error().field << ": " << spec.error().message;
  EXPECT_EQ(spec->preemptible, false);
  EXPECT_EQ(spec->node_selector.at("rack"), "7");
  ASSERT_EQ(spec->tolerations.size(), 2U);
  EXPECT_EQ(spec->tolerations[0], (Toleration{"dedicated", "ops", "NoSchedule"}));
  EXPECT_EQ(spec->tolerations[1], (Toleration{"spot", "", ""}));
  EXPECT_EQ(spec->pool, "training");
  EXPECT_TRUE(spec->topology.one_node);
  EXPECT_EQ(spec->topology.nvlink_island, NvlinkIsland::kRequire);

  JobSpec back = JobSpecFromJson(ToJson(*spec));
  EXPECT_EQ(back.preemptible, spec->preemptible);
  EXPECT_EQ(back.node_selector, spec->node_selector);
  EXPECT_EQ(back.tolerations, spec->tolerations);
  EXPECT_EQ(back.pool, spec->pool);
  EXPECT_EQ(back.topology, spec->topology);
}

TEST(JobSpec, PlacementFieldsDefaultToNone) {
  auto spec = ParseJobSpec("name: a\ncommand: [x]\n");
  ASSERT_TRUE(spec.has_value());
  EXPECT_FALSE(spec->preemptible.has_value());
  EXPECT_TRUE(spec->node_selector.empty());
  EXPECT_TRUE(spec->tolerations.empty());
  EXPECT_TRUE(spec->pool.empty());
  EXPECT_EQ(spec->topology, Topology{});
  EXPECT_FALSE(JobSpecFromJson(ToJson(*spec)).preemptible.has_value());
}

INSTANTIATE_TEST_SUITE_P(
    BadPlacement, JobSpecRejects,
    ::testing::Values(
        JobBadCase{"name: a\ncommand: [x]\npreemptible: maybe\n", "preemptible", "true or false"},
        JobBadCase{"name: a\ncommand: [x]\nnode_selector: [a]\n", "node_selector", "mapping"},
        JobBadCase{"name: a\ncommand: [x]\ntolerations: [{value: v}]\n", "tolerations[0].key",
                   "required"},
        JobBadCase{"name: a\ncommand: [x]\ntolerations: [{key: k, effect: NoExecute}]\n",
                   "tolerations[0].effect", "NoSchedule"},
        JobBadCase{"name: a\ncommand: [x]\ntolerations: [{key: k, operator: Exists}]\n",
                   "tolerations[0].operator", "allowed"},
        JobBadCase{"name: a\ncommand: [x]\npool: Bad!\n", "pool", "pool name"},
        JobBadCase{"name: a\ncommand: [x]\ntopology: {nvlink: require}\n", "topology.nvlink",
                   "allowed"},
        JobBadCase{
            "name: a\ncommand: [x]\nresources: {gpus: 1}\ntopology: {nvlink_island: always}\n",
            "topology.nvlink_island", "prefer"},
        JobBadCase{"name: a\ncommand: [x]\ntopology: {nvlink_island: require}\n",
                   "topology.nvlink_island", "resources.gpus"},
        JobBadCase{"name: a\ncommand: [x]\ntopology: {one_node: 1}\n", "topology.one_node",
                   "true or false"}));

}  // namespace
}  // namespace berth::model

namespace berth::model {
namespace {

TEST(JobSpec, MountsNameHostPathsAndAreCheckedByField) {
  auto s = ParseJobSpec(
      R"({name: m, command: [true], mounts: [{path: /data/set}, {path: /models/a, read_only: true}]})");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  ASSERT_EQ(s->mounts.size(), 2U);
  EXPECT_EQ(s->mounts[0], (Mount{"/data/set", false}));
  EXPECT_EQ(s->mounts[1], (Mount{"/models/a", true}));
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"mounts: [{path: data}]", "mounts[0].path"},
           {"mounts: [{path: '/a:/b'}]", "mounts[0].path"},
           {"mounts: [{read_only: true}]", "mounts[0].path"},
           {"mounts: [{path: /a, mode: rw}]", "mounts[0].mode"},
           {"mounts: [{path: /a, read_only: yes-please}]", "mounts[0].read_only"},
           {"mounts: /a", "mounts"},
       }) {
    auto bad = ParseJobSpec("{name: m, command: [true], " + text + "}");
    ASSERT_FALSE(bad.has_value()) << text;
    EXPECT_EQ(bad.error().field, field) << text << ": " << bad.error().message;
  }
}

// Every quantity is bounded at parse time: a number past the bound, even one
// too long for 64 bits, is refused naming the field and the range.
TEST(JobSpec, ExtremeQuantitiesAreRefusedNamingTheFieldAndRange) {
  struct Case {
    const char* fields;  // appended to a spec that is otherwise valid
    const char* field;
    const char* range;  // in the message
  };
  const Case cases[] = {
      {"resources: {gpus: 18446744073709551615}", "resources.gpus", "use 0 to 64"},
      {"resources: {gpus: 65}", "resources.gpus", "use 0 to 64"},
      {"resources: {gpus: -9223372036854775809}", "resources.gpus", "use 0 to 64"},
      {"replicas: 4294967295", "replicas", "use 1 to 1024"},
      {"replicas: 99999999999999999999999", "replicas", "use 1 to 1024"},
      {"resources: {memory: 99999999999999Ti}", "resources.memory", "at most 1024Ti"},
      {"resources: {memory: 1025Ti}", "resources.memory", "at most 1024Ti"},
      {"resources: {memory: 18446744073709551615}", "resources.memory", "at most 1024Ti"},
      {"resources: {gpus: 1, gpu_memory: 2000Ti}", "resources.gpu_memory", "at most 1024Ti"},
      {"resources: {gpu_share: 99999999999999Ti}", "resources.gpu_share", "at most 1024Ti"},
      // 18446744073709552 cores times 1000 wraps to 384 millicores in 64 bits.
      {"resources: {cpu: 18446744073709552}", "resources.cpu", "at most 4096 cores"},
      {"resources: {cpu: 4096.001}", "resources.cpu", "at most 4096 cores"},
      {"resources: {cpu: 99999999999999999999m}", "resources.cpu", "at most 4096 cores"},
      {"max_runtime: 3651d", "max_runtime", "at most 87600h"},
      {"max_runtime: 99999999999999999999d", "max_runtime", "at most 87600h"},
      {"load: {idle_after: 106751991167d}", "load.idle_after", "at most 87600h"},
      {"retry: {max_attempts: 4294967297}", "retry.max_attempts", "from 1 (no retry) to 100"},
      {"load: {utilization: 4294967396}", "load.utilization", "0 to 100"},
  };
  for (const auto& c : cases) {
    const std::string doc = std::string("name: a\ncommand: [x]\n") + c.fields + "\n";
    auto spec = ParseJobSpec(doc);
    ASSERT_FALSE(spec.has_value()) << doc;
    EXPECT_EQ(spec.error().code, Code::kInvalidArgument);
    EXPECT_EQ(spec.error().field, c.field) << doc << spec.error().message;
    EXPECT_NE(spec.error().message.find(c.range), std::string::npos) << doc << spec.error().message;
  }
}

TEST(JobSpec, TheBoundsThemselvesAreAccepted) {
  auto spec = ParseJobSpec(
      "name: a\ncommand: [x]\nreplicas: 1024\nmax_runtime: 3650d\n"
      "resources: {gpus: 64, gpu_memory: 1024Ti, cpu: 4096, memory: 1024Ti}\n");
  ASSERT_TRUE(spec.has_value()) << spec.error().field << ": " << spec.error().message;
  EXPECT_EQ(spec->replicas, kMaxReplicas);
  EXPECT_EQ(spec->resources.gpus, kMaxGpusPerReplica);
  EXPECT_EQ(spec->resources.cpu_millis, kMaxCpuMillis);
  EXPECT_EQ(spec->resources.memory_bytes, kMaxMemoryBytes);
  EXPECT_EQ(spec->resources.gpu_memory_bytes, kMaxMemoryBytes);
  EXPECT_EQ(spec->max_runtime_ms, kMaxDurationMs);
  // One job's totals at the bounds are far from what 64 bits hold.
  EXPECT_LT(std::uint64_t{kMaxReplicas} * kMaxMemoryBytes, std::uint64_t{1} << 61);
}

TEST(JobSpec, AnArrayIsACountARangeOrAListOfParameterSets) {
  auto count = ParseJobSpec("{name: s, command: [x], array: 100}");
  ASSERT_TRUE(count.has_value()) << count.error().message;
  EXPECT_EQ(*count->array, (JobArray{0, 100, {}}));
  EXPECT_EQ(JobCount(*count), 100U);
  auto range = ParseJobSpec("{name: s, command: [x], array: 5-9999}");
  ASSERT_TRUE(range.has_value()) << range.error().message;
  EXPECT_EQ(*range->array, (JobArray{5, 9995, {}}));
  auto sets = ParseJobSpec(
      "{name: s, command: [x], env: {A: '1', B: '2'}, array: [{LR: '0.1'}, {LR: '0.01', B: '3'}]}");
  ASSERT_TRUE(sets.has_value()) << sets.error().message;
  ASSERT_EQ(sets->array->count, 2U);
  JobSpec second = ArrayElementSpec(*sets, 1);
  EXPECT_FALSE(second.array.has_value());
  EXPECT_EQ(*second.array_element, (ArrayElement{0, 1, 2}));
  EXPECT_EQ(second.env,
            (std::map<std::string, std::string>{{"A", "1"}, {"B", "3"}, {"LR", "0.01"}}));
  EXPECT_EQ(ArrayElementSpec(*range, 3).array_element->index, 8U);
  // The array survives the JSON the store and the fuzzer print.
  EXPECT_EQ(JobSpecFromJson(ToJson(*sets)).array, sets->array);
  EXPECT_EQ(JobSpecFromJson(ToJson(second)).array_element, second.array_element);
  // A spec without an array is one job, itself.
  auto one = ParseJobSpec("{name: s, command: [x]}");
  EXPECT_EQ(JobCount(*one), 1U);
  EXPECT_FALSE(ArrayElementSpec(*one, 0).array_element.has_value());
}

TEST(JobSpec, ABadArrayIsRefusedNamingTheFieldAndTheFix) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"array: 0", "array"},
      {"array: 100001", "array"},
      {"array: 0-100000", "array"},
      {"array: 9-3", "array"},
      {"array: -3", "array"},
      {"array: 1.5", "array"},
      {"array: 3-x", "array"},
      {"array: []", "array"},
      {"array: {a: b}", "array"},
      {"array: [x]", "array[0]"},
      {"array: [{'1X': a}]", "array[0].1X"},
      {"array: [{BERTH_JOB_ID: a}]", "array[0].BERTH_JOB_ID"},
      {"array: [{A: [1]}]", "array[0].A"},
  };
  for (const auto& [extra, field] : bad) {
    auto spec = ParseJobSpec("{name: s, command: [x], " + extra + "}");
    ASSERT_FALSE(spec.has_value()) << extra;
    EXPECT_EQ(spec.error().field, field) << extra << ": " << spec.error().message;
    EXPECT_FALSE(spec.error().message.empty());
  }
  auto range = ParseJobSpec("{name: s, command: [x], array: 9-3}");
  EXPECT_NE(range.error().message.find("low-high"), std::string::npos) << range.error().message;
}

}  // namespace
}  // namespace berth::model

namespace berth::model {
namespace {

TEST(JobSpec, SecretEnvNamesEnvEntriesOrParameterSetEntries) {
  auto spec = ParseJobSpec(
      "{name: s, command: [x], env: {HF_TOKEN: hf_abc, LOG: info}, secret_env: [HF_TOKEN]}");
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->secret_env, (std::set<std::string>{"HF_TOKEN"}));
  // The value stays in env: the run gets it as any other variable.
  EXPECT_EQ(spec->env.at("HF_TOKEN"), "hf_abc");
  // Stored and read back, the names travel with the spec.
  EXPECT_EQ(JobSpecFromJson(ToJson(*spec)).secret_env, spec->secret_env);
  // A name set only by an array's parameter sets is secret in every element.
  auto array =
      ParseJobSpec("{name: s, command: [x], array: [{KEY: a}, {OTHER: b}], secret_env: [KEY]}");
  ASSERT_TRUE(array.has_value()) << array.error().message;
  EXPECT_EQ(ArrayElementSpec(*array, 1).secret_env, (std::set<std::string>{"KEY"}));
}

TEST(JobSpec, ABadSecretEnvIsRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"secret_env: A", "secret_env"},
      {"secret_env: {A: b}", "secret_env"},
      {"secret_env: [[A]]", "secret_env[0]"},
      {"secret_env: [A, '1X']", "secret_env[1]"},
      {"secret_env: [MISSING]", "secret_env[0]"},
      {"secret_env: [A, A]", "secret_env[1]"},
      {"array: [{B: x}], secret_env: [A, C]", "secret_env[1]"},
  };
  for (const auto& [extra, field] : bad) {
    auto spec = ParseJobSpec("{name: s, command: [x], env: {A: secret-value}, " + extra + "}");
    ASSERT_FALSE(spec.has_value()) << extra;
    EXPECT_EQ(spec.error().field, field) << extra << ": " << spec.error().message;
    EXPECT_FALSE(spec.error().message.empty());
    // No refusal quotes an env value.
    EXPECT_EQ(spec.error().message.find("secret-value"), std::string::npos) << spec.error().message;
  }
}

}  // namespace
}  // namespace berth::model
