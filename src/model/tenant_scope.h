// Which tenants' rows a request may see: the one answer to "whose data is
// this caller's?" (docs/security.md "Where tenancy is enforced"). The
// authorization layer (api/auth.h, Authorizer::ScopeOf) computes it once
// per request from the authenticated caller and hands it to the handler,
// which passes it to every store read that lists tenant-owned rows; the
// store filters in its query, before any LIMIT, so a page is never short
// and a handler never filters by tenant itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace berth::model {

class TenantScope {
 public:
  // Sees nothing: an anonymous caller, a job token, a metrics-reader, an
  // identity with no memberships. The default, so a scope nobody computed
  // fails closed.
  TenantScope() = default;
  // Every tenant, present and future: a platform admin, and the server's
  // own reads (metering, alerting, the control loop).
  static TenantScope All() {
    TenantScope s;
    s.all_ = true;
    return s;
  }
  // Exactly these tenants (sorted and deduplicated here); none: nothing.
  static TenantScope Of(std::vector<std::string> tenants);

  bool all() const { return all_; }
  // True when the scope sees no tenant at all.
  bool none() const { return !all_ && tenants_.empty(); }
  bool Contains(std::string_view tenant) const;
  // The tenants of an explicit scope, sorted; empty for All() (check all()).
  const std::vector<std::string>& tenants() const { return tenants_; }

  friend bool operator==(const TenantScope&, const TenantScope&) = default;

 private:
  bool all_ = false;
  std::vector<std::string> tenants_;  // sorted, unique; unused when all_
};

}  // namespace berth::model
