// The gateway's request-log collector: a unix datagram socket HAProxy sends
// one line per request to (config.cc's `log` line), and one reader thread
// that parses each line (request_log.h) into per-route histograms
// (latency.h). No syslog daemon, no file on disk.
//
// Who can write to the socket: it is bound 0600 inside the gateway's state
// directory, which is 0700 and berthd's; a job (its tenant's identity) can
// neither reach nor write it, so it cannot inject fake latencies
// (docs/security.md). HAProxy's worker runs as berthd's user.
//
// HAProxy sends each line with sendmsg() to the socket's path, not on a
// connected socket, so a collector that binds the path again (a new berthd
// adopting a live HAProxy) receives the next line; lines sent while no one
// is bound are lost (HAProxy drops them without counting).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "gateway/latency.h"

namespace berth::gateway {

class RequestLogCollector {
 public:
  // Unlinks whatever is at `path` (a stale socket from an earlier berthd),
  // binds a datagram socket there with mode 0600, and starts the reader.
  static Result<std::unique_ptr<RequestLogCollector>> Start(const std::filesystem::path& path);

  // Stops the reader (Stop). Leaves the socket file: HAProxy outlives berthd
  // and the next collector binds the path again.
  ~RequestLogCollector();
  RequestLogCollector(const RequestLogCollector&) = delete;
  RequestLogCollector& operator=(const RequestLogCollector&) = delete;

  // Reads what is queued on the socket, then stops the reader and closes
  // the socket. What was recorded stays readable. Idempotent; called by
  // the collector's owner only (not concurrently with itself).
  void Stop();

  // Thread-safe, against the reader and each other.
  std::vector<RouteLatency> TakeWindow();
  std::vector<RouteLatencyHistogram> Cumulative();
  RequestLogCounters Counters();
  void Retain(const std::vector<std::string>& backends);
  // Set when the reader stopped on a socket error (not by Stop).
  std::string ReaderError();

 private:
  RequestLogCollector() = default;
  void Run();
  // Receives up to one batch without waiting; the number of datagrams.
  int ReadBatch();

  int fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: Stop() writes it to end Run()
  std::thread reader_;
  std::vector<char> buffer_;  // the reader's receive buffers (reader thread only)
  std::mutex mu_;
  LatencyAggregator aggregator_;  // guarded by mu_
  std::string reader_error_;      // guarded by mu_
};

}  // namespace berth::gateway
