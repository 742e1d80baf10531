#!/usr/bin/env bash
# clang-format (always) and clang-tidy (unless --format-only) over Berth's own
# sources. clang-tidy needs a configured build for compile_commands.json.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t files < <(git ls-files -co --exclude-standard -- 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'bench/*.h')
clang-format --dry-run --Werror "${files[@]}"
echo "clang-format: ${#files[@]} files clean"

if [ "${1:-}" = "--format-only" ]; then exit 0; fi
build="${BERTH_TIDY_BUILD:-build/dev}"
[ -f "${build}/compile_commands.json" ] || cmake --preset dev >/dev/null
mapfile -t sources < <(printf '%s\n' "${files[@]}" | grep -E '^src/.*\.cc$')
run-clang-tidy -quiet -p "${build}" "${sources[@]}" 2>/dev/null || clang-tidy -p "${build}" --quiet "${sources[@]}"
