// What both service backends (MemoryServiceStore, SqliteStore) decide alike
// about a service change, so the conformance suite holds them to one set of
// answers: the errors they refuse with, and which revision a rollback
// restores. Internal to src/store/.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/service.h"
#include "store/store.h"

namespace berth::store {

// "service ml/coder": how errors and the authorization layer name it.
std::string ServiceObjectName(const std::string& tenant, const std::string& name);
Error ServiceNotFound(const std::string& tenant, const std::string& name);
// The progress moved since the caller read it (SetRolloutProgress).
Error RolloutMoved(const std::string& tenant, const std::string& name);
// The refusal of a create past the tenant's limit (field "name").
Error TooManyServices(const std::string& tenant, std::size_t max_per_tenant);
// Ok, or InvalidArgument naming "min" or "max".
Status CheckScaleBounds(const model::ReplicaBounds& bounds);
// The revision a rollback restores: the newest kept one older than
// `current`. `revisions` newest first.
std::optional<ServiceRevision> RevisionBefore(const std::vector<ServiceRevision>& revisions,
                                              std::int64_t current);
Error NoRevisionBefore(const std::string& tenant, const std::string& name, std::int64_t current);

}  // namespace berth::store
