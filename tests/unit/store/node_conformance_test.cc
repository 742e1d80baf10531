// The node conformance suite: every backend of store::NodeStore (SqliteStore;
// PostgreSQL next) runs the same tests of registration, readiness, cordons
// and GPU health. Uncordoning a GPU resolves its alerts, so a backend here
// keeps alerts too (backends.h). What only SQLite does (reopening) stays in
// sqlite_store_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/builders.h"
#include "unit/store/backends.h"

namespace berth::store {
namespace {

class NodeStoreConformance : public tests::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_NE(b_.nodes, nullptr);
    ASSERT_NE(b_.alerts, nullptr);
  }

  NodeStore& store() { return *b_.nodes; }
  AlertStore& alerts() { return *b_.alerts; }

  // The one node, n1.
  NodeRecord Node() {
    auto nodes = store().ListNodes();
    EXPECT_TRUE(nodes.has_value()) << nodes.error().message;
    EXPECT_EQ(nodes.value_or(std::vector<NodeRecord>{}).size(), 1U);
    return nodes && !nodes->empty() ? nodes->front() : NodeRecord{};
  }
  std::vector<std::string> Events(std::size_t limit = 100) {
    std::vector<std::string> out;
    auto events = store().NodeEvents("n1", limit);
    EXPECT_TRUE(events.has_value()) << events.error().message;
    for (const auto& e : events.value_or(std::vector<NodeEvent>{})) out.push_back(e.event);
    return out;
  }
  // An open alert about GPU `gpu` of n1 (none: the node's own).
  std::int64_t Raise(std::optional<std::uint32_t> gpu, TimeMs at) {
    Alert alert;
    alert.kind = model::AlertKind::kGpuHardware;
    alert.node = "n1";
    alert.gpu = gpu;
    alert.raised_ms = at;
    auto id = alerts().RaiseAlert(alert);
    EXPECT_TRUE(id.has_value()) << id.error().message;
    return id.value_or(0);
  }
};

TEST_P(NodeStoreConformance, ANodeRegistersReadyAndItsStateChangesAreTimed) {
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(2), 1000).has_value());
  NodeRecord n = Node();
  EXPECT_EQ(n.info, tests::H100Node(2));
  EXPECT_EQ(n.state, model::NodeState::kReady);
  EXPECT_EQ(n.state_changed_ms, 1000);
  EXPECT_FALSE(n.cordon.has_value());
  EXPECT_TRUE(n.gpu_cordons.empty());

  ASSERT_TRUE(store().SetNodeState("n1", model::NodeState::kNotReady, 2000).has_value());
  n = Node();
  EXPECT_EQ(n.state, model::NodeState::kNotReady);
  EXPECT_EQ(n.state_changed_ms, 2000);

  // Registering again makes it Ready with what the agent reports now; while
  // it is Ready, registering again does not move when it became so.
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(4), 3000).has_value());
  n = Node();
  EXPECT_EQ(n.state, model::NodeState::kReady);
  EXPECT_EQ(n.state_changed_ms, 3000);
  EXPECT_EQ(n.info.gpus.size(), 4U);
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(4), 4000).has_value());
  EXPECT_EQ(Node().state_changed_ms, 3000);

  EXPECT_EQ(Events(),
            (std::vector<std::string>{"Registered", "NotReady", "Registered", "Registered"}));
  // A limit keeps the newest events, still oldest first.
  EXPECT_EQ(Events(2), (std::vector<std::string>{"Registered", "Registered"}));
  EXPECT_EQ(Events(1).size(), 1U);
  EXPECT_TRUE(store().NodeEvents("n2", 10)->empty());
  // A node never registered has no state to set, and gets no events.
  EXPECT_EQ(store().SetNodeState("n2", model::NodeState::kNotReady, 5000).error().code,
            Code::kNotFound);
  EXPECT_TRUE(store().NodeEvents("n2", 10)->empty());
}

TEST_P(NodeStoreConformance, CordonsAreKeptPerNodeAndGpuAndUncordonResolvesAlerts) {
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(4), 1000));
  Cordon auto_cordon{model::CordonKind::kCordon, "Xid 48", "berth", true, 0};
  ASSERT_TRUE(store().SetCordon("n1", 2, auto_cordon, 2000));
  EXPECT_EQ(store().SetCordon("n1", 9, auto_cordon, 2000).error().code, Code::kNotFound);
  EXPECT_EQ(store().SetCordon("nope", std::nullopt, auto_cordon, 2000).error().code,
            Code::kNotFound);
  Alert alert;
  alert.kind = model::AlertKind::kGpuHardware;
  alert.severity = model::AlertSeverity::kCritical;
  alert.node = "n1";
  alert.gpu = 2;
  alert.message = "Xid 48";
  alert.raised_ms = 2000;
  ASSERT_TRUE(alerts().RaiseAlert(alert));
  ASSERT_TRUE(store().SetCordon("n1", std::nullopt,
                                {model::CordonKind::kDrain, "reboot", "ops", false, 0}, 2100));
  auto nodes = *store().ListNodes();
  ASSERT_EQ(nodes.size(), 1U);
  ASSERT_TRUE(nodes[0].cordon.has_value());
  EXPECT_EQ(nodes[0].cordon->kind, model::CordonKind::kDrain);
  ASSERT_EQ(nodes[0].gpu_cordons.size(), 1U);
  EXPECT_TRUE(nodes[0].gpu_cordons.at(2).automatic);
  EXPECT_EQ(alerts().ListAlerts(true)->size(), 1U);

  EXPECT_EQ(store().Uncordon("n1", 2, "alice", 3000), true);
  EXPECT_EQ(store().Uncordon("n1", 2, "alice", 3000), false);  // nothing left to lift
  EXPECT_TRUE(alerts().ListAlerts(true)->empty());
  auto all = *alerts().ListAlerts(false);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_EQ(all[0].resolved_by, "alice");
  nodes = *store().ListNodes();
  EXPECT_TRUE(nodes[0].gpu_cordons.empty());
  EXPECT_TRUE(nodes[0].cordon.has_value());  // the node's drain stands
  std::vector<std::string> events;
  auto node_events = *store().NodeEvents("n1", 10);
  for (const auto& e : node_events) events.push_back(e.event);
  EXPECT_EQ(events,
            (std::vector<std::string>{"Registered", "GpuCordoned", "Draining", "GpuUncordoned"}));
}

// A second cordon of the same node or GPU replaces the first: one cordon
// each, the newest, stamped when it was set.
TEST_P(NodeStoreConformance, ASecondCordonReplacesTheFirst) {
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(4), 1000).has_value());
  ASSERT_TRUE(store()
                  .SetCordon("n1", std::nullopt,
                             {model::CordonKind::kCordon, "maintenance", "alice", false, 0}, 2000)
                  .has_value());
  ASSERT_TRUE(store()
                  .SetCordon("n1", std::nullopt,
                             {model::CordonKind::kDrain, "reboot", "bob", false, 0}, 3000)
                  .has_value());
  ASSERT_TRUE(
      store().SetCordon("n1", 1, {model::CordonKind::kCordon, "Xid 48", "berth", true, 0}, 3100));
  ASSERT_TRUE(
      store().SetCordon("n1", 1, {model::CordonKind::kCordon, "flaky", "carol", false, 0}, 3200));
  NodeRecord n = Node();
  ASSERT_TRUE(n.cordon.has_value());
  EXPECT_EQ(n.cordon->kind, model::CordonKind::kDrain);
  EXPECT_EQ(n.cordon->reason, "reboot");
  EXPECT_EQ(n.cordon->by, "bob");
  EXPECT_FALSE(n.cordon->automatic);
  EXPECT_EQ(n.cordon->at_ms, 3000);
  ASSERT_EQ(n.gpu_cordons.size(), 1U);
  const Cordon& gpu = n.gpu_cordons.at(1);
  EXPECT_EQ(gpu.reason, "flaky");
  EXPECT_EQ(gpu.by, "carol");
  EXPECT_FALSE(gpu.automatic);
  EXPECT_EQ(gpu.at_ms, 3200);

  // One lift takes it all off: nothing is left of the first.
  EXPECT_EQ(store().Uncordon("n1", std::nullopt, "alice", 4000), true);
  EXPECT_EQ(store().Uncordon("n1", 1, "alice", 4000), true);
  n = Node();
  EXPECT_FALSE(n.cordon.has_value());
  EXPECT_TRUE(n.gpu_cordons.empty());
  EXPECT_EQ(Events(), (std::vector<std::string>{"Registered", "Cordoned", "Draining", "GpuCordoned",
                                                "GpuCordoned", "Uncordoned", "GpuUncordoned"}));
}

TEST_P(NodeStoreConformance, UncordonWithoutACordonIsFalseAndAnUnknownNodeOrGpuIsNotFound) {
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(2), 1000).has_value());
  EXPECT_EQ(store().Uncordon("n1", std::nullopt, "alice", 2000), false);
  EXPECT_EQ(store().Uncordon("n1", 1, "alice", 2000), false);
  EXPECT_EQ(store().Uncordon("n1", 2, "alice", 2000).error().code, Code::kNotFound);
  EXPECT_EQ(store().Uncordon("nope", std::nullopt, "alice", 2000).error().code, Code::kNotFound);
  EXPECT_EQ(Events(), std::vector<std::string>{"Registered"});  // nothing was lifted
}

// Lifting a GPU's cordon resolves that GPU's open alerts, by whoever lifted
// it; another GPU's, and the node's own, stay open, and lifting the node's
// cordon resolves none.
TEST_P(NodeStoreConformance, UncordoningAGpuResolvesThatGpusAlertsOnly) {
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(4), 1000).has_value());
  const std::int64_t on1 = Raise(1, 2000);
  const std::int64_t on2 = Raise(2, 2000);
  const std::int64_t node = Raise(std::nullopt, 2000);
  ASSERT_TRUE(
      store().SetCordon("n1", 1, {model::CordonKind::kCordon, "Xid 79", "berth", true, 0}, 2000));
  ASSERT_TRUE(store().SetCordon("n1", std::nullopt,
                                {model::CordonKind::kCordon, "", "ops", false, 0}, 2000));
  EXPECT_EQ(store().Uncordon("n1", std::nullopt, "ops", 2500), true);
  EXPECT_EQ(alerts().ListAlerts(true)->size(), 3U);

  EXPECT_EQ(store().Uncordon("n1", 1, "alice", 3000), true);
  auto resolved = alerts().GetAlert(on1);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  EXPECT_EQ(resolved->resolved_ms, 3000);
  EXPECT_EQ(resolved->resolved_by, "alice");
  EXPECT_FALSE(alerts().GetAlert(on2)->resolved_ms.has_value());
  EXPECT_FALSE(alerts().GetAlert(node)->resolved_ms.has_value());
  EXPECT_EQ(alerts().ListAlerts(true)->size(), 2U);
}

TEST_P(NodeStoreConformance, AGpusHealthIsRecordedAsReported) {
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(2), 1000).has_value());
  ASSERT_TRUE(store().SetGpuHealth("n1", 1, false, "Xid 79", 2000).has_value());
  NodeRecord n = Node();
  ASSERT_EQ(n.info.gpus.size(), 2U);
  EXPECT_EQ(n.info.gpus[1].health, model::Health::kUnhealthy);
  EXPECT_EQ(n.info.gpus[1].health_detail, "Xid 79");
  EXPECT_EQ(n.info.gpus[0].health, model::Health::kHealthy);
  EXPECT_EQ(n.state, model::NodeState::kReady);  // the node stays as it was

  ASSERT_TRUE(store().SetGpuHealth("n1", 1, true, "", 3000).has_value());
  n = Node();
  EXPECT_EQ(n.info.gpus[1].health, model::Health::kHealthy);
  EXPECT_EQ(n.info.gpus[1].health_detail, "");
  EXPECT_EQ(store().SetGpuHealth("n1", 2, false, "x", 3000).error().code, Code::kNotFound);
  EXPECT_EQ(store().SetGpuHealth("nope", 0, false, "x", 3000).error().code, Code::kNotFound);
  EXPECT_EQ(Events(), (std::vector<std::string>{"Registered", "GpuUnhealthy", "GpuHealthy"}));
}

// podman installed on a node, or removed, while its agent ran: the node's
// runtime follows, with one node event per change and none for a repeat.
TEST_P(NodeStoreConformance, ANodesContainerRuntimeFollowsItsAgent) {
  EXPECT_EQ(store().SetContainerRuntime("n1", "podman", 500).error().code, Code::kNotFound);
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(2), 1000).has_value());
  EXPECT_EQ(Node().info.container_runtime, "");

  EXPECT_EQ(store().SetContainerRuntime("n1", "podman", 2000), true);
  NodeRecord n = Node();
  EXPECT_EQ(n.info.container_runtime, "podman");
  EXPECT_EQ(n.info.gpus.size(), 2U);             // the rest of the inventory stays
  EXPECT_EQ(n.state, model::NodeState::kReady);  // and so does the node's state
  EXPECT_EQ(store().SetContainerRuntime("n1", "podman", 2500), false);

  EXPECT_EQ(store().SetContainerRuntime("n1", "", 3000), true);
  EXPECT_EQ(Node().info.container_runtime, "");
  EXPECT_EQ(Events(), (std::vector<std::string>{"Registered", "ContainerRuntimeChanged",
                                                "ContainerRuntimeChanged"}));
}

TEST_P(NodeStoreConformance, RemovalRevokesTheNodesCertificatesUntilThenAndNoLater) {
  EXPECT_EQ(store().RemoveNode("n1", "ops", 1000).error().code, Code::kNotFound);
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(2), 1000).has_value());
  ASSERT_TRUE(store().SetCordon("n1", std::nullopt, Cordon{}, 1100).has_value());
  EXPECT_EQ(*store().NodeRevokedAt("n1"), std::nullopt);
  // A renewal of a node in the inventory is recorded as a node event.
  ASSERT_TRUE(store().RecordNodeCertRenewal("n1", 900, 90'000, 1200).has_value());
  EXPECT_EQ(Events().back(), "CertRenewed");

  ASSERT_TRUE(store().RemoveNode("n1", "ops", 2000).has_value());
  auto nodes = store().ListNodes();
  ASSERT_TRUE(nodes.has_value());
  EXPECT_TRUE(nodes->empty());
  EXPECT_EQ(*store().NodeRevokedAt("n1"), std::optional<TimeMs>(2000));
  EXPECT_EQ(Events().back(), "Removed");
  // Removed: nothing is renewed, whatever the certificate.
  auto gone = store().RecordNodeCertRenewal("n1", 3000, 90'000, 3000);
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().code, Code::kPermissionDenied);

  // Added back: certificates issued up to the removal stay revoked, later
  // ones renew; the cordon went with the removal.
  ASSERT_TRUE(store().UpsertNode(tests::H100Node(2), 4000).has_value());
  EXPECT_FALSE(Node().cordon.has_value());
  auto old = store().RecordNodeCertRenewal("n1", 2000, 90'000, 4100);
  ASSERT_FALSE(old.has_value());
  EXPECT_EQ(old.error().code, Code::kPermissionDenied);
  EXPECT_TRUE(store().RecordNodeCertRenewal("n1", 3000, 90'000, 4200).has_value());
}

INSTANTIATE_TEST_SUITE_P(Backends, NodeStoreConformance,
                         ::testing::ValuesIn(tests::StoreBackends()), tests::BackendName);

}  // namespace
}  // namespace berth::store
