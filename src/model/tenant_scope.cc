#include "model/tenant_scope.h"

#include <algorithm>

namespace berth::model {

TenantScope TenantScope::Of(std::vector<std::string> tenants) {
  std::ranges::sort(tenants);
  tenants.erase(std::ranges::unique(tenants).begin(), tenants.end());
  TenantScope s;
  s.tenants_ = std::move(tenants);
  return s;
}

bool TenantScope::Contains(std::string_view tenant) const {
  return all_ || std::ranges::binary_search(tenants_, tenant, std::less<>{});
}

}  // namespace berth::model
