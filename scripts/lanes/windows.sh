#!/usr/bin/env bash
# The Windows lane, on this Debian 12 machine (no Windows here): what can be checked of the Windows build.
#   1. The platform layer and its tests (tests/platform), cross-compiled with MinGW-w64 into one .exe and run
#      under Wine, in a pseudo-terminal: Wine gives a program a console (which Ctrl-C needs) only on a terminal.
#   2. Every source file of the trainer compiled for Windows with MinGW-w64 (-fsyntax-only) against this machine's
#      LibTorch, OpenCV, spdlog, CLI11 and JSON headers, with the flags and definitions of the Linux build.
#      LibTorch's headers need two shims under MinGW, Gloo's a third (scripts/lanes/windows-shims/).
# Needs root once, to install g++-mingw-w64-x86-64-posix and wine64; Wine's prefix is cached in
# $TRAINER_LANE_CACHE/wine.
#   sudo scripts/lanes/windows.sh                 both parts
#   scripts/lanes/windows.sh tests [gtest flags]  the platform tests
#   scripts/lanes/windows.sh compile [PATH ...]   the syntax check, of the sources whose path contains a PATH
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$repo"
part=${1:-all}
start=$(date +%s)
jobs=$(nproc)

if ! command -v x86_64-w64-mingw32-g++-posix >/dev/null || ! command -v wine >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++-mingw-w64-x86-64-posix wine64 >&2
fi

if [[ $part == all || $part == tests ]]; then
  build=build/lane-windows-tests
  cmake -S tests/platform -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$repo/cmake/mingw-w64.cmake" >/dev/null
  cmake --build $build -j "$jobs" >/dev/null
  lane_log "platform tests built for Windows in $(( $(date +%s) - start ))s: $build/trainer_platform_tests.exe"
  export WINEPREFIX=${WINEPREFIX:-$lane_cache/wine} WINEDEBUG=-all
  mkdir -p "$WINEPREFIX"
  [[ -f $WINEPREFIX/system.reg ]] || wine wineboot --init >/dev/null 2>&1
  report=$build/report.xml
  rm -f "$report"
  # GoogleTest's XML report is the result: the pseudo-terminal's copy of the output is full of console escapes.
  set +e
  timeout 600 script -qec "wine $build/trainer_platform_tests.exe --gtest_color=no --gtest_output=xml:$report ${*:2}" \
    /dev/null >"$build/output.txt" 2>&1
  code=$?
  set -e
  wineserver -k 2>/dev/null || true
  python3 - "$report" "$code" <<'PY'
import sys, xml.etree.ElementTree as ET
report, code = sys.argv[1], int(sys.argv[2])
try:
    root = ET.parse(report).getroot()
except Exception as e:
    sys.exit(f"windows.sh: no test report from Wine (exit {code}): {e}")
failed = []
for case in root.iter("testcase"):
    name = f"{case.get('classname')}.{case.get('name')}"
    failures = case.findall("failure")
    status = "FAILED" if failures else ("skipped" if case.get("result") == "skipped" else "ok")
    print(f"  {status:7} {name} ({float(case.get('time', 0)) * 1000:.0f} ms)")
    for f in failures:
        failed.append(name)
        print("          " + (f.get("message") or "").replace("\n", "\n          "))
print(f"windows.sh: {root.get('tests')} platform tests under Wine, {len(set(failed))} failed (exit {code})")
sys.exit(1 if failed or code != 0 else 0)
PY
  lane_log "platform tests passed under Wine in $(( $(date +%s) - start ))s"
fi

if [[ $part == all || $part == compile ]]; then
  # The Linux build's own compile commands (no unity batches), so every file is checked with its real flags.
  config=build/lane-windows-config
  cmake -S . -B $config -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINER_UNITY_BUILD=OFF >/dev/null
  # Only the libraries' headers, not /usr/include itself, whose glibc headers would shadow MinGW's.
  headers=$repo/build/lane-windows-headers
  rm -rf $headers && mkdir -p $headers
  for h in torch ATen c10 caffe2 spdlog fmt CLI nlohmann gloo onnx google gflags glog zlib.h zconf.h; do
    if [[ -e /usr/include/$h ]]; then ln -s /usr/include/$h $headers/$h; fi
  done
  ln -s /usr/include/opencv4/opencv2 $headers/opencv2
  # libcurl's headers are the same on every system (curl/system.h picks the Windows types under MinGW).
  ln -s /usr/include/x86_64-linux-gnu/curl $headers/curl
  # libjpeg-turbo's (jconfig.h is this machine's build of it, close to the Windows one: 8-bit samples, extensions).
  for h in jpeglib.h jmorecfg.h jerror.h x86_64-linux-gnu/jconfig.h; do ln -s /usr/include/$h $headers/$(basename $h); done
  # The second shim (scripts/lanes/windows-shims/mingw_libtorch.h says why), found before the original.
  patched=$repo/build/lane-windows-patched/torch/csrc/jit/ir
  mkdir -p $patched
  sed -E 's/TORCH_API (std::shared_ptr<Wrap<[A-Za-z]+>> wrap\(\) \{)/\1/' /usr/include/torch/csrc/jit/ir/ir.h >$patched/ir.h
  python3 - "$config/compile_commands.json" "$repo" "$headers" "$jobs" "${@:2}" <<'PY'
import json, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
commands, repo, headers, jobs, only = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
shims = f"{repo}/scripts/lanes/windows-shims"
entries = [e for e in json.load(open(commands)) if e["file"].startswith(f"{repo}/src/")]
# The platform layer's Windows half stands in for its POSIX half, with the same flags.
for e in entries:
    e["file"] = e["file"].replace("/src/platform/linux/", "/src/platform/windows/")
    e["command"] = e["command"].replace("/src/platform/linux/", "/src/platform/windows/")
if only:
    entries = [e for e in entries if any(o in e["file"] for o in only)]
def windows_command(entry):
    args = shlex.split(entry["command"])
    out = ["x86_64-w64-mingw32-g++-posix", "-fsyntax-only", "-std=gnu++17", "-include", f"{shims}/mingw_libtorch.h",
           f"-I{shims}", f"-I{repo}/build/lane-windows-patched", f"-I{headers}",
           f"-I{headers}/torch/csrc/api/include", "-DUNICODE", "-D_UNICODE", "-DWIN32_LEAN_AND_MEAN", "-DNOMINMAX", "-Wno-attributes"]
    i = 1
    while i < len(args):
        a = args[i]
        if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
            i += 2 if a != "-c" else 1
            continue
        if a.startswith("-D"):
            out.append(a)
        elif a in ("-isystem", "-I", "-include"):
            value = args[i + 1]
            if a == "-include" or value.startswith(repo):
                out += [a, value]
            i += 2
            continue
        elif a.startswith("-I") and a[2:].startswith(repo):
            out.append(a)
        elif a.startswith("-W") and a != "-Winvalid-pch":
            out.append(a)
        i += 1
    out.append(entry["file"])
    return out
def check(entry):
    r = subprocess.run(windows_command(entry), cwd=entry["directory"], capture_output=True, text=True)
    return entry["file"][len(repo) + 1:], r.returncode, r.stderr
failed = 0
with ThreadPoolExecutor(jobs) as pool:
    for name, code, err in pool.map(check, entries):
        if code:
            failed += 1
            errors = [l for l in err.splitlines() if ": error:" in l or "fatal error" in l]
            print(f"FAILED {name}\n  " + "\n  ".join(errors[:8] or err.splitlines()[:12]))
print(f"windows.sh: {len(entries) - failed} of {len(entries)} trainer sources compile for Windows")
sys.exit(1 if failed else 0)
PY
  lane_log "every source compiles for Windows; $(( $(date +%s) - start ))s"
  # MSVC's dialect, for the code written for it: the resampler's SIMD kernels and their __cpuid/_xgetbv CPU check
  # (MinGW takes the GCC branch), by Clang in clang-cl mode. Its intrinsic headers want a few C declarations that
  # MSVC's own headers would give: stand-ins here.
  msvc=$repo/build/lane-windows-msvc-shim
  mkdir -p $msvc
  printf '#pragma once\ntypedef unsigned long long size_t;\nvoid* malloc(size_t);\nvoid free(void*);\nvoid* _aligned_malloc(size_t, size_t);\nvoid _aligned_free(void*);\n' >$msvc/stdlib.h
  cp $msvc/stdlib.h $msvc/malloc.h
  printf '#pragma once\ntypedef int jmp_buf[16];\n' >$msvc/setjmp.h
  printf '#pragma once\ntypedef unsigned long long size_t;\nvoid* memcpy(void*, const void*, size_t);\n' >$msvc/string.h
  for f in src/data/pixels/resample_x86.cpp; do
    clang-14 --target=x86_64-pc-windows-msvc -fms-compatibility -fms-extensions -ffreestanding -fsyntax-only \
      -msse4.1 -mavx2 -mxsave -isystem $msvc -Iinclude -x c++ $f
  done
  lane_log "the MSVC-only code compiles in MSVC's dialect (clang-cl mode)"
fi
