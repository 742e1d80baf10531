// A request's tenant scope (model/tenant_scope.h) as a SQL condition, so
// every SQLite read that lists tenant-owned rows filters in its query,
// before its LIMIT: a page holds only rows the caller may see and is never
// short because rows it may not see took its places.
#pragma once

#include <string>
#include <string_view>

#include "model/tenant_scope.h"
#include "store/sqlite_db.h"

namespace berth::store {

// " AND <column> IN (?first, ?first+1, ...)" for an explicit scope, one
// numbered parameter per tenant; "" for every tenant; " AND 0" for none.
// With `keep_untenanted`, rows whose column is '' (a record about no
// tenant, e.g. an audit record of a login) are kept as well.
std::string ScopeSql(const model::TenantScope& scope, std::string_view column, int first,
                     bool keep_untenanted = false);
// Binds the scope's tenants to the parameters ScopeSql numbered from
// `first`; returns the next free parameter number.
int BindScope(Statement& st, int first, const model::TenantScope& scope);

}  // namespace berth::store
