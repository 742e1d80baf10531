#!/usr/bin/env bash
# Tenancy is enforced in one place (docs/security.md "Where tenancy is
# enforced"): the route guard (src/api/api.cc Api::Route, with
# src/api/auth.cc) computes each request's tenant scope once and hands it
# to the handler, which passes it to the store reads that list tenant-owned
# rows; the store filters in its query, before LIMIT. A handler that asks
# Caller::CanRead itself is filtering a list on its own: it leaks whatever it
# forgets, and filtering after a LIMIT gives short or empty pages. So the
# handlers (src/api/api*.cc) may not call CanRead; per-object checks
# belong in the route's Rule (tenant_of + need), a tenant named in a request
# body in Authorizer::CheckNamed, and a list in the scope the handler gets.
#
#   scripts/check-tenancy.sh [SRC_DIR]   check SRC_DIR (default: src/ beside this script)
#   scripts/check-tenancy.sh --self-test  show that a handler's own filter is caught
set -euo pipefail

check() {
  local src=$1 hits
  # Comments may name it; code may not.
  hits=$(grep -HnE 'CanRead\(' "$src"/api/api*.cc 2>/dev/null | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
  if [[ -n $hits ]]; then
    while IFS= read -r h; do
      echo "$h: a handler narrows by tenant itself; take the request's model::TenantScope (Api::ScopedHandler) and pass it to the store read instead (scripts/check-tenancy.sh explains why)" >&2
    done <<<"$hits"
    return 1
  fi
}

if [[ ${1:-} == --self-test ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/api"
  printf 'void Api::ListThings(const Request& req, Response& res, const model::TenantScope& scope) {}\n// CanRead( in a comment is fine\n' > "$tmp/src/api/api_ok.cc"
  check "$tmp/src" || { echo "self-test: a scoped handler was refused" >&2; exit 1; }
  printf '  std::erase_if(rows, [&](const auto& r) { return !caller.CanRead(r.tenant); });\n' > "$tmp/src/api/api_bad.cc"
  out=$(check "$tmp/src" 2>&1) && { echo "self-test: a handler's own tenant filter passed" >&2; exit 1; }
  grep -q "api_bad.cc:1:.*a handler narrows by tenant itself" <<<"$out" || { echo "$out" >&2; exit 1; }
  echo "self-test: a handler's own tenant filter is refused"
  exit 0
fi

src=${1:-$(cd "$(dirname "$0")/.." && pwd)/src}
check "$src"
