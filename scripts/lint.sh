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
# clang-tidy 16 parses GCC 12's libstdc++ in C++23 mode only when told that
# its concepts are complete enough for <expected>.
tidy_args=(--quiet -p "${build}" --extra-arg=-std=c++2b
           --extra-arg=-U__cpp_concepts --extra-arg=-D__cpp_concepts=202002L)
printf '%s\n' "${sources[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy-16 "${tidy_args[@]}"
echo "clang-tidy: ${#sources[@]} files clean"
