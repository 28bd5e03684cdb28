#!/usr/bin/env bash
# Fails on an empty source file in the tree: a leftover of a move or a split compiles to nothing and says
# nothing, so it is removed (git rm) rather than kept.
#   scripts/check_empty_sources.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files -- '*.cpp' '*.hpp' '*.h' '*.cmake' '*.sh' '*.py' '*CMakeLists.txt')
else
  files=$(find src include tests scripts cmake -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \
            -o -name '*.cmake' -o -name '*.sh' -o -name '*.py' -o -name CMakeLists.txt \))
fi
empty=""
for f in $files; do
  [[ -f $f && ! -s $f ]] && empty+="$f"$'\n'
done
if [[ -n $empty ]]; then
  echo "empty source files (git rm them):"
  printf '%s' "$empty"
  exit 1
fi
echo "check_empty_sources: $(wc -w <<<"$files") source files, none empty"
