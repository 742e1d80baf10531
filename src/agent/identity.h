// Run identities: the Unix user a tenant's runs execute as on this node.
// berthd names it (tenants.<t>.run_as in the policy, or the identity derived
// from the tenant's name); the node resolves a name through NSS, the way
// slurmd resolves the submitting user, so an operator's LDAP or SSSD users
// work unchanged. docs/security.md explains the choice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace berth::agent {

// What berthd asked for (StartRun.run_as).
struct RunAs {
  std::string user;      // resolved through NSS; empty with numeric
  bool numeric = false;  // uid/gid/groups as given
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;
  bool allow_root = false;
};

// What the run gets.
struct Identity {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;  // supplementary, the primary included
  std::string name;                   // the user's name; "uid<N>" when it has none
};

// Resolves `run_as` for a run of `tenant` on `node`. Errors say what to
// change: an unknown user, root without allow_root, no identity at all.
Result<Identity> ResolveRunAs(const RunAs& run_as, const std::string& tenant,
                              const std::string& node);

}  // namespace berth::agent
