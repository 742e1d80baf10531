#include "agent/identity.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>

#include <algorithm>

namespace berth::agent {
namespace {

std::string NameOf(std::uint32_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return fmt::format("uid{}", uid);
}

}  // namespace

Result<Identity> ResolveRunAs(const RunAs& run_as, const std::string& tenant,
                              const std::string& node) {
  Identity id;
  if (run_as.numeric) {
    id.uid = run_as.uid;
    id.gid = run_as.gid;
    id.groups = run_as.groups;
    id.name = NameOf(id.uid);
  } else if (!run_as.user.empty()) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    int rc = ::getpwnam_r(run_as.user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc != 0 || found == nullptr) {
      return Fail(Code::kFailedPrecondition,
                  fmt::format("run identity user '{}' of tenant {} does not exist on node {}; "
                              "create that user there (or in the directory the node's NSS reads), "
                              "or change tenants.{}.run_as in the policy",
                              run_as.user, tenant, node, tenant));
    }
    id.uid = found->pw_uid;
    id.gid = found->pw_gid;
    id.name = found->pw_name;
    int n = 64;
    std::vector<gid_t> groups(static_cast<std::size_t>(n));
    if (::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &n) < 0) {
      groups.resize(static_cast<std::size_t>(n));
      ::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &n);
    }
    groups.resize(static_cast<std::size_t>(std::max(n, 0)));
    id.groups.assign(groups.begin(), groups.end());
  } else {
    return Fail(Code::kFailedPrecondition,
                fmt::format("berthd sent no run identity for tenant {}; a node that confines "
                            "runs starts none without one (upgrade berthd)",
                            tenant));
  }
  if (std::find(id.groups.begin(), id.groups.end(), id.gid) == id.groups.end()) {
    // The primary group first, as initgroups(3) does.
    id.groups.push_back(id.gid);
    std::rotate(id.groups.begin(), id.groups.end() - 1, id.groups.end());
  }
  const bool root_group = std::find(id.groups.begin(), id.groups.end(), 0U) != id.groups.end();
  if ((id.uid == 0 || root_group) && !run_as.allow_root) {
    return Fail(Code::kPermissionDenied,
                fmt::format("the run identity of tenant {} is root ({}); runs execute as root "
                            "only where the policy sets tenants.{}.run_as.allow_root: true",
                            tenant, id.uid == 0 ? "uid 0" : "group 0", tenant));
  }
  return id;
}

}  // namespace berth::agent
