// The integration harness: real berthd, berth-agent and berth processes on
// loopback, each in a temp dir of its own. Free of GoogleTest so the
// benchmark (bench/) drives berthd with the same code; tests add their
// assertions on top.
//
// Cleanup is by ownership, not by name: every process a test starts, and
// every job those processes start, runs in (or names) the test's temp dir,
// so KillProcessesUnder(dir) finds them without a broad pkill.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace berth::it {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

// Where berthd, berth-agent, berth-shim and berth live: $BERTH_BIN_DIR, else
// the directory of the running executable.
std::filesystem::path BinDir();

// A fresh directory under $TMPDIR (or /tmp). The destructor kills every
// process still tied to it (see KillProcessesUnder), then removes it unless
// keep() was called; a kept directory's path is printed to stderr.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "berth-it");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }
  void keep() { keep_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

// SIGKILLs every process other than this one whose working directory is under
// `dir` or whose command line mentions it: berthd and agents (--data-dir),
// shims (their run directory) and jobs (which run in their run directory).
// Repeats until none is left or `timeout` passes. Returns how many it killed.
int KillProcessesUnder(const std::filesystem::path& dir, Ms timeout = 5s);

// A loopback TCP port that was free a moment ago: a random one below the
// kernel's ephemeral range (so no outgoing connection takes it before the
// test's server binds it), never the same twice in one test process.
int FreePort();

// Polls `ready` every `interval` until it returns true or `timeout` passes.
bool WaitFor(const std::function<bool()>& ready, Ms timeout, Ms interval = 50ms);

std::string ReadFile(const std::filesystem::path& path);
void WriteFile(const std::filesystem::path& path, std::string_view text);

// A child process started with posix_spawn; stdout goes to `log`, and so does
// stderr unless `err` names a file of its own. The destructor SIGKILLs and
// reaps it if it is still running.
class Process {
 public:
  // `env` entries override or add to this process's environment.
  Process(const std::filesystem::path& binary, std::vector<std::string> args,
          const std::filesystem::path& log, const std::map<std::string, std::string>& env = {},
          const std::filesystem::path& err = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  const std::filesystem::path& log() const { return log_; }
  bool running();
  void Kill(int sig);
  // The exit code (128 + signal if killed), or nullopt if it is still running
  // after `timeout`.
  std::optional<int> Wait(Ms timeout);

 private:
  pid_t pid_ = -1;
  std::filesystem::path log_;
  std::optional<int> status_;
};

// Runs a command to completion: its exit code (-1 on timeout, after SIGKILL),
// its stdout and its stderr (kept as files in `dir`). A `berth` it runs
// reads and writes `dir`/berth-config.json unless $BERTH_CONFIG is set,
// never the config file of the person running the tests.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
CommandResult RunCommand(const std::filesystem::path& binary, const std::vector<std::string>& args,
                         const std::filesystem::path& dir, Ms timeout = 30s);

// A tiny JSON-over-HTTP client. status is 0 when no response came (refused,
// reset, timed out); body is the parsed JSON, or null if it was not JSON.
struct Reply {
  int status = 0;
  nlohmann::json body;
  std::string text;
  std::map<std::string, std::string> headers{};  // names in lower case; the last of repeats
};
// With `ca` set it speaks HTTPS and trusts only that CA file. `host` is
// 127.0.0.1 unless the server is on a test network's host (netns_test.cc).
class Http {
 public:
  explicit Http(int port, Ms timeout = 10s, std::filesystem::path ca = {},
                std::string host = "127.0.0.1")
      : port_(port), timeout_(timeout), ca_(std::move(ca)), host_(std::move(host)) {}
  Reply Get(const std::string& path) const;
  Reply Post(const std::string& path, const std::string& body,
             const std::string& content_type = "application/yaml") const;
  Reply Delete(const std::string& path) const;
  // Sent as `Authorization: Bearer` when not empty.
  void set_token(std::string token) { token_ = std::move(token); }
  const std::string& token() const { return token_; }
  // Sent with every request (a test's forged or extra header).
  void set_header(std::string name, std::string value) {
    headers_[std::move(name)] = std::move(value);
  }

 private:
  int port_;
  Ms timeout_;
  std::string token_;
  std::map<std::string, std::string> headers_;
  std::filesystem::path ca_;
  std::string host_;
};

// Every page of a paged list (GET /v1/jobs, /v1/audit, /v1/usage/records):
// follows each page's `next` (as `after`) and returns the last page's reply
// with body[key] holding the rows of every page, in the order served. A
// reply that is not 200 is returned as it is.
Reply GetAllPages(const Http& http, const std::string& path, const std::string& key);

// A loopback TCP relay in front of a port (berthd's agent port, the
// database's): the fault trials' and fencing tests' network link. Cut, it
// carries nothing either way and holds every connection open, old and new
// (no FIN, no RST), as a network partition does; healed, it drops what it
// held and relays new connections again. Throws if it cannot listen.
class Relay {
 public:
  explicit Relay(int upstream_port);
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  int port() const { return port_; }
  bool cut() const { return cut_; }
  void Cut() { cut_ = true; }
  void Heal();

 private:
  void AcceptLoop();
  void Pump(int a, int b, int epoch);

  int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_ = false;
  std::atomic<bool> cut_ = false;
  std::atomic<int> epoch_ = 0;
  std::mutex mu_;  // guards threads_, held_
  std::vector<std::thread> threads_;
  std::vector<int> held_;
};

// berthd on a data dir and fresh loopback ports. Start() may be called again
// after Kill() or Stop(): same data dir, same ports.
struct BerthdOptions {
  // Its data dir and log in the test's dir: NAME/ and NAME.log (several
  // berthd of one control plane each have their own).
  std::string name = "berthd";
  bool all_in_one = true;
  std::filesystem::path binary;    // default: BinDir()/berthd
  std::filesystem::path simulate;  // --simulate FILE, if set
  std::vector<std::string> extra_args;
  // HTTPS API and mutual-TLS agents, with the data dir's generated CA.
  // false: --plain-http and --plain-agents (loopback only), as most tests
  // need no certificates.
  bool tls = false;
  // Added to berthd's environment (BERTH_FAILPOINTS for a crash trial).
  std::map<std::string, std::string> env{};
  // The service gateway (HAProxy) on a free loopback port; false:
  // --gateway-listen off, as most tests serve no service.
  bool gateway = false;
  // A host of a test network (tests/support/netns.h): berthd runs in the
  // namespace `netns` and listens on `host` (which needs tls: berthd
  // serves plain only on loopback). The test thread must be able to reach
  // `host` (sit on another host of the network) for Start() to see it up.
  std::string host = "127.0.0.1";
  std::string netns;
};
// berthd with an embedded agent on the default simulated node (8x H100-80GB).
BerthdOptions AllInOne(std::vector<std::string> extra_args = {});
// berthd alone: nodes come from separate berth-agent processes.
BerthdOptions ControlPlaneOnly(std::vector<std::string> extra_args = {});

class Berthd {
 public:
  Berthd(const TempDir& dir, BerthdOptions options);
  ~Berthd();

  // Starts berthd and waits until /readyz answers 200 (the API serves).
  // Returns false (and leaves the log for the test to show) if it does not
  // within `timeout`.
  bool Start(Ms timeout = 20s);
  // Starts berthd expecting a standby (several berthd on one PostgreSQL
  // database): waits until /healthz says role "standby".
  bool StartStandby(Ms timeout = 20s);
  // Starts berthd in whichever role it finds (a fault trial's supervisor
  // restarting a member): waits until /healthz answers 200, as a leader or
  // a standby.
  bool StartAnyRole(Ms timeout = 20s);
  // Waits until a started berthd (a standby taking over) serves the API.
  bool WaitUntilReady(Ms timeout);
  // The admin token the harness's client and CLIs send (Start takes the
  // data dir's bootstrap token when berthd wrote one).
  void set_token(const std::string& token);
  // kill -9: no shutdown code runs.
  void Kill();
  // SIGTERM and wait.
  void Stop();
  bool running() const;
  pid_t pid() const;  // -1 when not running

  int api_port() const { return api_port_; }
  int agent_port() const { return agent_port_; }
  int gateway_port() const { return gateway_port_; }
  // "http://127.0.0.1:PORT": the gateway's frontend (options().gateway).
  std::string gateway_url() const;
  std::string url() const;
  std::string agent_address() const;
  const std::filesystem::path& data_dir() const { return data_dir_; }
  bool tls() const { return options_.tls; }
  // What the next Start() runs with.
  BerthdOptions& options() { return options_; }
  // <data-dir>/tls/ca.pem: what clients of a tls berthd trust.
  std::filesystem::path ca_file() const { return data_dir_ / "tls" / "ca.pem"; }
  const Http& http() const { return http_; }
  // berthd's log so far (all runs).
  std::string log() const;

  // --- conveniences over the REST API ---
  nlohmann::json Job(std::int64_t id) const;    // null if not found
  nlohmann::json Jobs() const;                  // the "jobs" array
  nlohmann::json Nodes() const;                 // the "nodes" array
  std::string JobState(std::int64_t id) const;  // "" if not found
  // Submits a spec; returns the job id, or 0 with `error` set.
  std::int64_t Submit(const std::string& spec, std::string* error = nullptr) const;
  bool WaitForState(std::int64_t id, const std::string& state, Ms timeout) const;
  bool WaitForTerminal(std::int64_t id, Ms timeout) const;
  // True when `node` (or, if empty, every node, of which there is at least
  // one) reports `state` (Ready, NotReady).
  bool WaitForNode(const std::string& state, Ms timeout, const std::string& node = "") const;

 private:
  std::filesystem::path dir_;
  std::filesystem::path data_dir_;
  BerthdOptions options_;
  int api_port_;
  int agent_port_;
  int gateway_port_;
  int starts_ = 0;
  Http http_;
  void Launch();
  void UseBootstrapToken();
  std::unique_ptr<Process> process_;
};

// A standalone berth-agent for `berthd` on a simulated node; `env` entries
// override the agent's environment (PATH, for a node without podman), and
// `extra_args` are added to its flags (a `--server` there replaces
// berthd's address: a relay in between). For a tls berthd the agent gets a
// certificate from `berthd cert node` for the node it simulates (the first
// name in `simulate`).
std::unique_ptr<Process> StartAgent(const TempDir& dir, const Berthd& berthd,
                                    const std::filesystem::path& data_dir,
                                    const std::filesystem::path& simulate,
                                    const std::string& log_name,
                                    const std::map<std::string, std::string>& env = {},
                                    const std::vector<std::string>& extra_args = {});

// Runs `berthd cert node NODE --data-dir <berthd's> --out OUT`; true on success.
bool IssueNodeCert(const TempDir& dir, const Berthd& berthd, const std::string& node,
                   const std::filesystem::path& out);

// Whether any event of the job's timeline is `event`, and how many are.
int CountEvents(const nlohmann::json& job, const std::string& event);

bool ProcessAlive(pid_t pid);

// Writes every thread's backtrace of `pid` to `out` with gdb, if gdb is
// installed: evidence for a test that timed out waiting on a daemon.
void DumpStacks(pid_t pid, const std::filesystem::path& out);

}  // namespace berth::it
