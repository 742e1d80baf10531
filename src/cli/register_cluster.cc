// berth status, nodes, gpus, node, node remove, cordon, drain and uncordon.
#include <string>

#include "cli/registry.h"

namespace berth::cli {
namespace {

struct ClusterFlags {
  std::string node_name;
  std::string remove_name;
  std::string cordon_target;
  std::string cordon_reason;
};

}  // namespace

void RegisterClusterCommands(CommandRegistry& registry) {
  auto& f = registry.Keep<ClusterFlags>();
  CLI::App& app = registry.app();
  auto* status = app.add_subcommand(
      "status",
      "the control plane: which berthd leads, its term and since when, each standby's view of "
      "the lease, and which do not answer (every address of --server)");
  registry.OnRun(status, [](ApiClient& api, const Output& out) { return ShowStatus(api, out); });

  auto* nodes = app.add_subcommand("nodes", "list nodes and their GPUs");
  registry.OnRun(nodes, [](ApiClient& api, const Output& out) { return ListNodes(api, out); });

  auto* gpus = app.add_subcommand("gpus", "list every GPU and the job holding it");
  registry.OnRun(gpus, [](ApiClient& api, const Output& out) { return ListGpus(api, out); });

  auto* node_cmd = app.add_subcommand("node", "show one node: state, cordon, GPUs and events");
  // Not required() here: `berth node remove NAME` names it below instead.
  node_cmd->add_option("node", f.node_name, "node name");
  registry.OnRun(node_cmd, [&f](ApiClient& api, const Output& out) -> Status {
    if (f.node_name.empty()) {
      return InvalidField("node", "name a node: `berth node NAME` (`berth nodes` lists them)");
    }
    return ShowNode(api, f.node_name, out);
  });
  auto* remove_cmd = node_cmd->add_subcommand(
      "remove",
      "remove a node without active runs from the inventory and revoke its certificates "
      "(platform admins)");
  remove_cmd->add_option("name", f.remove_name, "node name")->required();
  registry.OnRun(remove_cmd, [&f](ApiClient& api, const Output& out) {
    return RemoveNode(api, f.remove_name, out);
  });

  for (const char* action : {"cordon", "drain", "uncordon"}) {
    const std::string what =
        std::string(action) == "cordon"
            ? "place nothing new on a node or one GPU (NODE or NODE/GPU); running jobs continue"
        : std::string(action) == "drain"
            ? "cordon a node and stop its jobs, which are queued again elsewhere"
            : "lift a cordon or drain from a node or one GPU (NODE or NODE/GPU)";
    auto* cmd = app.add_subcommand(action, what);
    cmd->add_option("target", f.cordon_target, "NODE or NODE/GPU-INDEX")->required();
    if (std::string(action) != "uncordon") {
      cmd->add_option("--reason", f.cordon_reason, "why, for the node's events and the audit");
    }
    registry.OnRun(cmd, [&f, action = std::string(action)](ApiClient& api, const Output& out) {
      return CordonTarget(api, action, f.cordon_target, f.cordon_reason, out);
    });
  }
}

}  // namespace berth::cli
