#include "sim/service_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <deque>
#include <fstream>
#include <limits>
#include <queue>
#include <sstream>

namespace berth::sim {
namespace {

std::unexpected<Error> Bad(std::size_t line, std::string what) {
  return Fail(Code::kInvalidArgument, fmt::format("LLM trace line {}: {}", line, what));
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool Number(std::string_view s, std::int64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc{} && p == s.data() + s.size();
}

// "2023-11-16 18:17:03.9799600" as µs since the epoch.
std::optional<std::int64_t> TimestampUs(std::string_view s) {
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  std::int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!Number(s.substr(0, 4), y) || !Number(s.substr(5, 2), mo) || !Number(s.substr(8, 2), d) ||
      !Number(s.substr(11, 2), h) || !Number(s.substr(14, 2), mi) ||
      !Number(s.substr(17, 2), sec) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
      sec > 60) {
    return std::nullopt;
  }
  std::int64_t us = 0;
  if (s.size() > 19) {
    if (s[19] != '.') return std::nullopt;
    std::string_view frac = s.substr(20);
    std::int64_t scale = 100'000;
    for (char c : frac) {
      if (c < '0' || c > '9') return std::nullopt;
      us += (c - '0') * scale;
      scale /= 10;
    }
  }
  const std::int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  return ((days * 24 + h) * 60 + mi) * 60'000'000 + sec * 1'000'000 + us;
}

// SplitMix64: a small generator whose output is the same everywhere.
struct SplitMix {
  std::uint64_t state;
  std::uint64_t Next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
};

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  k = std::min(k, v.size() - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

enum class ReplicaState { kStarting, kReady, kDraining, kStopped };

struct Replica {
  ReplicaState state = ReplicaState::kStarting;
  std::int64_t ready_at_us = 0;
  std::uint32_t in_flight = 0;
};

// One replay: the gateway queue, the replicas and the autoscaler's loop.
class Replay {
 public:
  Replay(const std::vector<LlmRequest>& requests, const ReplicaModel& model,
         const ServicePolicy& policy, TimeMs slo_ms)
      : requests_(requests), model_(model), policy_(policy), slo_us_(slo_ms * 1000) {}

  ServiceReplayResult Run();

 private:
  struct Completion {
    std::int64_t at_us;
    std::size_t replica;
    bool operator>(const Completion& o) const {
      return at_us != o.at_us ? at_us > o.at_us : replica > o.replica;
    }
  };

  void Advance(std::int64_t t);
  void Dispatch(std::int64_t t);
  void Sample(std::int64_t t);
  void Decide(std::int64_t t, bool poke);
  void Scale(std::int64_t t, std::uint32_t desired);
  std::uint32_t Count(ReplicaState s) const;
  void StartReplica(std::int64_t t, bool warm);

  const std::vector<LlmRequest>& requests_;
  const ReplicaModel& model_;
  const ServicePolicy& policy_;
  const std::int64_t slo_us_;

  std::vector<Replica> replicas_;
  std::vector<std::size_t> active_;  // not stopped
  std::deque<std::size_t> queue_;    // request indices waiting at the gateway
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions_;
  std::vector<bool> held_;  // arrived with no replica ready
  std::uint32_t in_flight_ = 0;

  // Integrals since the last sample, and the replica time.
  std::int64_t last_us_ = 0;
  double load_integral_ = 0;     // (in flight + queued) x µs
  double queued_integral_ = 0;   // queued x µs
  double replica_us_ = 0;        // until the horizon
  std::int64_t horizon_us_ = 0;  // the last arrival
  std::size_t arrivals_in_period_ = 0;
  std::vector<double> ttft_in_period_ms_;
  std::int64_t period_start_us_ = 0;

  std::vector<sched::AutoscaleSample> samples_;
  sched::AutoscaleState state_;
  ServiceReplayResult result_;
  std::vector<double> ttft_ms_;
  std::vector<double> e2e_ms_;
};

std::uint32_t Replay::Count(ReplicaState s) const {
  std::uint32_t n = 0;
  for (std::size_t i : active_) n += replicas_[i].state == s ? 1 : 0;
  return n;
}

void Replay::Advance(std::int64_t t) {
  if (t <= last_us_) return;
  const double dt = static_cast<double>(t - last_us_);
  load_integral_ += static_cast<double>(in_flight_ + queue_.size()) * dt;
  queued_integral_ += static_cast<double>(queue_.size()) * dt;
  if (last_us_ < horizon_us_) {
    const double until = static_cast<double>(std::min(t, horizon_us_) - last_us_);
    replica_us_ += static_cast<double>(active_.size()) * until;
  }
  last_us_ = t;
}

void Replay::StartReplica(std::int64_t t, bool warm) {
  Replica r;
  r.state = warm ? ReplicaState::kReady : ReplicaState::kStarting;
  r.ready_at_us = warm ? t : t + model_.cold_start_ms * 1000;
  if (!warm) ++result_.cold_starts;
  replicas_.push_back(r);
  active_.push_back(replicas_.size() - 1);
  result_.max_replicas = std::max(result_.max_replicas, static_cast<std::uint32_t>(active_.size()));
}

void Replay::Dispatch(std::int64_t t) {
  while (!queue_.empty()) {
    std::size_t best = replicas_.size();
    for (std::size_t i : active_) {
      const Replica& r = replicas_[i];
      if (r.state != ReplicaState::kReady || r.in_flight >= model_.max_concurrency) continue;
      if (best == replicas_.size() || r.in_flight < replicas_[best].in_flight) best = i;
    }
    if (best == replicas_.size()) return;
    const std::size_t q = queue_.front();
    queue_.pop_front();
    Replica& r = replicas_[best];
    ++r.in_flight;
    ++in_flight_;
    const LlmRequest& req = requests_[q];
    // The slowdown in hundredths: 100 + pct x (n - 1).
    const std::int64_t slow = 100 + static_cast<std::int64_t>(model_.slowdown_pct) *
                                        (static_cast<std::int64_t>(r.in_flight) - 1);
    const std::int64_t prefill = req.context_tokens * model_.prefill_us_per_token * slow / 100;
    const std::int64_t decode = req.generated_tokens * model_.decode_us_per_token * slow / 100;
    const std::int64_t ttft = t - req.arrival_us + prefill;
    const std::int64_t e2e = ttft + decode;
    ttft_ms_.push_back(static_cast<double>(ttft) / 1000.0);
    e2e_ms_.push_back(static_cast<double>(e2e) / 1000.0);
    ttft_in_period_ms_.push_back(static_cast<double>(ttft) / 1000.0);
    if (ttft <= slo_us_) ++result_.within_slo;
    if (held_[q]) {
      const double wait = static_cast<double>(t - req.arrival_us) / 1e6;
      result_.held_wait_s += wait;
      result_.held_wait_max_s = std::max(result_.held_wait_max_s, wait);
    }
    completions_.push({t + prefill + decode, best});
  }
}

void Replay::Sample(std::int64_t t) {
  const double period = static_cast<double>(t - period_start_us_);
  if (period <= 0) return;
  sched::AutoscaleSample s;
  s.time_ms = t / 1000;
  s.in_flight = in_flight_ + static_cast<std::int64_t>(queue_.size());
  s.requests = static_cast<std::int64_t>(arrivals_in_period_);
  switch (policy_.autoscaling.signal) {
    case model::AutoscaleSignal::kConcurrency:
      s.value_milli = std::llround(load_integral_ * 1000.0 / period);
      break;
    case model::AutoscaleSignal::kRps:
      s.value_milli = std::llround(static_cast<double>(arrivals_in_period_) * 1e9 / period);
      break;
    case model::AutoscaleSignal::kQueueDepth:
    case model::AutoscaleSignal::kMetric:  // as vllm:num_requests_waiting
      s.value_milli = std::llround(queued_integral_ * 1000.0 / period);
      break;
    case model::AutoscaleSignal::kP95Latency:
      s.value_milli = std::llround(Percentile(ttft_in_period_ms_, 0.95) * 1000.0);
      break;
  }
  samples_.push_back(s);
  // Decide reads no further back than the longest window.
  const TimeMs keep = std::max(policy_.autoscaling.stable_window_ms, kSampleEveryMs);
  while (!samples_.empty() && samples_.front().time_ms <= s.time_ms - keep) {
    samples_.erase(samples_.begin());
  }
  load_integral_ = 0;
  queued_integral_ = 0;
  arrivals_in_period_ = 0;
  ttft_in_period_ms_.clear();
  period_start_us_ = t;
}

void Replay::Decide(std::int64_t t, bool poke) {
  std::vector<sched::AutoscaleSample> window = samples_;
  if (poke) {
    // The gateway holds a request at a service with no replica and tells
    // the autoscaler at once, as berthd's will: a sample of what waits
    // (in the signal's unit where it counts requests; no latency yet).
    const std::int64_t waiting = in_flight_ + static_cast<std::int64_t>(queue_.size());
    const bool counts = policy_.autoscaling.signal == model::AutoscaleSignal::kConcurrency ||
                        policy_.autoscaling.signal == model::AutoscaleSignal::kQueueDepth ||
                        policy_.autoscaling.signal == model::AutoscaleSignal::kMetric;
    window.push_back({t / 1000, counts ? waiting * 1000 : 0, waiting, 1});
  }
  sched::AutoscaleInput in{policy_.autoscaling,
                           policy_.bounds,
                           t / 1000,
                           Count(ReplicaState::kReady),
                           Count(ReplicaState::kStarting),
                           window,
                           state_};
  const sched::AutoscaleDecision d = sched::Decide(in);
  state_ = d.state;
  ++result_.decisions[std::string(sched::AutoscaleCodeName(d.reason.code))];
  Scale(t, d.desired);
}

void Replay::Scale(std::int64_t t, std::uint32_t desired) {
  std::uint32_t current = Count(ReplicaState::kReady) + Count(ReplicaState::kStarting);
  while (current < desired) {
    StartReplica(t, false);
    ++current;
  }
  // Fewer: starting replicas first (newest first), then the ready ones with
  // the fewest requests, which drain.
  while (current > desired) {
    std::size_t pick = replicas_.size();
    for (auto it = active_.rbegin(); it != active_.rend(); ++it) {
      if (replicas_[*it].state == ReplicaState::kStarting) {
        pick = *it;
        break;
      }
    }
    if (pick == replicas_.size()) {
      for (std::size_t i : active_) {
        const Replica& r = replicas_[i];
        if (r.state != ReplicaState::kReady) continue;
        if (pick == replicas_.size() || r.in_flight < replicas_[pick].in_flight) pick = i;
      }
    }
    if (pick == replicas_.size()) break;
    Replica& r = replicas_[pick];
    r.state = r.in_flight == 0 ? ReplicaState::kStopped : ReplicaState::kDraining;
    if (r.state == ReplicaState::kStopped) std::erase(active_, pick);
    --current;
  }
}

ServiceReplayResult Replay::Run() {
  result_.policy = policy_.name;
  result_.requests = requests_.size();
  result_.slo_ms = slo_us_ / 1000;
  result_.replicas = policy_.autoscale
                         ? fmt::format("{}-{}", policy_.bounds.min, policy_.bounds.max)
                         : fmt::format("{}", policy_.static_replicas);
  held_.assign(requests_.size(), false);
  ttft_ms_.reserve(requests_.size());
  e2e_ms_.reserve(requests_.size());
  horizon_us_ = requests_.empty() ? 0 : requests_.back().arrival_us;
  if (policy_.autoscale) {
    // The service starts at its minimum, warm.
    for (std::uint32_t i = 0; i < policy_.bounds.min; ++i) StartReplica(0, true);
  } else {
    for (std::uint32_t i = 0; i < policy_.static_replicas; ++i) StartReplica(0, true);
  }
  constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kGiveUpUs = std::int64_t{86'400} * 1'000'000;
  const std::int64_t sample_every = kSampleEveryMs * 1000;
  const std::int64_t decide_every = policy_.decide_every_ms * 1000;
  std::int64_t next_sample = sample_every;
  std::int64_t next_decide = policy_.autoscale ? decide_every : kNever;
  std::size_t next = 0;
  while (next < requests_.size() || !completions_.empty() || !queue_.empty()) {
    std::int64_t next_ready = kNever;
    for (std::size_t i : active_) {
      if (replicas_[i].state == ReplicaState::kStarting) {
        next_ready = std::min(next_ready, replicas_[i].ready_at_us);
      }
    }
    const std::int64_t arrival = next < requests_.size() ? requests_[next].arrival_us : kNever;
    const std::int64_t done = completions_.empty() ? kNever : completions_.top().at_us;
    const std::int64_t t = std::min({arrival, done, next_ready, next_sample, next_decide});
    // Requests waiting with no replica and no autoscaler, or a service that
    // never catches up a day after the trace: stop.
    if (t == kNever || t > horizon_us_ + kGiveUpUs) break;
    Advance(t);
    if (done == t) {
      while (!completions_.empty() && completions_.top().at_us == t) {
        Replica& r = replicas_[completions_.top().replica];
        completions_.pop();
        --r.in_flight;
        --in_flight_;
        if (r.state == ReplicaState::kDraining && r.in_flight == 0) {
          r.state = ReplicaState::kStopped;
          std::erase(active_, static_cast<std::size_t>(&r - replicas_.data()));
        }
      }
    } else if (next_ready == t) {
      for (std::size_t i : active_) {
        Replica& r = replicas_[i];
        if (r.state == ReplicaState::kStarting && r.ready_at_us <= t)
          r.state = ReplicaState::kReady;
      }
    } else if (arrival == t) {
      held_[next] = Count(ReplicaState::kReady) == 0;
      if (held_[next]) ++result_.held;
      queue_.push_back(next);
      ++arrivals_in_period_;
      ++next;
      if (policy_.autoscale && Count(ReplicaState::kReady) + Count(ReplicaState::kStarting) == 0) {
        Decide(t, true);
      }
    } else if (next_sample == t) {
      Sample(t);
      next_sample += sample_every;
      if (next >= requests_.size() && completions_.empty() && queue_.empty()) break;
    } else {
      Decide(t, false);
      next_decide += decide_every;
    }
    Dispatch(t);
    // Ticks stop once nothing is left to arrive, run or wait.
    if (next >= requests_.size() && completions_.empty() && queue_.empty()) break;
  }
  Advance(std::max(last_us_, horizon_us_));
  result_.replica_hours = replica_us_ / 3.6e9;
  result_.ttft_p50_ms = Percentile(ttft_ms_, 0.50);
  result_.ttft_p95_ms = Percentile(ttft_ms_, 0.95);
  result_.ttft_p99_ms = Percentile(ttft_ms_, 0.99);
  result_.e2e_p99_ms = Percentile(e2e_ms_, 0.99);
  // A request never served (no replica, no autoscaler) misses its SLO.
  return result_;
}

}  // namespace

Result<std::vector<LlmRequest>> ReadAzureLlm(std::istream& in, TimeMs span_ms) {
  std::string line;
  if (!std::getline(in, line)) return Bad(1, "empty file; expected a header");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != "TIMESTAMP,ContextTokens,GeneratedTokens") {
    return Bad(1, fmt::format("header '{}' is not TIMESTAMP,ContextTokens,GeneratedTokens", line));
  }
  std::vector<LlmRequest> out;
  std::int64_t first = 0;
  std::int64_t last = 0;
  for (std::size_t n = 2; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto c1 = line.find(',');
    const auto c2 = c1 == std::string::npos ? c1 : line.find(',', c1 + 1);
    if (c2 == std::string::npos) return Bad(n, "expected 3 columns");
    auto ts = TimestampUs(std::string_view(line).substr(0, c1));
    std::int64_t ctx = 0;
    std::int64_t gen = 0;
    if (!ts) return Bad(n, "TIMESTAMP is not YYYY-MM-DD HH:MM:SS.fffffff");
    if (!Number(std::string_view(line).substr(c1 + 1, c2 - c1 - 1), ctx) ||
        !Number(std::string_view(line).substr(c2 + 1), gen) || ctx < 0 || gen < 0 ||
        ctx > 10'000'000 || gen > 10'000'000) {
      return Bad(n, "token counts must be whole numbers from 0 to 10000000");
    }
    if (out.empty()) first = *ts;
    if (*ts < last) return Bad(n, "rows are not in time order");
    last = *ts;
    const std::int64_t at = *ts - first;
    if (span_ms > 0 && at >= span_ms * 1000) break;
    out.push_back({at, static_cast<std::uint32_t>(ctx), static_cast<std::uint32_t>(gen)});
  }
  return out;
}

Result<std::vector<LlmRequest>> ReadAzureLlmFile(const std::filesystem::path& path,
                                                 TimeMs span_ms) {
  std::ifstream in(path);
  if (!in) return Fail(Code::kInvalidArgument, "cannot read " + path.string());
  return ReadAzureLlm(in, span_ms);
}

std::vector<LlmRequest> ScaleRate(const std::vector<LlmRequest>& requests, double scale,
                                  std::uint64_t seed) {
  SplitMix rng{seed};
  std::vector<LlmRequest> out;
  if (requests.empty() || scale <= 0) return out;
  const auto whole = static_cast<std::uint64_t>(std::floor(scale));
  const double frac = scale - static_cast<double>(whole);
  out.reserve(static_cast<std::size_t>(static_cast<double>(requests.size()) * scale) + 1);
  for (const LlmRequest& r : requests) {
    std::uint64_t copies = whole + (rng.Unit() < frac ? 1 : 0);
    for (std::uint64_t c = 0; c < copies; ++c) {
      if (c == 0) {
        out.push_back(r);
        continue;
      }
      const LlmRequest& tokens = requests[rng.Next() % requests.size()];
      out.push_back({r.arrival_us + static_cast<std::int64_t>(rng.Unit() * 1e6),
                     tokens.context_tokens, tokens.generated_tokens});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const LlmRequest& a, const LlmRequest& b) {
    return a.arrival_us < b.arrival_us;
  });
  return out;
}

double ReplicaThroughput(const ReplicaModel& m) {
  const double c = m.max_concurrency;
  return c / (1.0 + static_cast<double>(m.slowdown_pct) / 100.0 * (c - 1.0));
}

StaticSizes SizeStatic(const std::vector<LlmRequest>& requests, const ReplicaModel& model,
                       TimeMs window_ms) {
  StaticSizes s;
  if (requests.empty()) return s;
  auto work = [&](const LlmRequest& r) {
    return static_cast<double>(r.context_tokens * model.prefill_us_per_token +
                               r.generated_tokens * model.decode_us_per_token);
  };
  const double per_replica = ReplicaThroughput(model);
  const std::int64_t window_us = window_ms * 1000;
  double total = 0;
  double in_window = 0;
  double busiest = 0;
  std::size_t lo = 0;
  for (const LlmRequest& r : requests) {
    total += work(r);
    in_window += work(r);
    while (requests[lo].arrival_us <= r.arrival_us - window_us) in_window -= work(requests[lo++]);
    busiest = std::max(busiest, in_window);
  }
  const double span = std::max<double>(static_cast<double>(requests.back().arrival_us), 1.0);
  s.peak = static_cast<std::uint32_t>(
      std::max(1.0, std::ceil(busiest / static_cast<double>(window_us) / per_replica)));
  s.mean = static_cast<std::uint32_t>(std::max(1.0, std::ceil(total / span / per_replica)));
  return s;
}

ServicePolicy BerthPolicy(const model::ServiceSpec& spec) {
  ServicePolicy p;
  p.name = "berth";
  p.autoscale = true;
  p.autoscaling = spec.autoscaling;
  p.bounds = spec.replicas;
  return p;
}

ServicePolicy KnativeLikePolicy(const model::ServiceSpec& spec) {
  ServicePolicy p = BerthPolicy(spec);
  p.name = "knative-like";
  model::Autoscaling& a = p.autoscaling;
  a.target_utilization_pct = 70;
  a.stable_window_ms = 60'000;
  a.panic_window_ms = 6'000;
  a.panic_threshold_pct = 200;
  a.up_stabilization_ms = 0;
  a.down_stabilization_ms = 0;
  a.scale_to_zero.enabled = spec.replicas.min == 0;
  a.scale_to_zero.idle_window_ms = 30'000;
  return p;
}

ServicePolicy HpaLikePolicy(const model::ServiceSpec& spec) {
  ServicePolicy p = BerthPolicy(spec);
  p.name = "hpa-like";
  p.decide_every_ms = 15'000;
  model::Autoscaling& a = p.autoscaling;
  a.signal = model::AutoscaleSignal::kConcurrency;
  a.stable_window_ms = 15'000;
  a.panic_window_ms = 15'000;
  a.panic_threshold_pct = 0;
  a.up_stabilization_ms = 0;
  a.down_stabilization_ms = 300'000;
  a.scale_to_zero.enabled = false;
  p.bounds.min = std::max<std::uint32_t>(p.bounds.min, 1);
  return p;
}

ServicePolicy StaticPolicy(std::string name, std::uint32_t replicas) {
  ServicePolicy p;
  p.name = std::move(name);
  p.static_replicas = replicas;
  return p;
}

Result<ServiceReplayResult> ReplayService(const std::vector<LlmRequest>& requests,
                                          const ReplicaModel& model, const ServicePolicy& policy,
                                          TimeMs slo_ms) {
  if (model.max_concurrency == 0) {
    return Fail(Code::kInvalidArgument, "a replica must take at least one request at a time");
  }
  if (!policy.autoscale && policy.static_replicas == 0) {
    return Fail(Code::kInvalidArgument, policy.name + ": a static policy needs replicas");
  }
  if (policy.autoscale && policy.decide_every_ms <= 0) {
    return Fail(Code::kInvalidArgument, policy.name + ": the autoscaler needs a positive tick");
  }
  Replay replay(requests, model, policy, slo_ms);
  return replay.Run();
}

std::string RenderServiceTable(const std::vector<ServiceReplayResult>& results) {
  constexpr std::string_view kRow =
      "{:<13} {:>8} {:>9} {:>4} {:>8} {:>8} {:>7} {:>7} {:>8} {:>6} {:>6} {:>9} {:>8}\n";
  std::string out =
      fmt::format(kRow, "policy", "replicas", "replica-h", "max", "SLO met", "TTFT p50", "p95",
                  "p99", "e2e p99", "cold", "held", "held wait", "max wait");
  out += fmt::format(kRow, "", "", "", "", "", "ms", "ms", "ms", "ms", "starts", "reqs", "s (sum)",
                     "s");
  for (const auto& r : results) {
    out += fmt::format(
        "{:<13} {:>8} {:>9.2f} {:>4} {:>7.2f}% {:>8.0f} {:>7.0f} {:>7.0f} {:>8.0f} {:>6} {:>6} "
        "{:>9.1f} {:>8.1f}\n",
        r.policy, r.replicas, r.replica_hours, r.max_replicas, 100.0 * r.SloAttainment(),
        r.ttft_p50_ms, r.ttft_p95_ms, r.ttft_p99_ms, r.e2e_p99_ms, r.cold_starts, r.held,
        r.held_wait_s, r.held_wait_max_s);
  }
  return out;
}

}  // namespace berth::sim
