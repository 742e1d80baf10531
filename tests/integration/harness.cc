#include "integration/harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/netns.h"

extern char** environ;  // NOLINT: POSIX

namespace berth::it {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::atomic<int> g_counter{0};

// A test or bench process is a client: a write to a connection its server
// closed (a berthd that stops its standby listener to lead, mid-TLS
// handshake; OpenSSL writes with write(2), not send(MSG_NOSIGNAL)) must be
// an error the caller sees, not a SIGPIPE that ends the whole test binary.
const bool g_sigpipe_ignored = [] { return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();

std::string Errno() {
  return std::strerror(errno);
}  // NOLINT(concurrency-mt-unsafe)

// Whether `p` is `dir` or lies under it.
bool IsUnder(const std::string& p, const std::string& dir) {
  return p == dir || (p.size() > dir.size() && p.starts_with(dir) && p[dir.size()] == '/');
}

std::vector<pid_t> ProcessesUnder(const std::string& dir) {
  std::vector<pid_t> out;
  std::error_code ec;
  pid_t self = ::getpid();
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    if (pid == self) continue;
    std::error_code link_ec;
    auto cwd = fs::read_symlink(entry.path() / "cwd", link_ec);
    bool match = !link_ec && IsUnder(cwd.string(), dir);
    if (!match) {
      std::string cmdline = ReadFile(entry.path() / "cmdline");
      match = cmdline.find(dir) != std::string::npos;
    }
    if (match) out.push_back(pid);
  }
  return out;
}

// The first "name: X" of a simulated cluster file: the node an agent started
// on it reports (berth-agent's --simulate-node is not used by the harness).
std::string FirstNodeName(const fs::path& cluster) {
  std::istringstream in(ReadFile(cluster));
  std::string line;
  while (std::getline(in, line)) {
    auto at = line.find("name:");
    if (at == std::string::npos) continue;
    std::string name = line.substr(at + 5);
    name.erase(0, name.find_first_not_of(" \t\"'"));
    name.erase(name.find_last_not_of(" \t\"'\r") + 1);
    return name;
  }
  return "";
}

}  // namespace

fs::path BinDir() {
  if (const char* dir = std::getenv("BERTH_BIN_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : self.parent_path();
}

TempDir::TempDir(std::string_view prefix) {
  const char* tmp = std::getenv("TMPDIR");
  fs::path base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::string templ = (base / fmt::format("{}-XXXXXX", prefix)).string();
  if (::mkdtemp(templ.data()) == nullptr) {
    throw std::runtime_error(fmt::format("mkdtemp {}: {}", templ, Errno()));
  }
  // Jobs run as their tenant's identity, not as the test, and many tests
  // hand files to and from their jobs here: like /tmp, anyone may create a
  // file, and only its owner may remove it. berthd's and the agents' own
  // directories below are theirs alone (docs/security.md).
  ::chmod(templ.c_str(), 01777);
  // Resolved, so it matches what /proc/PID/cwd shows.
  path_ = fs::canonical(templ);
}

TempDir::~TempDir() {
  KillProcessesUnder(path_);
  if (keep_) {
    std::cerr << "[ kept     ] " << path_.string() << '\n';
    return;
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
}

int KillProcessesUnder(const fs::path& dir, Ms timeout) {
  int killed = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto pids = ProcessesUnder(dir.string());
    if (pids.empty()) return killed;
    for (pid_t pid : pids) {
      if (::kill(pid, SIGKILL) == 0) ++killed;
    }
    if (std::chrono::steady_clock::now() > deadline) return killed;
    std::this_thread::sleep_for(20ms);
  }
}

namespace {

// Whether `port` on loopback can be bound now (0: any, the kernel's pick);
// returns the port bound, or 0.
int TryBind(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket: " + Errno());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof addr;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  int bound = 0;
  if (::bind(fd, sa, sizeof addr) == 0 && ::getsockname(fd, sa, &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  ::close(fd);
  return bound;
}

// The first port of the kernel's ephemeral range (what outgoing connections
// and port-0 binds get); 32768 when it cannot be read.
int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  int high = 0;
  if (in >> low >> high && low > 1024) return low;
  return 32768;
}

}  // namespace

int FreePort() {
  // A port below the ephemeral range: a port the kernel handed out would be
  // free again once probed, and another test's outgoing connection could
  // take it before berthd binds it ("Address already in use"). Below the
  // range only another listener can, and each pick is random and never
  // handed out twice in this process.
  static std::mutex mu;
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  static std::set<int> given;
  const int low = EphemeralLow();
  std::lock_guard lock(mu);
  if (low > 10'000) {
    std::uniform_int_distribution<int> pick(10'000, low - 1);
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int port = pick(rng);
      if (given.contains(port) || TryBind(port) != port) continue;
      given.insert(port);
      return port;
    }
  }
  const int port = TryBind(0);
  if (port == 0) throw std::runtime_error("bind/getsockname: " + Errno());
  return port;
}

bool WaitFor(const std::function<bool()>& ready, Ms timeout, Ms interval) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

void WriteFile(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// --- Process ---

Process::Process(const fs::path& binary, std::vector<std::string> args, const fs::path& log,
                 const std::map<std::string, std::string>& env, const fs::path& err)
    : log_(log) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string_view::npos) merged[std::string(kv.substr(0, eq))] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);

  args.insert(args.begin(), binary.string());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (err.empty()) {
    posix_spawn_file_actions_adddup2(&files, 1, 2);
  } else {
    posix_spawn_file_actions_addopen(&files, 2, err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  // The daemons start with SIGPIPE at its default, as under a supervisor,
  // not ignored as in this process (g_sigpipe_ignored): their jobs inherit it.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  int rc = ::posix_spawn(&pid_, binary.c_str(), &files, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error(
        fmt::format("cannot start {}: {}", binary.string(), std::strerror(rc)));  // NOLINT
  }
}

Process::~Process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    (void)Wait(10s);
  }
}

bool Process::running() {
  return !Wait(0ms).has_value();
}

void Process::Kill(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<int> Process::Wait(Ms timeout) {
  if (status_) return status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return status_;
    }
    if (r < 0 && errno != EINTR) {
      status_ = -1;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
}

CommandResult RunCommand(const fs::path& binary, const std::vector<std::string>& args,
                         const fs::path& dir, Ms timeout) {
  int n = g_counter.fetch_add(1);
  fs::path out = dir / fmt::format("cmd-{}-{}.out", binary.filename().string(), n);
  fs::path err = dir / fmt::format("cmd-{}-{}.err", binary.filename().string(), n);
  CommandResult result;
  // The CLI reads no config file of the person running the tests (a login
  // of theirs, with a CA since deleted, would change what it does): the
  // test's own, empty until it logs in, unless the test chose one.
  std::map<std::string, std::string> env;
  if (std::getenv("BERTH_CONFIG") == nullptr) {  // NOLINT(concurrency-mt-unsafe)
    env["BERTH_CONFIG"] = (dir / "berth-config.json").string();
  }
  {
    Process p(binary, args, out, env, err);
    auto code = p.Wait(timeout);
    result.exit_code = code.value_or(-1);
  }
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  return result;
}

// --- Http ---

namespace {

Reply ToReply(const httplib::Result& res) {
  Reply r;
  if (!res) return r;
  r.status = res->status;
  r.text = res->body;
  r.body = json::parse(res->body, nullptr, false);
  if (r.body.is_discarded()) r.body = nullptr;
  for (const auto& [name, value] : res->headers) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    r.headers[lower] = value;
  }
  return r;
}

httplib::Client MakeClient(const std::string& host, int port, Ms timeout, const fs::path& ca,
                           const std::map<std::string, std::string>& headers) {
  httplib::Client cli(fmt::format("{}://{}:{}", ca.empty() ? "http" : "https", host, port));
  if (!headers.empty()) cli.set_default_headers(httplib::Headers(headers.begin(), headers.end()));
  if (!ca.empty()) cli.set_ca_cert_path(ca.string());
  auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout - s);
  cli.set_connection_timeout(s.count(), us.count());
  cli.set_read_timeout(s.count(), us.count());
  cli.set_write_timeout(s.count(), us.count());
  return cli;
}

}  // namespace

Reply Http::Get(const std::string& path) const {
  auto cli = MakeClient(host_, port_, timeout_, ca_, headers_);
  if (!token_.empty()) cli.set_bearer_token_auth(token_);
  return ToReply(cli.Get(path));
}

Reply Http::Post(const std::string& path, const std::string& body,
                 const std::string& content_type) const {
  auto cli = MakeClient(host_, port_, timeout_, ca_, headers_);
  if (!token_.empty()) cli.set_bearer_token_auth(token_);
  return ToReply(cli.Post(path, body, content_type));
}

Reply Http::Delete(const std::string& path) const {
  auto cli = MakeClient(host_, port_, timeout_, ca_, headers_);
  if (!token_.empty()) cli.set_bearer_token_auth(token_);
  return ToReply(cli.Delete(path));
}

// --- Berthd ---

BerthdOptions AllInOne(std::vector<std::string> extra_args) {
  BerthdOptions o;
  o.extra_args = std::move(extra_args);
  return o;
}

BerthdOptions ControlPlaneOnly(std::vector<std::string> extra_args) {
  BerthdOptions o = AllInOne(std::move(extra_args));
  o.all_in_one = false;
  return o;
}

Berthd::Berthd(const TempDir& dir, BerthdOptions options)
    : dir_(dir.path()),
      data_dir_(dir.path() / options.name),
      options_(std::move(options)),
      api_port_(FreePort()),
      agent_port_(FreePort()),
      gateway_port_(FreePort()),
      http_(api_port_, 10s, options_.tls ? ca_file() : fs::path(), options_.host) {}

Berthd::~Berthd() {
  if (process_) Kill();
  // The gateway's HAProxy outlives berthd by design (a restart adopts it);
  // a test's ends with it.
  const std::string pid_text = ReadFile(data_dir_ / "gateway" / "haproxy.pid");
  if (const int pid = std::atoi(pid_text.c_str()); pid > 1) ::kill(pid, SIGKILL);
}

std::string Berthd::gateway_url() const {
  return fmt::format("http://127.0.0.1:{}", gateway_port_);
}

std::string Berthd::url() const {
  return fmt::format("{}://{}:{}", options_.tls ? "https" : "http", options_.host, api_port_);
}

std::string Berthd::agent_address() const {
  return fmt::format("{}:{}", options_.host, agent_port_);
}

std::string Berthd::log() const {
  return ReadFile(dir_ / (options_.name + ".log"));
}

void Berthd::Launch() {
  std::vector<std::string> args;
  if (options_.all_in_one) args.emplace_back("--all-in-one");
  args.insert(args.end(),
              {"--data-dir", data_dir_.string(), "--listen",
               fmt::format("{}:{}", options_.host, api_port_), "--agent-listen", agent_address()});
  if (!options_.simulate.empty())
    args.insert(args.end(), {"--simulate", options_.simulate.string()});
  if (!options_.tls) args.insert(args.end(), {"--plain-http", "--plain-agents"});
  args.insert(args.end(),
              {"--gateway-listen",
               options_.gateway ? fmt::format("127.0.0.1:{}", gateway_port_) : std::string("off")});
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  ++starts_;
  {
    std::ofstream marker(dir_ / (options_.name + ".log"), std::ios::app);
    marker << fmt::format("==== harness: berthd start #{} ====\n", starts_);
  }
  fs::path binary = options_.binary.empty() ? BinDir() / "berthd" : options_.binary;
  // On a test network's host: the child inherits the namespace the thread
  // is in when it starts.
  std::optional<tests::ScopedNetns> on_host;
  if (!options_.netns.empty()) on_host.emplace(options_.netns);
  process_ = std::make_unique<Process>(binary, args, dir_ / (options_.name + ".log"), options_.env);
}

bool Berthd::Start(Ms timeout) {
  Launch();
  // /readyz: the API serves (a standby answers /healthz, never /readyz).
  bool up = WaitFor([&] { return !process_->running() || http_.Get("/readyz").status == 200; },
                    timeout) &&
            process_->running();
  if (up) UseBootstrapToken();
  return up;
}

bool Berthd::StartStandby(Ms timeout) {
  Launch();
  return WaitFor(
             [&] {
               if (!process_->running()) return true;
               Reply r = http_.Get("/healthz");
               return r.status == 200 && r.body.is_object() &&
                      r.body.value("role", "") == "standby";
             },
             timeout) &&
         process_->running();
}

bool Berthd::StartAnyRole(Ms timeout) {
  Launch();
  return WaitFor([&] { return !process_->running() || http_.Get("/healthz").status == 200; },
                 timeout) &&
         process_->running();
}

bool Berthd::WaitUntilReady(Ms timeout) {
  bool up = WaitFor([&] { return !process_ || http_.Get("/readyz").status == 200; }, timeout) &&
            running();
  if (up) UseBootstrapToken();
  return up;
}

void Berthd::UseBootstrapToken() {
  // The bootstrap admin's token: the harness's HTTP client and every berth
  // CLI this test process starts act as the platform admin. A berthd that
  // shares another's database made none: it keeps the one it was given.
  std::string token = ReadFile(data_dir_ / "bootstrap-token");
  while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.pop_back();
  if (token.empty()) return;
  set_token(token);
}

void Berthd::set_token(const std::string& token) {
  http_.set_token(token);
  ::setenv("BERTH_TOKEN", token.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
}

void Berthd::Kill() {
  if (!process_) return;
  process_->Kill(SIGKILL);
  (void)process_->Wait(10s);
  process_.reset();
}

void Berthd::Stop() {
  if (!process_) return;
  process_->Kill(SIGTERM);
  if (!process_->Wait(20s)) process_->Kill(SIGKILL);
  process_.reset();
}

bool Berthd::running() const {
  return process_ != nullptr && process_->running();
}

pid_t Berthd::pid() const {
  return running() ? process_->pid() : -1;
}

json Berthd::Job(std::int64_t id) const {
  auto r = http_.Get(fmt::format("/v1/jobs/{}", id));
  return r.status == 200 ? r.body : json(nullptr);
}

Reply GetAllPages(const Http& http, const std::string& path, const std::string& key) {
  json rows = json::array();
  std::string after;
  for (;;) {
    const char* sep = path.find('?') == std::string::npos ? "?" : "&";
    Reply r = http.Get(after.empty() ? path : path + sep + "after=" + after);
    if (r.status != 200 || !r.body.is_object()) return r;
    for (auto& row : r.body.value(key, json::array())) rows.push_back(std::move(row));
    if (!r.body.contains("next") || !r.body["next"].is_string()) {
      r.body[key] = std::move(rows);
      r.body.erase("next");
      return r;
    }
    after = r.body["next"].get<std::string>();
  }
}

json Berthd::Jobs() const {
  auto r = GetAllPages(http_, "/v1/jobs?full=true&limit=5000", "jobs");
  return r.status == 200 && r.body.contains("jobs") ? r.body["jobs"] : json(nullptr);
}

json Berthd::Nodes() const {
  auto r = http_.Get("/v1/nodes");
  return r.status == 200 && r.body.contains("nodes") ? r.body["nodes"] : json(nullptr);
}

std::string Berthd::JobState(std::int64_t id) const {
  auto job = Job(id);
  return job.is_object() ? job.value("state", "") : "";
}

std::int64_t Berthd::Submit(const std::string& spec, std::string* error) const {
  auto r = http_.Post("/v1/jobs", spec);
  if (r.status == 201 && r.body.is_object()) return r.body.value("id", std::int64_t{0});
  if (error != nullptr) *error = fmt::format("HTTP {}: {}", r.status, r.text);
  return 0;
}

bool Berthd::WaitForState(std::int64_t id, const std::string& state, Ms timeout) const {
  return WaitFor([&] { return JobState(id) == state; }, timeout);
}

bool Berthd::WaitForTerminal(std::int64_t id, Ms timeout) const {
  return WaitFor(
      [&] {
        auto s = JobState(id);
        return s == "Succeeded" || s == "Failed" || s == "Cancelled";
      },
      timeout);
}

bool Berthd::WaitForNode(const std::string& state, Ms timeout, const std::string& node) const {
  return WaitFor(
      [&] {
        auto nodes = Nodes();
        if (!nodes.is_array() || nodes.empty()) return false;
        bool found = false;
        for (const auto& n : nodes) {
          if (!node.empty() && n.value("name", "") != node) continue;
          found = true;
          if (n.value("state", "") != state) return false;
        }
        return found;
      },
      timeout);
}

std::unique_ptr<Process> StartAgent(const TempDir& dir, const Berthd& berthd,
                                    const fs::path& data_dir, const fs::path& simulate,
                                    const std::string& log_name,
                                    const std::map<std::string, std::string>& env,
                                    const std::vector<std::string>& extra_args) {
  {
    std::ofstream marker(dir / log_name, std::ios::app);
    marker << "==== harness: berth-agent start ====\n";
  }
  std::vector<std::string> args{"--data-dir", data_dir.string(), "--simulate", simulate.string()};
  if (std::find(extra_args.begin(), extra_args.end(), "--server") == extra_args.end()) {
    args.insert(args.end(), {"--server", berthd.agent_address()});
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  if (!berthd.tls()) {
    args.emplace_back("--insecure");
  } else {
    std::string node = FirstNodeName(simulate);
    fs::path certs = data_dir.string() + "-certs";
    if (!IssueNodeCert(dir, berthd, node, certs)) {
      throw std::runtime_error("berthd cert node " + node + " failed");
    }
    args.insert(args.end(), {"--tls-ca", (certs / "ca.pem").string(), "--tls-cert",
                             (certs / (node + ".pem")).string(), "--tls-key",
                             (certs / (node + "-key.pem")).string()});
  }
  return std::make_unique<Process>(BinDir() / "berth-agent", args, dir / log_name, env);
}

bool IssueNodeCert(const TempDir& dir, const Berthd& berthd, const std::string& node,
                   const fs::path& out) {
  auto r = RunCommand(
      BinDir() / "berthd",
      {"cert", "node", node, "--data-dir", berthd.data_dir().string(), "--out", out.string()},
      dir.path());
  if (r.exit_code != 0) std::cerr << "berthd cert node " << node << ": " << r.err << '\n';
  return r.exit_code == 0;
}

int CountEvents(const json& job, const std::string& event) {
  int n = 0;
  if (!job.is_object() || !job.contains("timeline")) return 0;
  for (const auto& e : job["timeline"]) {
    if (e.value("event", "") == event) ++n;
  }
  return n;
}

bool ProcessAlive(pid_t pid) {
  return pid > 0 && ::kill(pid, 0) == 0;
}

void DumpStacks(pid_t pid, const fs::path& out) {
  fs::path gdb = "/usr/bin/gdb";
  std::error_code ec;
  if (pid <= 0 || !fs::exists(gdb, ec)) return;
  Process p(gdb, {"-p", std::to_string(pid), "-batch", "-ex", "thread apply all bt"}, out);
  if (!p.Wait(60s)) p.Kill(SIGKILL);
}

namespace {
sockaddr* Sockaddr(sockaddr_in& a) {
  return reinterpret_cast<sockaddr*>(&a);
}
}  // namespace

Relay::Relay(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || ::bind(listen_fd_, Sockaddr(addr), len) != 0 ||
      ::listen(listen_fd_, 64) != 0 || ::getsockname(listen_fd_, Sockaddr(addr), &len) != 0) {
    throw std::runtime_error("relay: cannot listen on loopback");
  }
  port_ = ntohs(addr.sin_port);
  threads_.emplace_back([this] { AcceptLoop(); });
}

Relay::~Relay() {
  stopping_ = true;
  for (;;) {
    std::thread t;
    {
      std::lock_guard lock(mu_);
      if (threads_.empty()) break;
      t = std::move(threads_.back());
      threads_.pop_back();
    }
    t.join();
  }
  ::close(listen_fd_);
  for (int fd : held_) ::close(fd);
}

void Relay::Heal() {
  {
    std::lock_guard lock(mu_);
    for (int fd : held_) ::close(fd);
    held_.clear();
    ++epoch_;  // the pumps of cut connections close them
  }
  cut_ = false;
}

void Relay::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    std::lock_guard lock(mu_);
    if (cut_) {
      held_.push_back(client);  // accepted by the kernel, answered by no one
      continue;
    }
    int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(upstream_port_));
    if (upstream < 0 || ::connect(upstream, Sockaddr(addr), sizeof addr) != 0) {
      ::close(client);
      if (upstream >= 0) ::close(upstream);
      continue;
    }
    const int epoch = epoch_;
    threads_.emplace_back([this, client, upstream, epoch] { Pump(client, upstream, epoch); });
  }
}

void Relay::Pump(int a, int b, int epoch) {
  char buf[16384];
  while (!stopping_ && epoch_ == epoch) {
    if (cut_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    if (::poll(p, 2, 50) <= 0) continue;
    bool closed = false;
    for (int i = 0; i < 2 && !closed; ++i) {
      if (p[i].revents == 0) continue;
      const int from = p[i].fd;
      const int to = i == 0 ? b : a;
      ssize_t n = ::read(from, buf, sizeof buf);
      closed = n <= 0;
      for (ssize_t done = 0; !closed && done < n;) {
        ssize_t w = ::write(to, buf + done, static_cast<std::size_t>(n - done));
        closed = w <= 0;
        done += std::max<ssize_t>(w, 0);
      }
    }
    if (closed) break;
  }
  ::close(a);
  ::close(b);
}

}  // namespace berth::it
