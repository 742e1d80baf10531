// berth-load-bench: berthd's API under well-behaved load and hostile clients
// at once, for a bounded time, all on loopback. It starts its own all-in-one
// berthd (8 simulated H100s, default limits) and drives it like clients do:
//
//   well-behaved  --clients clients, each from its own loopback address with
//                 its own token, doing submit / get / list / why with think
//                 time; --followers of them follow a silent running job's log
//   probe         GET /healthz every 10 ms
//   hostile       --idle idle connections, slowloris (a header byte every
//                 500 ms), header floods (64 KiB of fields), made-up token
//                 ids, wrong secrets for a real token id, oversized bodies,
//                 and paths and specs with bytes that are not UTF-8; each
//                 kind from its own loopback addresses, reconnecting when cut
//
// It prints p50/p99 for /healthz, submit and get, what the hostile clients
// got back by kind, whether every acknowledged submission is there
// afterwards, and berthd's threads, open descriptors and RSS when idle, at
// the end of the load and once it has settled. --berthd runs another build
// (an older berthd, for before-and-after figures).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "bench_berthd.h"
#include "integration/harness.h"

namespace {

using namespace berth::it;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// A loopback connection from a chosen source address.
int Dial(int port, const std::string& source, int timeout_s = 5) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &src.sin_addr);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<std::uint16_t>(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool PeerClosed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// HTTP/1.1 over one kept-alive connection, reconnecting when it breaks.
class Conn {
 public:
  Conn(int port, std::string source) : port_(port), source_(std::move(source)) {}
  ~Conn() { Drop(); }
  struct Answer {
    int status = 0;  // 0: no answer (refused, reset, timed out)
    std::string body;
  };
  Answer Call(const std::string& method, const std::string& target, const std::string& token,
              const std::string& body = "", const std::string& extra_headers = "") {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (fd_ < 0) fd_ = Dial(port_, source_);
      if (fd_ < 0) return {};
      std::string req = fmt::format("{} {} HTTP/1.1\r\nHost: berthd\r\n", method, target);
      if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
      req += extra_headers;
      if (!body.empty() || method == "POST") {
        req += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n", body.size());
      }
      req += "\r\n";
      req += body;
      if (!SendAll(fd_, req)) {
        Drop();
        continue;
      }
      Answer a;
      bool close = false;
      if (Read(a, close)) {
        if (close) Drop();
        return a;
      }
      Drop();
      if (a.status != 0) return a;
    }
    return {};
  }

 private:
  void Drop() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    buf_.clear();
  }
  bool Fill() {
    char tmp[16384];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }
  bool Read(Answer& a, bool& close) {
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return false;
    }
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    if (head.size() < 12) return false;
    a.status = std::atoi(head.c_str() + 9);
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    close = lower.find("connection: close") != std::string::npos;
    if (lower.find("transfer-encoding: chunked") != std::string::npos) {
      for (;;) {
        std::size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos) {
          if (!Fill()) return false;
        }
        const std::size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
        while (buf_.size() < eol + 2 + size + 2) {
          if (!Fill()) return false;
        }
        a.body += buf_.substr(eol + 2, size);
        buf_.erase(0, eol + 2 + size + 2);
        if (size == 0) return true;
      }
    }
    std::size_t length = 0;
    if (auto p = lower.find("content-length:"); p != std::string::npos) {
      length = std::stoul(lower.substr(p + 15));
    }
    while (buf_.size() < length) {
      if (!Fill()) return false;
    }
    a.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return true;
  }

  int port_;
  std::string source_;
  int fd_ = -1;
  std::string buf_;
};

struct ProcStats {
  long threads = 0;
  long fds = 0;
  long rss_kib = 0;
};

ProcStats Sample(pid_t pid) {
  ProcStats s;
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("Threads:")) s.threads = std::atol(line.c_str() + 8);
    if (line.starts_with("VmRSS:")) s.rss_kib = std::atol(line.c_str() + 6);
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++s.fds;
  }
  return s;
}

// What one kind of client got back: answers by status (0: none).
class Tally {
 public:
  void Add(const std::string& kind, int status) {
    std::lock_guard lock(mu_);
    ++counts_[kind][status];
  }
  std::map<std::string, std::map<int, long>> counts() const {
    std::lock_guard lock(mu_);
    return counts_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::map<int, long>> counts_;
};

class Latencies {
 public:
  void Add(const std::string& op, double ms) {
    std::lock_guard lock(mu_);
    samples_[op].push_back(ms);
  }
  std::vector<double> Of(const std::string& op) const {
    std::lock_guard lock(mu_);
    auto it = samples_.find(op);
    return it == samples_.end() ? std::vector<double>{} : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<double>> samples_;
};

std::string SubmitSpec(int n) {
  return json{{"name", fmt::format("load{}", n)},
              {"command", {"sleep", "600"}},
              {"resources", {{"gpus", 8}}}}
      .dump();
}

int Run(int argc, char** argv) {
  CLI::App app{"berth-load-bench: berthd under well-behaved and hostile clients at once"};
  int seconds = 20;
  int clients = 200;
  int followers = 20;
  int idle = 1000;
  int think_ms = 250;
  bool hostile = true;
  std::string berthd_path;
  app.add_option("--seconds", seconds, "how long the load runs")->capture_default_str();
  app.add_option("--clients", clients, "well-behaved clients")->capture_default_str();
  app.add_option("--followers", followers, "of those, clients following a log")
      ->capture_default_str();
  app.add_option("--idle", idle, "idle connections held open by hostile clients")
      ->capture_default_str();
  app.add_option("--think-ms", think_ms, "a well-behaved client's pause between requests")
      ->capture_default_str();
  app.add_option("--hostile", hostile, "run the hostile clients too")->capture_default_str();
  app.add_option("--berthd", berthd_path, "berthd to run (default: the one beside this binary)");
  CLI11_PARSE(app, argc, argv);

  TempDir dir("berth-load");
  auto started = berth::bench::StartBerthd(dir, berthd_path);
  if (!started) return 1;
  Berthd& berthd = *started;
  const int port = berthd.api_port();
  const std::string admin = berthd.http().token();

  // A token per well-behaved client (the admin's own budget paces this).
  std::vector<std::string> tokens;
  for (int i = 0; i < clients; ++i) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto r = berthd.http().Post("/v1/tokens", json{{"description", fmt::format("c{}", i)}}.dump(),
                                  "application/json");
      if (r.status == 201) {
        tokens.push_back(r.body.at("token").get<std::string>());
        break;
      }
      std::this_thread::sleep_for(100ms);
    }
  }
  if (tokens.size() != static_cast<std::size_t>(clients)) {
    std::cerr << "could not create a token per client\n";
    return 1;
  }
  // The silent job the followers watch: it holds a GPU and prints nothing.
  std::int64_t silent = berthd.Submit(json{
      {"name", "silent"},
      {"command", {"sleep", "3600"}},
      {"resources", {{"gpus", 1}}}}.dump());
  if (silent <= 0 || !berthd.WaitForState(silent, "Running", 30s)) {
    std::cerr << "the silent job did not start\n";
    return 1;
  }
  // Each client's token verified once before the clock starts, as in a
  // steady state (berthd trusts a verified token for a minute).
  {
    std::vector<std::thread> warm;
    for (int i = 0; i < clients; ++i) {
      warm.emplace_back([&, i] {
        Conn c(port, fmt::format("127.0.{}.{}", 10 + i / 250, 1 + i % 250));
        (void)c.Call("GET", "/v1/whoami", tokens[static_cast<std::size_t>(i)]);
      });
    }
    for (auto& t : warm) t.join();
  }
  std::this_thread::sleep_for(1s);
  const ProcStats at_idle = Sample(berthd.pid());

  Latencies lat;
  Tally tally;
  std::mutex acked_mu;
  std::vector<std::int64_t> acked;
  std::atomic<bool> stop{false};
  std::atomic<bool> hostile_stop{false};
  std::atomic<int> seq{0};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  const auto until = start + std::chrono::seconds(seconds);

  // The probe.
  threads.emplace_back([&] {
    Conn c(port, "127.0.0.1");
    while (!stop) {
      auto t = Clock::now();
      auto a = c.Call("GET", "/healthz", "");
      if (a.status == 200) {
        lat.Add("healthz", MsSince(t));
      } else {
        lat.Add("healthz", 5000);  // no answer within the client's timeout
        tally.Add("probe failures", a.status);
      }
      std::this_thread::sleep_for(10ms);
    }
  });
  // Well-behaved clients.
  for (int i = 0; i < clients; ++i) {
    const std::string source = fmt::format("127.0.{}.{}", 10 + i / 250, 1 + i % 250);
    const std::string token = tokens[static_cast<std::size_t>(i)];
    if (i < followers) {
      threads.emplace_back([&, source, token] {
        while (!stop) {
          int fd = Dial(port, source, 1);
          if (fd < 0) break;
          SendAll(fd, fmt::format("GET /v1/jobs/{}/logs?follow=true HTTP/1.1\r\nHost: "
                                  "berthd\r\nAuthorization: Bearer {}\r\n\r\n",
                                  silent, token));
          char buf[4096];
          bool first = true;
          while (!stop) {
            ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) break;
            if (n > 0 && first) {
              tally.Add("log follow", std::atoi(buf + 9));
              first = false;
            }
          }
          ::close(fd);
        }
      });
      continue;
    }
    threads.emplace_back([&, source, token, i] {
      Conn c(port, source);
      std::mt19937 rng(static_cast<unsigned>(i));
      std::int64_t last = silent;
      while (Clock::now() < until) {
        const int pick = static_cast<int>(rng() % 10);
        auto t = Clock::now();
        if (pick < 2) {
          auto a = c.Call("POST", "/v1/jobs", token, SubmitSpec(seq++));
          if (a.status == 201) {
            lat.Add("submit", MsSince(t));
            auto body = json::parse(a.body, nullptr, false);
            if (body.is_object()) {
              last = body.value("id", last);
              std::lock_guard lock(acked_mu);
              acked.push_back(last);
            }
          } else {
            tally.Add("well-behaved errors", a.status);
          }
        } else {
          std::string op = pick < 6 ? "get" : pick < 8 ? "list" : "why";
          std::string target = op == "get"    ? fmt::format("/v1/jobs/{}", last)
                               : op == "list" ? "/v1/jobs?limit=20"
                                              : fmt::format("/v1/jobs/{}/why", last);
          auto a = c.Call("GET", target, token);
          if (a.status == 200) {
            lat.Add(op, MsSince(t));
          } else {
            tally.Add("well-behaved errors", a.status);
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(think_ms));
      }
    });
  }

  // Hostile clients, each kind from addresses of its own.
  if (hostile) {
    // Idle connections, reopened when the server closes them.
    threads.emplace_back([&] {
      std::vector<int> fds(static_cast<std::size_t>(idle), -1);
      std::map<int, long> opened;
      while (!hostile_stop) {
        for (std::size_t k = 0; k < fds.size(); ++k) {
          if (fds[k] >= 0 && PeerClosed(fds[k])) {
            ::close(fds[k]);
            fds[k] = -1;
            tally.Add("idle: closed by berthd", 0);
          }
          if (fds[k] < 0) {
            fds[k] = Dial(port, fmt::format("127.0.20.{}", 1 + k % 4), 1);
            if (fds[k] >= 0) tally.Add("idle: opened", 0);
          }
        }
        std::this_thread::sleep_for(500ms);
      }
      for (int fd : fds) {
        if (fd >= 0) ::close(fd);
      }
    });
    // Slowloris: 50 connections sending a header byte every 500 ms.
    threads.emplace_back([&] {
      std::vector<int> fds(50, -1);
      const std::string head = "GET /v1/jobs HTTP/1.1\r\nHost: berthd\r\nX-Slow: ";
      std::vector<std::size_t> sent(fds.size(), 0);
      while (!hostile_stop) {
        for (std::size_t k = 0; k < fds.size(); ++k) {
          if (fds[k] >= 0 && PeerClosed(fds[k])) {
            ::close(fds[k]);
            fds[k] = -1;
            tally.Add("slowloris: cut off", 0);
          }
          if (fds[k] < 0) {
            fds[k] = Dial(port, "127.0.21.1", 1);
            sent[k] = 0;
          }
          if (fds[k] >= 0) {
            char c = sent[k] < head.size() ? head[sent[k]] : 'x';
            ++sent[k];
            ::send(fds[k], &c, 1, MSG_NOSIGNAL);
          }
        }
        std::this_thread::sleep_for(500ms);
      }
      for (int fd : fds) {
        if (fd >= 0) ::close(fd);
      }
    });
    auto looping = [&](std::string kind, std::string source, auto call) {
      threads.emplace_back([&, kind, source, call] {
        Conn c(port, source);
        std::mt19937_64 rng(std::hash<std::string>{}(kind));
        while (!hostile_stop) {
          tally.Add(kind, call(c, rng));
          std::this_thread::sleep_for(2ms);
        }
      });
    };
    const std::size_t id_len = admin.find('_', 6) - 6;
    const std::size_t secret_len = admin.size() - 6 - id_len - 1;
    looping("header flood", "127.0.22.1", [](Conn& c, auto&) {
      std::string headers;
      for (int f = 0; f < 64; ++f)
        headers += fmt::format("X-Flood-{}: {}\r\n", f, std::string(1000, 'h'));
      return c.Call("GET", "/v1/jobs", "", "", headers).status;
    });
    looping("made-up token ids", "127.0.23.1", [=](Conn& c, auto& rng) {
      return c
          .Call("GET", "/v1/jobs",
                fmt::format("berth_{:0{}x}_{:0{}x}", rng() >> 8, id_len, rng(), secret_len))
          .status;
    });
    looping("wrong secrets", "127.0.24.1", [=](Conn& c, auto& rng) {
      return c
          .Call("GET", "/v1/jobs",
                fmt::format("{}_{:0{}x}", admin.substr(0, 6 + id_len), rng(), secret_len))
          .status;
    });
    looping("oversized bodies", "127.0.25.1", [](Conn& c, auto&) {
      return c.Call("POST", "/v1/jobs", "", std::string(8 << 20, 'x')).status;
    });
    looping("non-UTF-8 bytes", "127.0.26.1", [=](Conn& c, auto& rng) {
      if (rng() % 2 == 0) return c.Call("GET", "/v1/jobs/%FF%FE", admin).status;
      return c.Call("POST", "/v1/jobs", admin, "{\"name\":\"x\",\"command\":[\"\xff\"]}").status;
    });
  }

  std::this_thread::sleep_until(until);
  const ProcStats at_load = Sample(berthd.pid());
  hostile_stop = true;
  stop = true;
  for (auto& t : threads) t.join();
  const double load_s = MsSince(start) / 1000.0;

  // Settled: connections closed, streams ended.
  ProcStats settled = Sample(berthd.pid());
  for (int i = 0; i < 60 && (settled.fds > at_idle.fds + 2 || settled.threads > at_idle.threads);
       ++i) {
    std::this_thread::sleep_for(500ms);
    settled = Sample(berthd.pid());
  }

  // Every acknowledged submission is there.
  std::set<std::int64_t> listed;
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto r = GetAllPages(berthd.http(), "/v1/jobs?limit=5000", "jobs");
    if (r.status == 200) {
      for (const auto& j : r.body.at("jobs")) listed.insert(j.at("id").get<std::int64_t>());
      break;
    }
    std::this_thread::sleep_for(200ms);
  }
  std::size_t lost = 0;
  for (auto id : acked) lost += !listed.contains(id);

  auto row = [&](const std::string& op) {
    auto v = lat.Of(op);
    std::cout << fmt::format("{:<10} {:>7} {:>9.1f} {:>9.1f} {:>9.1f}\n", op, v.size(),
                             Percentile(v, 0.5), Percentile(v, 0.99),
                             v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()));
  };
  std::cout << fmt::format(
      "berthd {} under {} well-behaved clients ({} following a log), {}, for {:.1f} s\n\n",
      berthd_path.empty() ? (BinDir() / "berthd").string() : berthd_path, clients, followers,
      hostile ? fmt::format("{} idle connections and hostile clients", idle) : "nothing hostile",
      load_s);
  std::cout << fmt::format("{:<10} {:>7} {:>9} {:>9} {:>9}\n", "ms", "n", "p50", "p99", "max");
  for (const char* op : {"healthz", "submit", "get", "list", "why"}) row(op);
  std::cout << "\nanswers by kind (status: count; 0 = no answer or a closed connection)\n";
  json answers = json::object();
  for (const auto& [kind, by] : tally.counts()) {
    std::string line;
    for (const auto& [status, n] : by) {
      line += fmt::format(" {}:{}", status, n);
      answers[kind][std::to_string(status)] = n;
    }
    std::cout << fmt::format("  {:<24}{}\n", kind, line);
  }
  std::cout << fmt::format("\nacknowledged submissions {}, missing afterwards {}\n", acked.size(),
                           lost);
  std::cout << fmt::format("{:<10} {:>8} {:>8} {:>10}\n", "berthd", "threads", "fds", "RSS MiB");
  for (const auto& [label, s] :
       {std::pair{"idle", at_idle}, std::pair{"loaded", at_load}, std::pair{"settled", settled}}) {
    std::cout << fmt::format("{:<10} {:>8} {:>8} {:>10.1f}\n", label, s.threads, s.fds,
                             static_cast<double>(s.rss_kib) / 1024.0);
  }
  auto figures = [&](const std::string& op) {
    auto v = lat.Of(op);
    return json{{"n", v.size()},
                {"p50_ms", std::round(Percentile(v, 0.5) * 10) / 10},
                {"p99_ms", std::round(Percentile(v, 0.99) * 10) / 10}};
  };
  auto proc = [](const ProcStats& s) {
    return json{{"threads", s.threads}, {"fds", s.fds}, {"rss_kib", s.rss_kib}};
  };
  json result{
      {"bench", "load"},
      {"seconds", std::round(load_s * 10) / 10},
      {"clients", clients},
      {"followers", followers},
      {"idle", hostile ? idle : 0},
      {"healthz", figures("healthz")},
      {"submit", figures("submit")},
      {"get", figures("get")},
      {"answers", answers},
      {"acked", acked.size()},
      {"lost", lost},
      {"berthd", {{"idle", proc(at_idle)}, {"loaded", proc(at_load)}, {"settled", proc(settled)}}}};
  std::cout << result.dump() << '\n';
  berthd.Stop();
  return lost == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "berth-load-bench: " << e.what() << '\n';
    return 1;
  }
}
