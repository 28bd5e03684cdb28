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

declare -A rank
for i in "${!layers[@]}"; do rank[${layers[$i]}]=$i; done
# A file's module: src/main.cpp is main; data/<room>/ is its room; otherwise the folder under src/ or trainer/.
module_of() {
  local p=${1#src/}
  p=${p#include/trainer/}
  case $p in
    main.cpp) echo main ;;
    data/*/*) echo "${p%%/*}/$(echo "$p" | cut -d/ -f2)" ;;
    */*) echo "${p%%/*}" ;;
    *) echo "?" ;;
  esac
}

status=0
while IFS= read -r file; do
  from=$(module_of "$file")
  [[ -n ${rank[$from]+x} ]] || { echo "$file: module '$from' is not in check_layers.sh's order"; status=1; continue; }
  while IFS=: read -r line header; do
    to=$(module_of "include/trainer/$header")
    [[ -n ${rank[$to]+x} ]] || { echo "$file:$line: includes trainer/$header, of no module in the order"; status=1; continue; }
    if (( rank[$to] > rank[$from] )); then
      echo "$file:$line: $from includes trainer/$header, of $to, which sits above it"
      status=1
    fi
  done < <(grep -noE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"trainer/[^"]+"' "$file" \
             | sed -E 's/^([0-9]+):.*"trainer\/([^"]+)"/\1:\2/')
done < <(find src include/trainer -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) | sort)
if (( status == 0 )); then
  echo "check_layers: every include points down the stack (${layers[*]})"
else
  echo "check_layers: move the code, or pass what it needs in from above"
fi
exit $status
