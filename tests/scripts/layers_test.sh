#!/usr/bin/env bash
# scripts/check_layers.sh against itself: the tree passes, and a copy of it with one include pointing up the stack
# (config, the ground floor, including an engine header) fails, naming the file, the line and both modules.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/scripts/check_layers.sh" >/dev/null || { echo "the tree itself fails the layer check"; exit 1; }
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$root/src" "$root/include" "$copy/"
sed -i '1a #include "trainer/engine/fit.hpp"' "$copy/src/config/load.cpp"
if out=$("$root/scripts/check_layers.sh" "$copy"); then
  echo "a back edge (config including engine/fit.hpp) passed the layer check"
  exit 1
fi
grep -q '^src/config/load.cpp:2: config includes trainer/engine/fit.hpp, of engine, which sits above it$' <<<"$out" \
  || { echo "the failure does not name the back edge:"; echo "$out"; exit 1; }
# A room of data/ counts on its own: pixels may not include a source.
cp "$root/src/data/pixels/resample.cpp" "$copy/src/data/pixels/resample.cpp"
sed -i '1a #include "trainer/data/sources/image_source.hpp"' "$copy/src/data/pixels/resample.cpp"
out=$("$root/scripts/check_layers.sh" "$copy" || true)
grep -q '^src/data/pixels/resample.cpp:2: data/pixels includes trainer/data/sources/image_source.hpp' <<<"$out" \
  || { echo "a back edge between data's rooms was not found:"; echo "$out"; exit 1; }
echo "layers_test: the tree passes; back edges between modules and between data's rooms fail"
