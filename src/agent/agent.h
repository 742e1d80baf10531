// The node agent: one long-lived stream to berthd (agent.proto) over which it
// registers this node's inventory and runs, heartbeats under a lease, takes
// start/stop orders and reports starts, logs and exits. Embeddable: berthd's
// all-in-one mode runs agents in-process; berth-agent is a thin main around it.
//
// Threads: a worker owns the Runner and does all writes to the stream; a
// reader per connection only moves server messages into the worker's inbox.
// Jobs are supervised by berth-shim processes, so stopping or killing the
// agent never stops a job; an agent cut off from berthd for longer than the
// lease plus its fence grace stops them itself (fence.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "agent/fence.h"
#include "agent/gpu_provider.h"
#include "agent/node_cert.h"
#include "agent/prober.h"
#include "agent/runner.h"
#include "agent/shared_gpus.h"
#include "berth/v1/agent.grpc.pb.h"
#include "common/clock.h"
#include "model/fencing.h"
#include "model/node.h"

namespace berth::agent {

inline constexpr std::string_view kAgentVersion = "0.1.0";

struct AgentOptions {
  std::filesystem::path data_dir;
  std::filesystem::path shim_path;
  std::int64_t poll_interval_ms = 100;
  // Doubles per failure, up to 2x (1 s): an agent finds a restarted berthd,
  // or the standby that took over, within about 1 s of it listening (a
  // refused connection costs berthd nothing).
  std::int64_t reconnect_backoff_ms = 500;
  // How often GPU health is polled from the provider; changes since the
  // last report are sent to berthd (GpuHealthChanged).
  std::int64_t health_interval_ms = 2'000;
  // How often every GPU is sampled (utilization, memory, temperature,
  // power, ECC, last Xid) and one GpuTelemetry sent; 0: never. Best effort:
  // samples taken while the stream is down are not kept.
  std::int64_t telemetry_interval_ms = 10'000;
  // How long a container run may wait for `podman pull` of its image before
  // it fails (its shim gives up; the agent never waits for it).
  std::int64_t pull_timeout_ms = std::int64_t{10} * 60 * 1000;
  // The containers.conf podman gets as CONTAINERS_CONF (RunnerOptions).
  std::filesystem::path podman_conf{};
  // Where podman is looked up (RunnerOptions::search_path), at registration
  // and before every heartbeat; unset: the agent's own PATH.
  std::optional<std::string> podman_search_path{};
  // How long a run's outputs stay on the node after berthd acknowledged its
  // exit (RunnerOptions::output_retention_ms).
  std::int64_t output_retention_ms = kDefaultOutputRetentionMs;
  // GPUs to report in sharing mode; empty: as the provider says (a simulated
  // cluster's shared_gpus), else none.
  SharedGpus shared_gpus{};
  // Confinement (docs/security.md): an agent that is root runs each job as
  // its tenant's run identity in a cgroup under `cgroup_parent`; with
  // single_user (or when not root) every job runs as the agent's own user.
  bool single_user = false;
  std::string cgroup_parent = "berth";
  // Where the GPU device nodes are; empty: /dev on NVIDIA nodes, stand-ins
  // in data_dir/dev on simulated ones.
  std::filesystem::path gpu_device_dir{};
  // Self-fencing (fence.h): with no contact with berthd for its lease plus
  // this long, every run is stopped (reason "fenced"). nullopt: never, for
  // agents inside berthd, which cannot be cut off from it.
  std::optional<std::int64_t> fence_grace_ms = model::kDefaultFenceGraceMs;
  // Node certificate rotation (docs/operations.md, "TLS and node
  // credentials"); unset: none (plain or in-process agents). Once 2/3 of the
  // certificate's lifetime has passed, the agent makes a new key, asks
  // berthd to sign a CSR for it over the stream, writes the certificate and
  // key over these files (the key 0600) and presents them from its next
  // connection on; a refusal or no answer is retried with backoff.
  struct CertRenewal {
    std::filesystem::path cert_file;  // --tls-cert
    std::filesystem::path key_file;   // --tls-key
    std::string cert_pem;             // the certificate in use now
    std::string key_pem;              // and its key
    // A channel to berthd presenting this certificate and key.
    std::function<std::shared_ptr<grpc::Channel>(const std::string& cert_pem,
                                                 const std::string& key_pem)>
        channel;
  };
  std::optional<CertRenewal> cert_renewal{};
  // A new channel to berthd (with cert_renewal: renewal.channel makes it,
  // with the certificate in use). Set: after a connection that did not
  // register, the next one goes over a new channel, so that gRPC's own
  // reconnect backoff on the old one never delays finding a berthd that
  // just began listening (a standby that took over). Unset: one channel.
  std::function<std::shared_ptr<grpc::Channel>()> new_channel{};
};

class Agent {
 public:
  // `base` describes the host (name, hostname, labels, taints, cpus, memory);
  // GPUs and driver versions come from `provider` at each registration.
  Agent(AgentOptions options, model::NodeInfo base, std::unique_ptr<GpuProvider> provider,
        std::shared_ptr<grpc::Channel> channel, const Clock& clock);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;
  ~Agent();  // Stop()

  // Spawns the worker and returns at once. Connects, and reconnects forever
  // with backoff while berthd is down.
  void Start();
  // Closes the stream and joins the threads. Running jobs are not touched:
  // they outlive the agent, and the next agent reattaches to them.
  void Stop();

 private:
  using Stream = grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>;

  void WorkerLoop();
  // One connection, from Register until the stream breaks or Stop().
  // Returns whether berthd accepted the registration.
  bool RunConnection();
  void ReaderLoop(Stream* stream);
  bool Send(Stream* stream, const v1::AgentMessage& msg);
  void Handle(Stream* stream, const v1::ServerMessage& msg);
  // Supervises runs (stops, max runtime, fencing) while waiting; false once
  // stopping.
  bool WaitSupervising(std::int64_t ms);
  // Stops every run held, reason "fenced", once the fence time has come
  // without contact with berthd (a run whose stop could not be recorded is
  // tried again on the next call). Then Supervise().
  void Supervise();
  model::NodeInfo Describe();
  // Polls the provider and sends a GpuHealthChanged for every GPU whose
  // health differs from what berthd last heard. False if the stream broke.
  bool ReportHealthChanges(Stream* stream);
  // Looks for podman on the runner's search path (a stat per directory, no
  // process: cheap enough for every heartbeat) and sends a
  // ContainerRuntimeChanged when the answer differs from what berthd last
  // heard. False if the stream broke.
  bool ReportRuntimeChange(Stream* stream);
  // Samples every GPU with the runs now holding them and sends one
  // GpuTelemetry. A provider error sends nothing (logged when it changes).
  // False if the stream broke.
  bool SendTelemetry(Stream* stream);
  // Sends a RenewCertificate when the certificate is due and none is
  // outstanding. False if the stream broke.
  bool MaybeRenewCert(Stream* stream);
  // berthd's answer: on success the new certificate and key are written and
  // the next connection uses them; otherwise a retry is scheduled.
  void OnCertificateIssued(const v1::CertificateIssued& msg);
  void ScheduleRenewalRetry(const std::string& why);
  // Hands the prober the replicas running now and acts on its verdicts: a
  // failed liveness stops the run ("liveness"); every verdict waits in
  // health_out_ for the stream (worker only).
  void TendProbes();

  AgentOptions options_;
  model::NodeInfo base_;
  std::unique_ptr<GpuProvider> provider_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  const Clock& clock_;
  // What the runner can enforce here; set while runner_ is built (so it is
  // declared before it), reported in every registration.
  model::Confinement confinement_{};
  Runner runner_;  // worker thread only
  Fence fence_;    // worker thread only
  // Runs the runner holds, acknowledged or not (worker only): what fencing
  // stops. Rebuilt from the runner at each registration.
  std::set<std::string> held_;
  std::set<std::string> fenced_;  // stopped for "fenced" since the last contact
  std::optional<Discovery> last_discovery_;
  // GPU index -> (healthy, detail) as last reported to berthd (worker only).
  std::map<std::uint32_t, std::pair<bool, std::string>> reported_health_;
  // The container runtime ("podman" or "") as last reported to berthd, in
  // the registration or a ContainerRuntimeChanged (worker only).
  std::string reported_runtime_;
  // Certificate rotation (worker only): when the next request goes out, the
  // key of the one outstanding and when it was sent, failures in a row, and
  // a channel presenting a renewed certificate, used from the next connection.
  TimeMs renew_at_ms_ = 0;
  std::optional<NodeKeyRequest> renew_pending_;
  TimeMs renew_sent_ms_ = 0;
  int renew_failures_ = 0;
  std::shared_ptr<grpc::Channel> next_channel_;
  bool quiet_retries_ = false;   // a failed attempt was logged already
  std::string telemetry_error_;  // the last sampling error logged; empty: none
  Prober prober_;
  std::deque<v1::AgentMessage> health_out_;  // RunHealth not yet sent (worker only)

  std::mutex mu_;  // guards the members below
  std::condition_variable cv_;
  bool stopping_ = false;
  grpc::ClientContext* context_ = nullptr;  // the live stream's, for TryCancel
  std::deque<v1::ServerMessage> inbox_;
  bool stream_broken_ = false;

  std::mutex write_mu_;  // gRPC allows one writer at a time
  std::thread worker_;
};

// An agent's mutual-TLS credentials, as PEM text (berth-agent --tls-ca,
// --tls-cert, --tls-key; issued by `berthd cert node`).
struct AgentTls {
  std::string ca_pem;    // the CA berthd's certificate must chain to
  std::string cert_pem;  // this node's certificate: subject CN = node name
  std::string key_pem;
  // Expected name in berthd's certificate when it differs from the --server
  // host (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG); empty: the host.
  std::string server_name;
};

// The gRPC target for berth-agent's --server: one HOST:PORT as it is, or
// several control-plane addresses "IP:PORT,IP:PORT,..." (a berthd and its
// standbys) as one target of them all ("ipv4:..." or "ipv6:..."). gRPC's
// pick_first tries them in order and keeps the first that takes the
// stream; only the leading berthd listens for agents, so after a takeover
// the agent's next connection finds the new leader. Several addresses are
// IP literals of one family (a DNS name that resolves to every berthd
// does the same as one HOST:PORT). Errors name the field "server".
Result<std::string> AgentTarget(std::string_view servers);

// A channel to berthd with reconnect backoff capped at 2 s, so an agent
// notices a restarted berthd quickly: mutual TLS with `tls`, else insecure
// (for a loopback berthd started with --plain-agents).
std::shared_ptr<grpc::Channel> MakeAgentChannel(const std::string& target,
                                                const std::optional<AgentTls>& tls);
inline std::shared_ptr<grpc::Channel> MakeAgentChannel(const std::string& target) {
  return MakeAgentChannel(target, std::nullopt);
}

}  // namespace berth::agent
