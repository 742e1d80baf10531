// berth-fault-trial: Berth's control plane under faults, checked from its
// history (docs/testing.md "Fault trials"). Starts a PostgreSQL 15 server
// of its own, three berthd on it (--store, --leader-ttl) and three
// berth-agent processes (simulated nodes of 4 GPUs), every link through a
// relay it can cut: each berthd to the database, each agent to each berthd.
//
// Clients acting for two tenants submit short jobs and cancel some of them
// the whole time, following the leader as the CLI does. Each job appends a
// line to a witness file when it starts (job, run, node, GPUs, wall clock)
// and when it ends, so the trial knows what really ran where, apart from
// what the control plane says. Meanwhile --faults faults, drawn from a
// seeded schedule:
//
//   kill-leader     kill -9 of the leader; it comes back as a standby
//   pause-leader    SIGSTOP of the leader past its lease, then SIGCONT: it
//                   must find itself deposed and step down
//   kill-agent      kill -9 of an agent, started again a moment later
//   restart-db      PostgreSQL stopped at once and started again
//   cut-leader-db   the leader's link to the database cut past the lease:
//                   it must step down; healed, it comes back as a standby
//   cut-agent       one agent's link to the leader cut for a few seconds
//
// Each round of six faults holds every kind once, in a seeded order.
// After each fault the trial waits until a leader serves and every node is
// Ready, and records how long that took. At the end it stops the load,
// waits for every acknowledged job to finish, restarts the whole control
// plane from the database, and checks the history:
//
//   - every acknowledged submission exists, and finished;
//   - job states only move forward (a finished job never changes; the
//     timeline ends with its one terminal event);
//   - no run started twice; no job had two runs going at once;
//   - no GPU was held by two runs at once;
//   - every finished run is metered exactly once;
//   - an acknowledged cancel is never forgotten.
//
// Exit status 0 when every check passes. With --broken-fence the three
// berthd run with BERTH_FAILPOINTS=fence.off (no write fence, no stepping
// down), the faults are pauses of the leader, and the status is 0 only
// when the checker catches the broken control plane.
#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "integration/harness.h"
#include "support/pg_server.h"

namespace {

using namespace berth::it;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr int kMembers = 3;  // berthd
constexpr int kAgents = 3;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Terminal(const std::string& s) {
  return s == "Succeeded" || s == "Failed" || s == "Cancelled";
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// What a client was told: a submission's id, or a cancel's answer.
struct Ack {
  enum Kind { kSubmit, kCancel } kind;
  std::int64_t job = 0;
  std::string tenant;
  std::int64_t at_ms = 0;
  std::string state;  // the job's state in the answer
};

// A sampled state of a job, as the leader of the moment answered it.
struct Seen {
  std::int64_t job = 0;
  std::int64_t at_ms = 0;
  std::string state;
};

// One run as the job itself saw it, from the witness file.
struct WitnessRun {
  std::int64_t job = 0;
  std::string run;
  std::string node;
  std::vector<std::string> gpus;
  std::int64_t start_ms = 0;
  std::int64_t end_ms = kNever;
  int starts = 0;
};

struct FaultRecord {
  std::string kind;
  double recovery_ms = 0;  // from the fault's end to a leader serving and every node Ready
  bool recovered = false;
};

class Trial {
 public:
  Trial(int faults, std::uint32_t seed, std::string ttl, bool broken, bool keep)
      : faults_(faults), rng_(seed), ttl_(std::move(ttl)), broken_(broken), keep_(keep) {}

  int Run();

 private:
  bool SetUp();
  void Client(int index, std::string tenant);
  void Observer();
  std::string Script(int seconds_tenths) const;
  // Replies from the first member that serves, starting from the one that
  // served last; status 0 when none did.
  Reply Call(const std::function<Reply(const Http&)>& op, std::size_t& hint);
  // The members whose /readyz answers 200 now.
  std::vector<int> Leaders();
  // Starts every member that is not running, and every agent that is not.
  void Revive();
  // Waits until a leader serves and every node is Ready on it.
  bool Recovered(Ms timeout);
  void StartAgentProcess(int a);
  std::string AgentServers(int a) const;
  void Fault(const std::string& kind);
  std::string DrawFault();
  bool Drain(Ms timeout);
  int Check();
  void Violation(std::string what);

  int faults_;
  std::mt19937 rng_;
  std::string ttl_;
  bool broken_;
  bool keep_;
  Ms ttl_ms_{3000};

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<berth::tests::PgServer> db_;
  std::vector<std::unique_ptr<Relay>> db_links_;            // member -> database
  std::vector<std::vector<std::unique_ptr<Relay>>> links_;  // [agent][member]
  std::vector<std::unique_ptr<Berthd>> members_;
  std::vector<std::unique_ptr<Process>> agents_;
  std::vector<std::unique_ptr<Http>> http_;  // short timeouts, one per member
  std::filesystem::path witness_;
  std::filesystem::path cluster_[kAgents];
  std::string token_;

  std::atomic<bool> stop_load_{false};
  std::mutex mu_;  // guards acks_, seen_, ids_
  std::vector<Ack> acks_;
  std::vector<Seen> seen_;
  std::vector<std::int64_t> ids_;
  std::atomic<int> unanswered_{0};

  std::vector<std::string> deck_;  // the fault kinds still to deal this round
  std::vector<FaultRecord> records_;
  std::vector<std::string> violations_;
};

std::string Trial::Script(int tenths) const {
  const std::string w = witness_.string();
  return fmt::format(
      "echo \"start $BERTH_JOB_ID $BERTH_RUN_ID $BERTH_NODE $BERTH_GPU_UUIDS $(date +%s%3N)\" >> "
      "{0}; trap 'echo \"end $BERTH_RUN_ID $(date +%s%3N)\" >> {0}; exit 143' TERM; "
      "sleep {1}.{2} & wait $!; echo \"end $BERTH_RUN_ID $(date +%s%3N)\" >> {0}",
      w, tenths / 10, tenths % 10);
}

Reply Trial::Call(const std::function<Reply(const Http&)>& op, std::size_t& hint) {
  // As the CLI with several --server addresses does, and then some: a
  // takeover takes a few seconds, so keep going round for up to 8 s.
  const auto deadline = std::chrono::steady_clock::now() + 8s;
  for (int tries = 1; std::chrono::steady_clock::now() < deadline; ++tries) {
    const Http& http = *http_[hint % kMembers];
    Reply r = op(http);
    if (r.status != 0 && r.status != 503) return r;
    hint = (hint + 1) % kMembers;
    if (tries % kMembers == 0) std::this_thread::sleep_for(100ms);
  }
  return {};
}

void Trial::Client(int index, std::string tenant) {
  std::mt19937 rng(static_cast<std::uint32_t>(index * 7919 + 17));
  std::size_t hint = 0;
  std::vector<std::int64_t> mine;
  int n = 0;
  while (!stop_load_) {
    std::uniform_int_distribution<int> pct(0, 99);
    if (!mine.empty() && pct(rng) < 20) {
      const std::int64_t id =
          mine[std::uniform_int_distribution<std::size_t>(0, mine.size() - 1)(rng)];
      Reply r = Call(
          [&](const Http& h) {
            return h.Post(fmt::format("/v1/jobs/{}/cancel", id), "{}", "application/json");
          },
          hint);
      if (r.status == 200 && r.body.is_object()) {
        std::lock_guard lock(mu_);
        acks_.push_back({Ack::kCancel, id, tenant, WallMs(), r.body.value("state", "")});
      } else if (r.status == 0) {
        ++unanswered_;
      }
    } else {
      const int gpus = pct(rng) < 70 ? 1 : 2;
      const int tenths = std::uniform_int_distribution<int>(3, 25)(rng);
      json spec{{"name", fmt::format("{}-{}-{}", tenant, index, n++)},
                {"tenant", tenant},
                {"queue", "main"},
                {"command", {"sh", "-c", Script(tenths)}},
                {"resources", {{"gpus", gpus}}}};
      const std::string body = spec.dump();
      Reply r =
          Call([&](const Http& h) { return h.Post("/v1/jobs", body, "application/json"); }, hint);
      if (r.status == 201 && r.body.is_object()) {
        const auto id = r.body.value("id", std::int64_t{0});
        mine.push_back(id);
        std::lock_guard lock(mu_);
        acks_.push_back({Ack::kSubmit, id, tenant, WallMs(), r.body.value("state", "")});
        ids_.push_back(id);
      } else if (r.status == 0) {
        ++unanswered_;
      } else {
        std::cerr << "client " << index << ": submission refused: HTTP " << r.status << " "
                  << r.text << "\n";
      }
    }
    std::this_thread::sleep_for(Ms(std::uniform_int_distribution<int>(400, 900)(rng)));
  }
}

void Trial::Observer() {
  std::mt19937 rng(4242);
  std::size_t hint = 0;
  std::set<std::int64_t> done;
  while (!stop_load_) {
    std::vector<std::int64_t> open;
    {
      std::lock_guard lock(mu_);
      for (std::int64_t id : ids_) {
        if (!done.contains(id)) open.push_back(id);
      }
    }
    std::shuffle(open.begin(), open.end(), rng);
    if (open.size() > 12) open.resize(12);
    for (std::int64_t id : open) {
      Reply r = Call([&](const Http& h) { return h.Get(fmt::format("/v1/jobs/{}", id)); }, hint);
      if (r.status != 200 || !r.body.is_object()) continue;
      const std::string state = r.body.value("state", "");
      std::lock_guard lock(mu_);
      seen_.push_back({id, WallMs(), state});
      if (Terminal(state) && std::uniform_int_distribution<int>(0, 3)(rng) == 0) done.insert(id);
    }
    std::this_thread::sleep_for(300ms);
  }
}

std::vector<int> Trial::Leaders() {
  std::vector<int> out;
  for (int m = 0; m < kMembers; ++m) {
    if (members_[m]->running() && http_[m]->Get("/readyz").status == 200) out.push_back(m);
  }
  return out;
}

std::string Trial::AgentServers(int a) const {
  // Each agent lists the members in another order, as operators do.
  std::string out;
  for (int i = 0; i < kMembers; ++i) {
    const int m = (a + i) % kMembers;
    if (!out.empty()) out += ",";
    out += fmt::format("127.0.0.1:{}", links_[a][m]->port());
  }
  return out;
}

void Trial::StartAgentProcess(int a) {
  agents_[a] =
      StartAgent(*dir_, *members_[0], dir_->path() / fmt::format("agent-{}", a), cluster_[a],
                 fmt::format("agent-{}.log", a), {}, {"--server", AgentServers(a)});
}

void Trial::Revive() {
  for (int m = 0; m < kMembers; ++m) {
    if (members_[m]->running()) continue;
    if (!members_[m]->StartAnyRole(30s)) {
      std::cerr << "berthd-" << m << " did not start again\n";
    }
    members_[m]->set_token(token_);
  }
  for (int a = 0; a < kAgents; ++a) {
    if (!agents_[a]->running()) StartAgentProcess(a);
  }
}

bool Trial::Recovered(Ms timeout) {
  return WaitFor(
      [&] {
        Revive();
        auto leaders = Leaders();
        if (leaders.empty()) return false;
        Reply nodes = http_[leaders[0]]->Get("/v1/nodes");
        if (nodes.status != 200 || !nodes.body.contains("nodes")) return false;
        int ready = 0;
        for (const json& n : nodes.body["nodes"]) ready += n.value("state", "") == "Ready";
        return ready == kAgents;
      },
      timeout, 100ms);
}

std::string Trial::DrawFault() {
  if (broken_) return "pause-leader";
  // A deck of every kind, shuffled and dealt, then shuffled again: any six
  // faults in a row from the start hold each kind once.
  if (deck_.empty()) {
    deck_ = {"kill-leader", "pause-leader",  "kill-agent",
             "restart-db",  "cut-leader-db", "cut-agent"};
    std::shuffle(deck_.begin(), deck_.end(), rng_);
  }
  std::string kind = deck_.back();
  deck_.pop_back();
  return kind;
}

void Trial::Fault(const std::string& kind) {
  auto leaders = Leaders();
  const int leader = leaders.empty() ? -1 : leaders[0];
  const Ms past_lease = ttl_ms_ + ttl_ms_ / 2;
  if (kind == "kill-leader" && leader >= 0) {
    members_[leader]->Kill();
  } else if (kind == "pause-leader" && leader >= 0) {
    ::kill(members_[leader]->pid(), SIGSTOP);
    std::this_thread::sleep_for(past_lease);
    ::kill(members_[leader]->pid(), SIGCONT);
    // A berthd that finds itself deposed steps down at once; give it a
    // renewal's time to find out.
    std::this_thread::sleep_for(ttl_ms_ / 2);
  } else if (kind == "kill-agent") {
    const int a = std::uniform_int_distribution<int>(0, kAgents - 1)(rng_);
    agents_[a]->Kill(SIGKILL);
    agents_[a]->Wait(5s);
    std::this_thread::sleep_for(Ms(std::uniform_int_distribution<int>(200, 1500)(rng_)));
  } else if (kind == "restart-db") {
    if (auto up = db_->Restart(); !up) std::cerr << "PostgreSQL did not restart: " << up.error();
  } else if (kind == "cut-leader-db" && leader >= 0) {
    db_links_[leader]->Cut();
    std::this_thread::sleep_for(past_lease);
    db_links_[leader]->Heal();
  } else if (kind == "cut-agent" && leader >= 0) {
    const int a = std::uniform_int_distribution<int>(0, kAgents - 1)(rng_);
    links_[a][leader]->Cut();
    std::this_thread::sleep_for(Ms(std::uniform_int_distribution<int>(1000, 4000)(rng_)));
    links_[a][leader]->Heal();
  }
}

bool Trial::SetUp() {
  dir_ = std::make_unique<TempDir>("berth-fault-trial");
  if (keep_) dir_->keep();
  witness_ = dir_->path() / "witness";
  // Each tenant's jobs run as a user of its own (docs/security.md): the
  // witness is everyone's to append to.
  WriteFile(witness_, "");
  std::filesystem::permissions(
      witness_, std::filesystem::perms::all &
                    ~(std::filesystem::perms::owner_exec | std::filesystem::perms::group_exec |
                      std::filesystem::perms::others_exec));
  auto server = berth::tests::PgServer::Start();
  if (!server) {
    std::cerr << "cannot start PostgreSQL: " << server.error() << "\n";
    return false;
  }
  db_ = std::move(*server);
  for (int m = 0; m < kMembers; ++m) db_links_.push_back(std::make_unique<Relay>(db_->port()));
  for (int m = 0; m < kMembers; ++m) {
    BerthdOptions o;
    o.name = fmt::format("berthd-{}", m);
    o.all_in_one = false;
    o.extra_args = {"--store",
                    fmt::format("host=127.0.0.1 port={} user=postgres dbname=postgres "
                                "connect_timeout=2",
                                db_links_[m]->port()),
                    "--leader-ttl",
                    ttl_,
                    "--rate-limit",
                    "0"};
    if (broken_) o.env["BERTH_FAILPOINTS"] = "fence.off";
    members_.push_back(std::make_unique<Berthd>(*dir_, o));
  }
  if (!members_[0]->Start(30s)) {
    std::cerr << "berthd-0 did not lead:\n" << members_[0]->log();
    return false;
  }
  token_ = members_[0]->http().token();
  for (int m = 1; m < kMembers; ++m) {
    if (!members_[m]->StartStandby(30s)) {
      std::cerr << "berthd-" << m << " did not stand by:\n" << members_[m]->log();
      return false;
    }
    members_[m]->set_token(token_);
  }
  for (int m = 0; m < kMembers; ++m) {
    http_.push_back(std::make_unique<Http>(members_[m]->api_port(), 2s));
    http_.back()->set_token(token_);
  }
  const std::string policy =
      "queues:\n  - name: default\n    children:\n      - name: default\n  - name: red\n"
      "    children:\n      - name: main\n  - name: blue\n    children:\n      - name: main\n";
  if (auto r = http_[0]->Post("/v1/policy", policy); r.status != 200 && r.status != 201) {
    std::cerr << "the policy was refused: HTTP " << r.status << " " << r.text << "\n";
    return false;
  }
  links_.resize(kAgents);
  for (int a = 0; a < kAgents; ++a) {
    for (int m = 0; m < kMembers; ++m) {
      const int port = std::stoi(
          members_[m]->agent_address().substr(members_[m]->agent_address().rfind(':') + 1));
      links_[a].push_back(std::make_unique<Relay>(port));
    }
    cluster_[a] = dir_->path() / fmt::format("node-{}.yaml", a);
    WriteFile(cluster_[a], fmt::format("nodes:\n  - name: trial-node-{}\n    cpus: 16\n    memory: "
                                       "64Gi\n    gpus: {{model: H100-80GB, memory: 80Gi, count: "
                                       "4}}\n",
                                       a));
  }
  agents_.resize(kAgents);
  for (int a = 0; a < kAgents; ++a) StartAgentProcess(a);
  if (!Recovered(60s)) {
    std::cerr << "the agents did not register:\n" << members_[0]->log();
    return false;
  }
  return true;
}

bool Trial::Drain(Ms timeout) {
  std::vector<std::int64_t> ids;
  {
    std::lock_guard lock(mu_);
    ids = ids_;
  }
  std::size_t hint = 0;
  std::size_t next = 0;
  return WaitFor(
      [&] {
        Revive();
        while (next < ids.size()) {
          Reply r = Call(
              [&](const Http& h) { return h.Get(fmt::format("/v1/jobs/{}", ids[next])); }, hint);
          if (r.status != 200 || !Terminal(r.body.value("state", ""))) return false;
          ++next;
        }
        return true;
      },
      timeout, 500ms);
}

void Trial::Violation(std::string what) {
  if (violations_.size() < 200) std::cerr << "VIOLATION: " << what << "\n";
  violations_.push_back(std::move(what));
}

int Trial::Check() {
  // The database's truth: one berthd started afresh on it, nothing else.
  for (auto& m : members_) m->Kill();
  for (auto& l : db_links_) l->Heal();
  if (!members_[0]->WaitUntilReady(1ms)) {
    if (!members_[0]->StartAnyRole(30s) || !members_[0]->WaitUntilReady(30s)) {
      std::cerr << "berthd-0 did not lead at the end:\n" << members_[0]->log();
      return 1;
    }
  }
  members_[0]->set_token(token_);
  Http final_http(members_[0]->api_port(), 30s);
  final_http.set_token(token_);

  // Witness: what ran, where, when.
  std::map<std::string, WitnessRun> runs;
  {
    std::ifstream in(witness_);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string what;
      f >> what;
      if (what == "start") {
        WitnessRun r;
        std::string gpus;
        f >> r.job >> r.run >> r.node >> gpus >> r.start_ms;
        std::stringstream g(gpus);
        for (std::string one; std::getline(g, one, ',');) r.gpus.push_back(one);
        WitnessRun& have = runs[r.run];
        const int starts = have.starts;
        if (starts == 0) have = r;
        have.starts = starts + 1;
      } else if (what == "end") {
        std::string run;
        std::int64_t at = 0;
        f >> run >> at;
        runs[run].end_ms = std::min(runs[run].end_ms, at);
      }
    }
  }

  std::map<std::int64_t, json> jobs;
  std::vector<Ack> acks;
  std::vector<Seen> seen;
  {
    std::lock_guard lock(mu_);
    acks = acks_;
    seen = seen_;
  }
  for (const Ack& a : acks) {
    if (jobs.contains(a.job)) continue;
    Reply r = final_http.Get(fmt::format("/v1/jobs/{}", a.job));
    if (r.status == 404) {
      Violation(
          fmt::format("job {} ({}) was acknowledged at {} and is gone", a.job, a.tenant, a.at_ms));
      continue;
    }
    if (r.status != 200) {
      Violation(fmt::format("job {}: HTTP {} at the end", a.job, r.status));
      continue;
    }
    jobs[a.job] = r.body;
  }

  // Finished, and states only forward.
  for (const auto& [id, job] : jobs) {
    const std::string state = job.value("state", "");
    if (!Terminal(state)) Violation(fmt::format("job {} never finished: {}", id, state));
    int terminal_events = 0;
    bool terminal_last = true;
    const json& timeline = job.contains("timeline") ? job["timeline"] : json::array();
    for (std::size_t i = 0; i < timeline.size(); ++i) {
      if (Terminal(timeline[i].value("state", ""))) {
        ++terminal_events;
        terminal_last = i + 1 == timeline.size();
      }
    }
    if (terminal_events > 1 || (terminal_events == 1 && !terminal_last)) {
      Violation(
          fmt::format("job {}: its timeline leaves a finished state: {}", id, timeline.dump()));
    }
  }
  std::map<std::int64_t, std::vector<const Seen*>> by_job;
  for (const Seen& s : seen) by_job[s.job].push_back(&s);
  for (auto& [id, samples] : by_job) {
    std::stable_sort(samples.begin(), samples.end(),
                     [](const Seen* a, const Seen* b) { return a->at_ms < b->at_ms; });
    std::string finished;
    for (const Seen* s : samples) {
      if (!finished.empty() && s->state != finished) {
        Violation(fmt::format("job {} was seen {} and later {} (at {})", id, finished, s->state,
                              s->at_ms));
        break;
      }
      if (Terminal(s->state)) finished = s->state;
    }
    if (!finished.empty() && jobs.contains(id) && jobs[id].value("state", "") != finished) {
      Violation(fmt::format("job {} was seen {} and ended {}", id, finished,
                            jobs[id].value("state", "")));
    }
  }

  // What ran: once per run, one run of a job at a time, one run per GPU.
  std::map<std::int64_t, std::vector<const WitnessRun*>> runs_of;
  std::map<std::string, std::vector<const WitnessRun*>> on_gpu;
  int without_end = 0;
  for (auto& [id, r] : runs) {
    if (r.starts == 0) continue;  // an end without a start: a torn line
    if (r.starts > 1) Violation(fmt::format("run {} started {} times", id, r.starts));
    if (r.end_ms == kNever) {
      ++without_end;
      if (jobs.contains(r.job) && !jobs[r.job]["finished_at_ms"].is_null()) {
        r.end_ms = jobs[r.job]["finished_at_ms"].get<std::int64_t>();
      }
    }
    runs_of[r.job].push_back(&r);
    for (const std::string& g : r.gpus) on_gpu[r.node + "/" + g].push_back(&r);
  }
  auto overlaps = [](std::vector<const WitnessRun*>& v,
                     const std::function<void(const WitnessRun&, const WitnessRun&)>& report) {
    std::sort(v.begin(), v.end(),
              [](const WitnessRun* a, const WitnessRun* b) { return a->start_ms < b->start_ms; });
    std::int64_t busy_until = 0;
    const WitnessRun* holder = nullptr;
    for (const WitnessRun* r : v) {
      if (holder != nullptr && r->start_ms < busy_until) report(*holder, *r);
      if (r->end_ms > busy_until) {
        busy_until = r->end_ms;
        holder = r;
      }
    }
  };
  for (auto& [job, v] : runs_of) {
    overlaps(v, [&](const WitnessRun& a, const WitnessRun& b) {
      Violation(fmt::format("job {}: run {} started at {} while run {} ran until {}", job, b.run,
                            b.start_ms, a.run, a.end_ms));
    });
  }
  for (auto& [gpu, v] : on_gpu) {
    overlaps(v, [&](const WitnessRun& a, const WitnessRun& b) {
      Violation(fmt::format("GPU {}: run {} started at {} while run {} held it until {}", gpu,
                            b.run, b.start_ms, a.run, a.end_ms));
    });
  }

  // Metered once: one usage record per run that ran and finished.
  Reply usage = GetAllPages(final_http, "/v1/usage/records?from=0", "records");
  std::map<std::string, int> records;
  if (usage.status != 200) {
    Violation(fmt::format("the usage records did not load: HTTP {} {}", usage.status, usage.text));
  } else {
    for (const json& rec : usage.body["records"]) ++records[rec.value("run_id", "")];
  }
  int unwitnessed = 0;
  for (const auto& [run, n] : records) {
    if (n > 1) Violation(fmt::format("run {} is metered {} times", run, n));
    if (!runs.contains(run) || runs[run].starts == 0) ++unwitnessed;
  }
  for (const auto& [id, r] : runs) {
    if (r.starts > 0 && !records.contains(id)) {
      Violation(fmt::format("run {} of job {} ran and is not metered", id, r.job));
    }
  }

  // An acknowledged cancel stays asked for.
  int cancels = 0;
  for (const Ack& a : acks) {
    if (a.kind != Ack::kCancel) continue;
    ++cancels;
    if (Terminal(a.state) || !jobs.contains(a.job)) continue;
    if (!jobs[a.job].value("cancel_requested", false)) {
      Violation(fmt::format("job {}: the cancel acknowledged at {} is forgotten (ended {})", a.job,
                            a.at_ms, jobs[a.job].value("state", "")));
    }
  }

  std::map<std::string, std::vector<double>> recovery;
  int unrecovered = 0;
  for (const FaultRecord& f : records_) {
    if (f.recovered) {
      recovery[f.kind].push_back(f.recovery_ms);
    } else {
      ++unrecovered;
    }
  }
  fmt::print("\nberth-fault-trial: {} faults, --leader-ttl {}{}\n", records_.size(), ttl_,
             broken_ ? ", BROKEN FENCE (BERTH_FAILPOINTS=fence.off)" : "");
  fmt::print("{:<14} {:>5} {:>22}\n", "fault", "count", "recovery p50 / max ms");
  for (const auto& [kind, v] : recovery) {
    fmt::print("{:<14} {:>5} {:>12.0f} / {:<8.0f}\n", kind, v.size(), Percentile(v, 0.5),
               Percentile(v, 1.0));
  }
  std::size_t submits = 0;
  for (const Ack& a : acks) submits += a.kind == Ack::kSubmit;
  fmt::print(
      "acknowledged: {} submissions, {} cancels; unanswered requests {}; runs witnessed {} "
      "({} without an end line); usage records {} ({} of runs the witness did not see start); "
      "state samples {}; not recovered {}\n",
      submits, cancels, unanswered_.load(), runs.size(), without_end, records.size(), unwitnessed,
      seen.size(), unrecovered);
  if (unrecovered > 0 && !broken_) {
    Violation(
        fmt::format("{} faults left the control plane without a leader or a node", unrecovered));
  }
  std::map<std::string, int> states;
  for (const auto& [id, job] : jobs) ++states[job.value("state", "")];
  fmt::print("jobs by final state:");
  for (const auto& [state, n] : states) fmt::print(" {} {}", state, n);
  fmt::print("\nviolations: {}\n", violations_.size());
  return 0;
}

int Trial::Run() {
  if (auto why = berth::tests::PgServerUnavailable()) {
    std::cerr << "SKIP: no PostgreSQL server to run: " << *why << "\n";
    return 77;
  }
  {
    // --leader-ttl as berthd reads it: Ns or Nms.
    const std::string digits = ttl_.substr(0, ttl_.find_first_not_of("0123456789"));
    const std::string unit = ttl_.substr(digits.size());
    if (digits.empty() || (unit != "s" && unit != "ms")) {
      std::cerr << "--leader-ttl: give seconds (3s) or milliseconds (3000ms)\n";
      return 2;
    }
    ttl_ms_ = Ms(std::stoll(digits) * (unit == "s" ? 1000 : 1));
  }
  if (!SetUp()) {
    if (dir_) dir_->keep();
    return 1;
  }
  std::vector<std::thread> load;
  load.emplace_back([this] { Client(0, "red"); });
  load.emplace_back([this] { Client(1, "red"); });
  load.emplace_back([this] { Client(2, "blue"); });
  load.emplace_back([this] { Client(3, "blue"); });
  load.emplace_back([this] { Observer(); });

  bool caught_early = false;
  for (int i = 0; i < faults_; ++i) {
    std::this_thread::sleep_for(Ms(std::uniform_int_distribution<int>(500, 2000)(rng_)));
    const std::string kind = DrawFault();
    Fault(kind);
    const std::int64_t ended = WallMs();
    FaultRecord rec{kind};
    // Without its fence the control plane may never settle: wait less.
    rec.recovered = Recovered(broken_ ? 15s : 60s);
    rec.recovery_ms = static_cast<double>(WallMs() - ended);
    records_.push_back(rec);
    fmt::print("fault {:>3}/{}: {:<14} recovered in {:>6.0f} ms{}\n", i + 1, faults_, kind,
               rec.recovery_ms, rec.recovered ? "" : " (NOT RECOVERED)");
    std::fflush(stdout);
    if (broken_) {
      // Let whatever leads, one or two, work on the load for a while.
      if (Leaders().size() > 1) {
        fmt::print("two berthd answer as leader at once\n");
        caught_early = true;
      }
      std::this_thread::sleep_for(8s);
    }
  }
  stop_load_ = true;
  for (auto& t : load) t.join();
  const bool drained = Drain(broken_ ? 20s : 240s);
  if (!drained) std::cerr << "not every acknowledged job finished in time\n";
  if (Check() != 0) {
    dir_->keep();
    return 1;
  }
  if (broken_) {
    const bool caught = !violations_.empty();
    fmt::print("broken fence {}{}\n", caught ? "CAUGHT by the checker" : "NOT caught",
               caught_early ? " (two leaders were seen at once)" : "");
    if (!caught) dir_->keep();
    return caught ? 0 : 1;
  }
  if (!violations_.empty()) dir_->keep();
  return violations_.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-fault-trial: the control plane under faults, checked from its history"};
  int faults = 100;
  std::uint32_t seed = 1;
  std::string ttl = "3s";
  bool broken = false;
  bool keep = false;
  app.add_option("--faults", faults, "how many faults to inject")->capture_default_str();
  app.add_option("--seed", seed, "the fault schedule's seed")->capture_default_str();
  app.add_option("--leader-ttl", ttl, "berthd --leader-ttl")->capture_default_str();
  app.add_flag("--broken-fence", broken,
               "run berthd without its fence (BERTH_FAILPOINTS=fence.off); succeed only if the "
               "checker catches it");
  app.add_flag("--keep", keep, "keep the trial's directory (logs, witness, data) at the end");
  CLI11_PARSE(app, argc, argv);
  Trial trial(faults, seed, ttl, broken, keep);
  return trial.Run();
}
