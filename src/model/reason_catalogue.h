// The words of every reason, English and Simplified Chinese side by side: one
// entry per ReasonCode and one per phrase that several reasons share (what a
// replica needs, the queue's numbers, an estimated start, ...). Templates use
// the syntax of model/message_template.h; model/reason.cc computes the
// arguments once per reason, for both languages, so the languages differ only
// in words. tests/unit/model/reason_catalogue_test.cc checks that every entry
// has both languages and that they name the same placeholders.
//
// To add a reason code: add its entry to kCodeTexts (in the enum's order; the
// build checks it), set its arguments in CodeArgs (model/reason.cc), and add
// cases to tests/unit/model/reason_golden_test.cc.
#pragma once

#include <span>
#include <string_view>

#include "model/reason.h"

namespace berth::model {

// One message in both languages.
struct Message {
  std::string_view en;
  std::string_view zh;

  [[nodiscard]] std::string_view In(Lang lang) const { return lang == Lang::kZh ? zh : en; }
};

// Phrases shared by several reasons or appended to any of them.
enum class Phrase {
  kListSeparator,  // between node causes
  kPartSeparator,  // between eviction notes
  kNeed,           // what one replica needs: GPUs, a share or a memory slice
  kAhead,          // jobs ahead of it in its queue
  kWouldRunWithGpus,
  kWouldRunWithModel,
  kWouldRunWithGpuMemory,
  kWouldRunInPool,
  kQuotaGpus,   // a queue's numbers for a GPU resource
  kQuotaOther,  // the same for another resource
  kAttempts,
  kRetriesExhausted,
  // The policy's retry cap, not the job's retry block, ran out: {source}
  // (one of the two below), {one} or {many} attempts, {asked}.
  kRetriesCapped,
  kRetryCapQueue,
  kRetryCapPolicy,
  kReservedGpus,
  kEtaKnown,
  kEtaGpusReserved,
  kEtaEstimate,
  kEtaPredicted,   // an estimate that stands on predicted run times
  kEtaUnknownWhy,  // "; estimated start unknown: {why}", why one of the four below
  kEtaUnknownBlocked,
  kEtaUnknownCapacity,
  kEtaUnknownQuota,
  kEtaUnknownInfeasible,
  kEtaUnknownOther,  // an EtaUnknown value this build does not know (berth why's field)
  kNotBefore,
  kDays,  // durations for people: "2d 3h", "1h 20m", "12m 5s", "45s"
  kHours,
  kMinutes,
  kSeconds,
  kGpuAmount,    // GPUs for people: "1 GPU", "0.5 GPU", "6 GPUs"
  kCoreAmount,   // CPU cores: "1 core", "4 cores"
  kClock,        // a clock time on the day of the reference time: "14:30 UTC"
  kClockDate,    // on another day: "2026-12-05 14:30 UTC"
  kResourceCpu,  // quota resources other than GPUs, by name
  kResourceMemory,
  kResourceGpuMemory,
  kEviction,  // heads the eviction notes
  kReliefNotBelowGuarantee,
  kReliefNoLentGpus,
  kReliefReclaimAll,
  kReliefNoPreemptible,
  kReliefPreemptAll,
  kReliefNoMovable,
  kReliefMoveAll,
  kReliefAfterMinRuntime,
  kReliefReclaimGrace,  // waiting out the policy's reclaim_grace
  kJobRef,              // another job a reason names: "job 42", or hidden: "job of another tenant"
  // Kept out of a pool's inference headroom (kCauseInferenceHeadroom).
  kWouldRunPreemptible,
  // A pool its queue is not bound to has room (a platform admin's change).
  kWouldRunIfQueueBound,
  // The node layer of a reason about something else (sched/layers.h).
  kNodeLayer,
  // A job with an image and nodes without a container runtime
  // (kNodesWithoutContainerRuntime).
  kNeedsContainerRuntime,
  // One cause of the node layer and the nodes lifting it alone would open
  // ({change}: NodeCauseChanges' words).
  kNodeLayerAlone,
  // A forecast's start (control/forecaster.h): {in} or due now, {at}, {how}
  // (one of the two below), {ago} since it was made.
  kForecast,
  kForecastDeclared,
  kForecastPredicted,
};
inline constexpr Phrase kLastPhrase = Phrase::kForecastPredicted;

// A node cause of kNoNodeFits (a key of Reason::counts) and its words; "{n}"
// is how many nodes it rejected.
struct NodeCauseText {
  std::string_view key;
  Message text;
};

const Message& CodeText(ReasonCode code);
const Message& PhraseText(Phrase phrase);
// In the order the causes are listed.
std::span<const NodeCauseText> NodeCauseTexts();
// The change that lifts each node cause ("tolerating the taint"), the same
// keys in the same order as NodeCauseTexts, without placeholders: the node
// layer says what one change alone would open (Phrase::kNodeLayerAlone).
std::span<const NodeCauseText> NodeCauseChanges();
// The enumerator's name without its 'k', for test messages.
std::string_view PhraseName(Phrase phrase);

}  // namespace berth::model
