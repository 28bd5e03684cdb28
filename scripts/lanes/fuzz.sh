#!/usr/bin/env bash
# The fuzz lane: every target in tests/fuzz/ (tests/fuzz/targets.hpp lists them) built as a libFuzzer program with
# Debian's clang under AddressSanitizer and UndefinedBehaviorSanitizer (our code instrumented; LibTorch, OpenCV and
# libjpeg-turbo linked as Debian ships them), into build/fuzz, then each run for SECONDS from its committed seeds
# (tests/fuzz/corpus/<target>/) plus what earlier runs found (build/fuzz/corpus/<target>/), with a dictionary where
# one helps (tests/fuzz/dict/<target>.dict). A crash, a UBSan report, an input taking over 10 s, or one taking
# over 2 GiB is a finding: its input lands in build/fuzz/findings/ and the lane fails.
# Prints one line per target: execs per second, total execs, corpus size, coverage (libFuzzer's cov: and ft:).
#   scripts/lanes/fuzz.sh                      build, then every target for 180 s
#   scripts/lanes/fuzz.sh 600 pickle pth       600 s each, these targets only
#   FUZZ_JOBS=2 scripts/lanes/fuzz.sh 600      two targets at a time (one core each)
# To keep a finding: fix it, copy its input to tests/fuzz/corpus/<target>/ (the replay in ctest reads it from then on).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-180}
shift || true
mapfile -t all < <(grep -oE '\{"[a-z_]+", fuzz_' tests/fuzz/targets.hpp | cut -d'"' -f2)
if [[ $# -gt 0 ]]; then targets=("$@"); else targets=("${all[@]}"); fi
jobs=${FUZZ_JOBS:-1}

if ! command -v clang++-14 >/dev/null || [[ ! -e /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a ]]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14 libclang-rt-14-dev >&2
fi
build=build/fuzz
start=$(date +%s)
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -gline-tables-only"
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DTRAINER_LIBFUZZER=ON -DTRAINER_BUILD_TESTS=ON >/dev/null
cmake --build $build --target "${targets[@]/#/fuzz_}"
echo "fuzz.sh: built in $(( $(date +%s) - start ))s"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=0}
# The targets that read from a path write each input to a scratch folder under TMPDIR: in memory, where there is
# a tmpfs, rather than on the disk.
[[ -z ${TMPDIR:-} && -d /dev/shm && -w /dev/shm ]] && export TMPDIR=/dev/shm
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p $build/findings $build/logs
run_one() {
  local t=$1 dict=()
  mkdir -p $build/corpus/$t
  [[ -f tests/fuzz/dict/$t.dict ]] && dict=(-dict=tests/fuzz/dict/$t.dict)
  if $build/fuzz_$t -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 "${dict[@]}" -artifact_prefix=$build/findings/$t- \
      $build/corpus/$t tests/fuzz/corpus/$t >$build/logs/$t.log 2>&1; then
    status=ok
  else
    status="FINDING (build/fuzz/logs/$t.log)"
  fi
  local log=$build/logs/$t.log
  local rate execs cov
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' || echo "?")
  printf '%-13s %8s exec/s %10s execs  %s  %s\n' "$t" "$rate" "$execs" "$cov" "$status"
  [[ $status == ok ]]
}
export -f run_one
export build seconds
failed=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' || failed=1
echo "fuzz.sh: ${#targets[@]} targets, ${seconds}s each, in $(( $(date +%s) - start ))s"
exit $failed
