// Pins the exact English and Chinese text of a broad set of reasons: every
// ReasonCode with no counts, with three rich sets of counts and with the
// details its sentence parses; every suffix (attempts, estimated start, not
// before, reserved GPUs, eviction relief) on several codes; estimated
// starts counted from a renderer's now; and the node layer's sentence
// (RenderNodeLayer), ranked by least change. The expected lines are in
// testdata/reason_golden.txt, one "case<TAB>lang<TAB>text" per line; they were
// written by the renderer before it moved to a catalogue, so a change to the
// catalogue or to the render function that alters a sentence fails here.
// BERTH_UPDATE_REASON_GOLDEN=1 rewrites the file (for a deliberate wording
// change; review the diff).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "model/reason.h"

namespace berth::model {
namespace {

using Counts = std::map<std::string, std::int64_t, std::less<>>;

struct GoldenCase {
  std::string name;
  Reason reason;
  std::optional<std::int64_t> now_ms;
  // A sentence that is not a reason's (the node layer): rendered by this.
  std::function<std::string(Lang)> render{};
};

Counts With(Counts base, const Counts& more) {
  for (const auto& [k, v] : more) base[k] = v;
  return base;
}

// Every node cause, each with its own count, so the order of the list shows.
Counts AllCauses() {
  Counts c;
  std::int64_t n = 1;
  for (std::string_view key :
       {kCauseNotReady, kCauseCordoned, kCauseTaint, kCauseGpuModel, kCauseGpuMemory,
        kCauseTooFewGpus, kCauseTooFewGpusInTotal, kCauseCpu, kCauseMemory, kCauseSelector,
        kCausePool, kCauseUnhealthy, kCauseTopology, kCauseNotSharing, kCauseSharedFull,
        kCauseHeldBySlices}) {
    c[std::string(key)] = n++;
  }
  return c;
}

// Three rich sets of counts: together they take every branch a code's
// sentence has (signal or exit code, ahead_jobs or position, gang or not,
// slice by share or by memory, borrow limit or none, ...).
std::vector<std::pair<std::string, Counts>> CountSets() {
  Counts a = With(AllCauses(), {{"replica", 2},
                                {"exit_code", 3},
                                {"max_runtime_s", 3600},
                                {"blocked_by", 10},
                                {"position", 4},
                                {std::string(kAheadJobs), 2},
                                {std::string(kAheadGpus), 6},
                                {"nodes", 5},
                                {"replicas", 3},
                                {"gpus_per_replica", 4},
                                {"evictions", 2},
                                {"failures", 1},
                                {"max_attempts", 3},
                                {"backoff_s", 30},
                                {std::string(kByJob), 12},
                                {std::string(kWorkLostMs), 61'500},
                                {std::string(kFreeGpus), 16},
                                {std::string(kNeededGpus), 16},
                                {std::string(kLargestFree), 3},
                                {std::string(kQueueRequested), 2500},
                                {std::string(kQueueUsed), 6000},
                                {std::string(kQueueGuaranteed), 8000},
                                {std::string(kQueueBorrowLimit), 4000},
                                {std::string(kQueueBorrowable), 0},
                                {std::string(kBudgetUsed), 1'234'560'000},
                                {std::string(kBudgetLimit), 1'000'000'000},
                                {"attempts", 3},
                                {"retries_exhausted", 1}});
  Counts b = {{"replica", 0},
              {"signal", 9},
              {"exit_code", 137},
              {"blocked_by", 11},
              {"position", 3},
              {"nodes", 4},
              {"replicas", 4},
              {std::string(kCauseGang), 1},
              {std::string(kCauseTooFewGpus), 4},
              {std::string(kSliceMgpu), 250},
              {std::string(kWouldFitGpusPerReplica), 2},
              {std::string(kReservedFreeGpus), 4},
              {std::string(kEtaMs), 1'700'005'400'000},
              {std::string(kEtaInMs), 5'400'000},
              {std::string(kEtaReserved), 1},
              {std::string(kReclaimCandidates), 0},
              {std::string(kPreemptCandidates), 0},
              {std::string(kMoveCandidates), 0},
              {std::string(kMaxMovesKey), 2},
              {std::string(kQueueRequested), 500},
              {std::string(kQueueUsed), 1250},
              {std::string(kQueueGuaranteed), 1000},
              {std::string(kQueueBorrowable), 750},
              {"attempts", 1}};
  Counts c = {{"replica", 1},
              {"signal", 0},
              {"exit_code", 1},
              {"nodes", 2},
              {std::string(kSliceBytes), 20LL << 30},
              {std::string(kCauseGpuMemory), 2},
              {std::string(kEtaUnknown), 1},
              {std::string(kEtaBlockedBy), 7},
              {std::string(kEtaBlockers), 3},
              {std::string(kReclaimNotBelowGuarantee), 1},
              {std::string(kReclaimCandidates), 5},
              {std::string(kPreemptCandidates), 3},
              {std::string(kMoveCandidates), 3},
              {std::string(kMaxMovesKey), 2},
              {std::string(kEvictableAfterMinRuntime), 2},
              {std::string(kMinRuntimeEndsInMs), 90'000},
              {std::string(kQueueRequested), 4},
              {std::string(kQueueUsed), 10},
              {std::string(kQueueGuaranteed), 8},
              {std::string(kQueueBorrowLimit), 0},
              {std::string(kQueueBorrowable), 0},
              {"retries_exhausted", 1}};
  return {{"empty", {}}, {"A", a}, {"B", b}, {"C", c}};
}

// Details a code's sentence parses, besides "" and plain text.
std::vector<std::string> DetailsFor(ReasonCode code) {
  std::vector<std::string> d = {"", "node-3 GPU 2: Xid 79"};
  switch (code) {
    case ReasonCode::kOverQuota:
    case ReasonCode::kNotPreemptibleOverGuarantee:
      d.insert(d.end(), {"vision", "vision gpus", "vision gpus:A100-80GB", "vision gpusX",
                         "vision cpu_millis"});
      break;
    case ReasonCode::kNoNodeFits:
    case ReasonCode::kFragmented:
      d.insert(d.end(), {"gpu_model=H100", "pool=west", "gpu_model=", "headroom_pool=default"});
      break;
    case ReasonCode::kOverBudget:
      d.insert(d.end(), {"2026-11 USD", "2026-11 GPU-hours", "2026-11"});
      break;
    case ReasonCode::kHeadroomReclaimed:
      d.insert(d.end(), {"ml/coder default", "ml/coder"});
      break;
    default:
      break;
  }
  return d;
}

// Every suffix a reason of any code can carry, one variant per branch.
std::vector<std::pair<std::string, Counts>> SuffixSets() {
  std::vector<std::pair<std::string, Counts>> s;
  for (std::int64_t in : {-5'000LL, 0LL, 999LL, 45'000LL, 60'000LL, 61'000LL, 3'600'000LL,
                          5'400'000LL, 86'400'000LL, 183'600'000LL, 90'061'000LL}) {
    for (std::int64_t reserved : {0, 1}) {
      s.push_back({"eta_in=" + std::to_string(in) + ",reserved=" + std::to_string(reserved),
                   {{std::string(kEtaInMs), in}, {std::string(kEtaReserved), reserved}}});
    }
  }
  for (std::int64_t why : {1, 2, 3, 4, 5}) {
    for (std::int64_t blockers : {0, 1, 2}) {
      s.push_back({"eta_unknown=" + std::to_string(why) + ",blockers=" + std::to_string(blockers),
                   {{std::string(kEtaUnknown), why},
                    {std::string(kEtaBlockedBy), 7},
                    {std::string(kEtaBlockers), blockers}}});
    }
  }
  for (std::int64_t in : {0LL, 30'000LL, 7'200'000LL, 93'600'000LL}) {
    s.push_back({"not_before_in=" + std::to_string(in),
                 {{"blocked_by", 10}, {std::string(kNotBeforeInMs), in}}});
  }
  s.push_back({"reserved_only", {{std::string(kReservedFreeGpus), 2}}});
  s.push_back({"reserved_and_eta",
               {{std::string(kReservedFreeGpus), 2},
                {std::string(kEtaInMs), 120'000},
                {std::string(kEtaReserved), 0}}});
  s.push_back({"reserved_zero", {{std::string(kReservedFreeGpus), 0}}});
  s.push_back({"attempts=2", {{"attempts", 2}}});
  s.push_back({"exhausted_only", {{"retries_exhausted", 1}}});
  s.push_back({"reclaim=2", {{std::string(kReclaimCandidates), 2}}});
  s.push_back({"preempt=0", {{std::string(kPreemptCandidates), 0}}});
  s.push_back(
      {"move=4,max=0", {{std::string(kMoveCandidates), 4}, {std::string(kMaxMovesKey), 0}}});
  s.push_back({"young=1",
               {{std::string(kEvictableAfterMinRuntime), 1},
                {std::string(kMinRuntimeEndsInMs), 3'725'000}}});
  s.push_back({"young=0", {{std::string(kEvictableAfterMinRuntime), 0}}});
  s.push_back({"ahead_jobs=0", {{std::string(kAheadJobs), 0}, {"position", 5}}});
  s.push_back({"would_fit=0", {{std::string(kWouldFitGpusPerReplica), 0}}});
  s.push_back({"gpus=1.5", {{"gpus_per_replica", 1}, {std::string(kSliceMgpu), 1500}}});
  return s;
}

std::vector<GoldenCase> Cases() {
  std::vector<GoldenCase> cases;
  for (int c = 0; c <= static_cast<int>(kLastReasonCode); ++c) {
    auto code = static_cast<ReasonCode>(c);
    for (const auto& [set, counts] : CountSets()) {
      for (const std::string& detail : DetailsFor(code)) {
        cases.push_back({std::string(ReasonCodeName(code)) + "/" + set + "/detail=" + detail,
                         {code, counts, detail},
                         std::nullopt});
      }
    }
  }
  for (ReasonCode code : {ReasonCode::kNoNodeFits, ReasonCode::kFragmented,
                          ReasonCode::kBehindInQueue, ReasonCode::kFailedExitCode}) {
    for (const auto& [set, counts] : SuffixSets()) {
      cases.push_back({std::string(ReasonCodeName(code)) + "/suffix/" + set,
                       {code, With({{"nodes", 2}, {"gpus_per_replica", 8}}, counts), ""},
                       std::nullopt});
    }
  }
  // Estimated starts from the renderer's now: absolute keys override the
  // cycle's relative ones.
  Reason head{ReasonCode::kNoNodeFits,
              {{"nodes", 1},
               {"gpus_per_replica", 8},
               {std::string(kCauseTooFewGpus), 1},
               {std::string(kEtaMs), 10'800'000},
               {std::string(kEtaInMs), 10'800'000},
               {std::string(kEtaReserved), 1}},
              ""};
  Reason behind{ReasonCode::kBehindInQueue,
                {{"blocked_by", 10},
                 {"position", 2},
                 {std::string(kNotBeforeMs), 7'200'000},
                 {std::string(kNotBeforeInMs), 7'200'000}},
                ""};
  Reason plain{ReasonCode::kRunning, {}, ""};
  for (std::int64_t now : {0LL, 3'600'000LL, 7'200'000LL, 9'000'000LL, 11'000'000LL}) {
    for (const auto& [name, r] :
         {std::pair{"head", head}, std::pair{"behind", behind}, std::pair{"plain", plain}}) {
      cases.push_back({std::string("now/") + name + "/" + std::to_string(now), r, now});
    }
  }
  // The node layer (sched/layers.h): causes least change first, the ones
  // that alone keep nodes out said with what lifting them would open.
  using Ranked = std::vector<std::pair<std::string, std::int64_t>>;
  struct LayerCase {
    std::string name;
    std::int64_t nodes;
    std::int64_t could_take;
    Ranked ranked;
    Counts alone;
  };
  const std::vector<LayerCase> layers{
      {"all_could", 4, 4, {}, {}},
      {"one_cause", 2, 0, {{std::string(kCauseSelector), 2}}, {{std::string(kCauseSelector), 2}}},
      {"taint_first",
       5,
       0,
       {{std::string(kCauseTaint), 4}, {std::string(kCauseGpuModel), 2}},
       {{std::string(kCauseTaint), 3}, {std::string(kCauseGpuModel), 1}}},
      {"none_alone",
       6,
       1,
       {{std::string(kCauseGpuModel), 3}, {std::string(kCauseSelector), 3}},
       {{std::string(kCauseGpuModel), 0}, {std::string(kCauseSelector), 0}}},
      {"unknown_cause", 3, 2, {{"a_cause_of_a_later_build", 1}}, {{"a_cause_of_a_later_build", 1}}},
  };
  for (const auto& l : layers) {
    cases.push_back({"node_layer/" + l.name, {}, std::nullopt, [l](Lang lang) {
                       return RenderNodeLayer(l.nodes, l.could_take, l.ranked, l.alone, lang);
                     }});
  }
  return cases;
}

std::string Render(const GoldenCase& c, Lang lang) {
  if (c.render) return c.render(lang);
  return c.now_ms ? RenderReason(c.reason, lang, *c.now_ms) : RenderReason(c.reason, lang);
}

std::string GoldenPath() {
  const char* root = std::getenv("BERTH_SOURCE_DIR");
  if (root == nullptr || *root == '\0') root = BERTH_SOURCE_DIR_DEFAULT;
  return std::string(root) + "/tests/unit/model/testdata/reason_golden.txt";
}

TEST(ReasonGoldenTest, EveryReasonRendersExactlyAsPinned) {
  std::vector<std::string> lines;
  for (const GoldenCase& c : Cases()) {
    for (Lang lang : {Lang::kEn, Lang::kZh}) {
      std::string text = Render(c, lang);
      ASSERT_EQ(text.find_first_of("\t\n"), std::string::npos) << c.name;
      lines.push_back(c.name + "\t" + std::string(LangName(lang)) + "\t" + text);
    }
    // The one-argument overload is the English one.
    if (!c.now_ms && !c.render) {
      EXPECT_EQ(RenderReason(c.reason), Render(c, Lang::kEn)) << c.name;
    }
  }
  const char* update = std::getenv("BERTH_UPDATE_REASON_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream out(GoldenPath(), std::ios::trunc);
    for (const auto& line : lines) out << line << '\n';
    ASSERT_TRUE(out.good()) << GoldenPath();
    GTEST_SKIP() << "rewrote " << GoldenPath();
  }
  std::ifstream in(GoldenPath());
  ASSERT_TRUE(in.good()) << "cannot read " << GoldenPath();
  std::vector<std::string> want;
  for (std::string line; std::getline(in, line);) want.push_back(line);
  ASSERT_EQ(lines.size(), want.size()) << "the set of cases changed; rerun with "
                                          "BERTH_UPDATE_REASON_GOLDEN=1 and review the diff";
  int shown = 0;
  for (std::size_t i = 0; i < lines.size() && shown < 20; ++i) {
    if (lines[i] != want[i]) {
      ++shown;
      ADD_FAILURE() << "line " << i + 1 << "\n  want: " << want[i] << "\n  got:  " << lines[i];
    }
  }
}

}  // namespace
}  // namespace berth::model
