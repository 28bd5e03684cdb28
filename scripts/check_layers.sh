#!/usr/bin/env bash
# Fails when a source includes a header of a module above its own: the modules form one stack, each built on the
# ones below it, so any of them compiles, links and is understood without those above. The order, written once
# (lowest first; data/ counts room by room):
layers=(platform util config data/pixels data/sources data/loader data/device models optim io plot distributed
        deploy engine cli main)
#   scripts/check_layers.sh            checks src/ and include/trainer/
#   scripts/check_layers.sh ROOT       checks another tree (its test adds a back edge to a copy)
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

# Every include of a trainer header, as FILE:LINE:HEADER, judged in one pass.
find src include/trainer -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) | sort \
  | xargs grep -HnoE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"trainer/[^"]+"' \
  | sed -E 's/^([^:]+):([0-9]+):.*"trainer\/([^"]+)"/\1:\2:\3/' \
  | awk -F: -v order="${layers[*]}" '
      # The module of a path: src/main.cpp is main; data/<room>/ is its room; else the folder under src/ or trainer/.
      function module_of(path,   p, parts, n) {
        p = path; sub(/^src\//, "", p); sub(/^include\/trainer\//, "", p)
        if (p == "main.cpp") return "main"
        n = split(p, parts, "/")
        if (n < 2) return "?"
        if (parts[1] == "data" && n >= 3) return "data/" parts[2]
        return parts[1]
      }
      BEGIN { n = split(order, names, " "); for (i = 1; i <= n; i++) rank[names[i]] = i }
      {
        from = module_of($1); to = module_of("include/trainer/" $3)
        if (!(from in rank)) { print $1 ": module \047" from "\047 is not in check_layers.sh\047s order"; bad = 1; next }
        if (!(to in rank)) { print $1 ":" $2 ": includes trainer/" $3 ", of no module in the order"; bad = 1; next }
        if (rank[to] > rank[from]) {
          print $1 ":" $2 ": " from " includes trainer/" $3 ", of " to ", which sits above it"; bad = 1
        }
      }
      END { exit bad }' && status=0 || status=1
if (( status == 0 )); then
  echo "check_layers: every include points down the stack (${layers[*]})"
else
  echo "check_layers: move the code, or pass what it needs in from above"
fi
exit $status
