#include "model/failure.h"

#include <gtest/gtest.h>

namespace berth::model {
namespace {

Reason Exited(int code) {
  return Reason{ReasonCode::kFailedExitCode, {{"replica", 0}, {"exit_code", code}}, {}};
}

TEST(ClassifyFailure, ACudaOutOfMemoryLineIsTheEvidence) {
  const std::string log =
      "epoch 1 step 10 loss 2.31\n"
      "Traceback (most recent call last):\n"
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "
      "79.15 GiB total capacity)\n"
      "exiting\n";
  auto f = ClassifyFailure(Exited(1), log);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->cls, FailureClass::kGpuOutOfMemory);
  EXPECT_EQ(f->evidence,
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "
            "79.15 GiB total capacity)");
  EXPECT_NE(RenderFailure(*f, Lang::kEn).find("ran out of memory"), std::string::npos);
  EXPECT_NE(RenderFailure(*f, Lang::kZh).find("显存不足"), std::string::npos);
  EXPECT_NE(RenderFailure(*f, Lang::kZh).find("Tried to allocate"), std::string::npos);
}

TEST(ClassifyFailure, TheMostBelievedCauseWinsWhateverItsPlaceInTheLog) {
  // A collective failure after an out-of-memory: the out-of-memory is the cause.
  auto f = ClassifyFailure(Exited(1),
                           "RuntimeError: CUDA error: out of memory\n"
                           "[rank1] ProcessGroupNCCL: Watchdog caught collective operation "
                           "timeout\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->cls, FailureClass::kGpuOutOfMemory);
  // A hardware error explains both.
  f = ClassifyFailure(Exited(1),
                      "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
                      "RuntimeError: CUDA error: out of memory\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->cls, FailureClass::kGpuHardware);
  EXPECT_EQ(f->evidence, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  f = ClassifyFailure(Exited(1), "torch.distributed.DistBackendError: NCCL error in: ...\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->cls, FailureClass::kCommunication);
}

TEST(ClassifyFailure, WithoutAKnownLineTheExitSpeaks) {
  auto f = ClassifyFailure(Exited(3), "loss is nan\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->cls, FailureClass::kUserCode);
  EXPECT_EQ(f->evidence, "exit code 3");
  f = ClassifyFailure(Exited(127), "sh: 1: trian.py: not found\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->cls, FailureClass::kCommandNotFound);
  Reason killed{ReasonCode::kFailedExitCode, {{"replica", 1}, {"signal", 9}}, {}};
  f = ClassifyFailure(killed, "");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->evidence, "signal 9");
}

TEST(ClassifyFailure, ReasonsThatAreNotFailuresHaveNoClass) {
  EXPECT_FALSE(ClassifyFailure(Reason{ReasonCode::kSucceeded, {}, {}}, "").has_value());
  EXPECT_FALSE(ClassifyFailure(Reason{ReasonCode::kNoNodeFits, {}, {}}, "").has_value());
  EXPECT_FALSE(ClassifyFailure(Reason{ReasonCode::kRunning, {}, {}}, "").has_value());
  // A waiting job's log is never read for a cause.
  EXPECT_FALSE(
      ClassifyFailure(Reason{ReasonCode::kQueued, {}, {}}, "CUDA out of memory").has_value());
}

TEST(ClassifyFailure, EveryOtherEndHasItsClassAndBothLanguages) {
  const std::vector<std::pair<Reason, FailureClass>> cases{
      {{ReasonCode::kFailedToStart, {{"replica", 0}}, "trian.py: not found"},
       FailureClass::kCommandNotFound},
      {{ReasonCode::kRunLost, {{"replica", 0}}, "agent restarted without it"},
       FailureClass::kNodeLost},
      {{ReasonCode::kMaxRuntimeExceeded, {{"max_runtime_s", 60}}, {}}, FailureClass::kMaxRuntime},
      {{ReasonCode::kCancelled, {}, "alice"}, FailureClass::kCancelled},  // "cancelled by alice"
      {{ReasonCode::kPreempted, {{"by_job", 7}, {"work_lost_ms", 1000}}, "vision/train"},
       FailureClass::kEvicted},
      {{ReasonCode::kMoved, {{"by_job", 7}, {"work_lost_ms", 1000}}, "vision/train"},
       FailureClass::kEvicted},
      {{ReasonCode::kOverQuota, {}, "vision"}, FailureClass::kRefused},
  };
  for (const auto& [reason, cls] : cases) {
    auto f = ClassifyFailure(reason, "");
    ASSERT_TRUE(f.has_value()) << ReasonCodeName(reason.code);
    EXPECT_EQ(f->cls, cls) << ReasonCodeName(reason.code);
    EXPECT_NE(RenderFailure(*f, Lang::kEn), RenderFailure(*f, Lang::kZh));
  }
  for (int c = 0; c <= static_cast<int>(kLastFailureClass); ++c) {
    Failure f{static_cast<FailureClass>(c), "x"};
    EXPECT_FALSE(FailureClassName(f.cls).empty());
    EXPECT_NE(RenderFailure(f, Lang::kEn).find("(evidence: x)"), std::string::npos);
    EXPECT_NE(RenderFailure(f, Lang::kZh).find("（依据：x）"), std::string::npos);
  }
}

}  // namespace
}  // namespace berth::model
