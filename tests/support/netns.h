// Hosts for a multi-host test on one machine: each host is a network
// namespace with one veth link to a bridge (in a namespace of its own), all
// on one /24. The fabric is made by the test and torn down after it; a
// leftover from a test that crashed is removed by the next fabric made on
// the machine.
//
// A partition between two hosts is made the way a switch that stops
// forwarding between them would: each host's ARP entry for the other points
// at a MAC address nobody holds, so packets either way are dropped without
// a reply (no RST, no ICMP), for connections old and new. Healing deletes
// the two entries and ARP resolves again.
//
// Processes are put on a host by starting them while the calling thread is
// in its namespace (ScopedNetns): a child inherits its parent thread's
// network namespace. The test thread itself can sit on a host (a client
// machine) for its HTTP calls.
//
// Needs root and iproute2's `ip` (netns, veth and bridge links); NetFabric::
// Unavailable() says why not, for a test to skip with.
//
// Plain C++ (no GoogleTest).
#pragma once

#include <expected>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace berth::tests {

class NetFabric {
 public:
  // Why namespaces cannot be made here, or nullopt.
  static std::optional<std::string> Unavailable();
  // An empty fabric: the bridge and its namespace, or why not.
  static std::expected<NetFabric, std::string> Make();

  NetFabric(NetFabric&& other) noexcept;
  NetFabric& operator=(NetFabric&&) = delete;
  NetFabric(const NetFabric&) = delete;
  NetFabric& operator=(const NetFabric&) = delete;
  // Deletes every namespace of the fabric. Kill the processes on its hosts
  // first: a namespace lives on while a process is in it.
  ~NetFabric();

  // A new host `name` (letters and digits) on the bridge: its IPv4 address.
  std::expected<std::string, std::string> AddHost(const std::string& name);
  const std::string& ip(const std::string& host) const { return hosts_.at(host).ip; }
  // The namespace's name under /run/netns (for ScopedNetns, `ip netns exec`).
  const std::string& netns(const std::string& host) const { return hosts_.at(host).netns; }
  // The fabric's network, as pg_hba.conf takes it ("10.77.0.0/24").
  std::string network() const;

  // Drops every packet between the two hosts, both ways, from now on.
  std::expected<void, std::string> Cut(const std::string& a, const std::string& b);
  std::expected<void, std::string> Heal(const std::string& a, const std::string& b);

 private:
  NetFabric() = default;
  struct Host {
    std::string netns;
    std::string ip;
    int index = 0;
  };
  std::string prefix_;  // "bn<pid>x<n>": every namespace's name starts with it
  std::string hub_;     // the bridge's namespace
  std::map<std::string, Host> hosts_;
  std::vector<std::string> made_;  // namespaces to delete, hub first
};

// Moves the calling thread into a namespace made by `ip netns add` until
// destroyed, then back where it was. Throws std::runtime_error if it cannot.
class ScopedNetns {
 public:
  explicit ScopedNetns(const std::string& netns);
  ~ScopedNetns();
  ScopedNetns(const ScopedNetns&) = delete;
  ScopedNetns& operator=(const ScopedNetns&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace berth::tests
