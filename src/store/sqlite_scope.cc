#include "store/sqlite_scope.h"

#include <fmt/format.h>

namespace berth::store {

std::string ScopeSql(const model::TenantScope& scope, std::string_view column, int first,
                     bool keep_untenanted) {
  if (scope.all()) return "";
  std::string in = "FALSE";
  if (!scope.none()) {
    in = fmt::format("{} IN (", column);
    for (std::size_t i = 0; i < scope.tenants().size(); ++i) {
      in += fmt::format("{}?{}", i == 0 ? "" : ",", first + static_cast<int>(i));
    }
    in += ")";
  }
  if (keep_untenanted) return fmt::format(" AND ({} = '' OR {})", column, in);
  return fmt::format(" AND {}", in);
}

int BindScope(Statement& st, int first, const model::TenantScope& scope) {
  if (scope.all()) return first;
  for (const auto& t : scope.tenants()) st.Bind(first++, t);
  return first;
}

}  // namespace berth::store
