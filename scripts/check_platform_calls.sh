#!/usr/bin/env bash
# Fails when an operating-system header or call shows up outside the platform layer (src/platform/<os>/), or a
# compiler's own construct (__builtin_*, __attribute__, __declspec) outside a block guarded for that compiler: the
# rest of the trainer is standard C++ plus its libraries, so it builds with GCC, Clang and MSVC alike (the MinGW
# lane is GCC, and cannot see MSVC-only breakage). Also fails when the child side of the launcher's fork makes a
# call that is not async-signal-safe.
#   scripts/check_platform_calls.sh
set -euo pipefail
cd "$(dirname "$0")/.."
headers='unistd|fcntl|fnmatch|glob|signal|poll|dlfcn|malloc|spawn|pthread|netdb|dirent|termios|pwd|grp|libgen|sys/[a-z_]+|arpa/[a-z_]+|netinet/[a-z_]+|windows|winsock2|ws2tcpip|io|direct|process|psapi|shellapi|shlobj|tlhelp32|winbase|winnt'
found=$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*<(${headers})\.h>" src include --include='*.cpp' --include='*.hpp' --include='*.h' \
          | grep -v '^src/platform/' || true)
# Linux-only files read by path.
found+=$(grep -rn '"/proc/' src include --include='*.cpp' --include='*.hpp' | grep -v '^src/platform/' || true)
if [[ -n "$found" ]]; then
  echo "operating-system headers or files outside src/platform/ (move the call into the platform layer):"
  echo "$found"
  exit 1
fi

# Compiler constructs: allowed inside #if/#ifdef blocks whose condition names a compiler (__GNUC__, __clang__,
# _MSC_VER) or a macro #defined inside such a block (resample.cpp's TRAINER_RESAMPLE_X86).
unguarded=$(find src include -path src/platform -prune -o -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) -print \
  | sort | xargs awk '
    FNR == 1 { depth = 0; delete guarded; delete guards; guards["__GNUC__"]; guards["__clang__"]; guards["_MSC_VER"] }
    function inside() { for (d = 1; d <= depth; d++) if (guarded[d]) return 1; return 0 }
    /^[[:space:]]*#[[:space:]]*if/ {
      depth++; guarded[depth] = 0
      for (g in guards) if (index($0, g)) guarded[depth] = 1
      next
    }
    /^[[:space:]]*#[[:space:]]*endif/ { depth--; next }
    /^[[:space:]]*#[[:space:]]*define[[:space:]]/ { if (inside()) guards[$2]; next }
    { code = $0; sub(/\/\/.*/, "", code) }  # comments may name them
    code ~ /__builtin_|__attribute__|__declspec/ { if (!inside()) print FILENAME ":" FNR ": " $0 }')
if [[ -n "$unguarded" ]]; then
  echo "compiler-specific constructs outside a compiler guard (use standard C++, util/checked_math.hpp, or guard it):"
  echo "$unguarded"
  exit 1
fi

# The launcher's child between fork and execve: only async-signal-safe calls (another thread may hold the
# allocator's lock at the fork, so an allocation there can hang the child forever).
child=$(awk '/if \(pid == 0\) \{/ { inside = 1; next } inside && /^  \}/ { inside = 0 } inside' \
          src/platform/linux/child_process.cpp)
[[ -n "$child" ]] || { echo "src/platform/linux/child_process.cpp: no 'if (pid == 0) {' block found"; exit 1; }
calls=$(sed 's#//.*##' <<<"$child" | grep -oE '(^|[^.>A-Za-z0-9_:])(::)?[A-Za-z_][A-Za-z0-9_:]*[[:space:]]*\(' \
          | sed -E 's/^[^A-Za-z_]*//; s/[[:space:](]//g; s/^:://' | sort -u \
          | grep -vxE 'setpgid|dup2|execve|write|_exit|static_cast|sizeof|for|if|while|switch|return' || true)
if [[ -n "$calls" ]]; then
  echo "src/platform/linux/child_process.cpp: the child calls $(echo $calls) after fork (only setpgid, dup2, execve,"
  echo "write and _exit: build everything it needs before the fork)"
  exit 1
fi
echo "check_platform_calls: no operating-system header or /proc path outside src/platform/, no unguarded compiler" \
     "construct, and the forked child makes only async-signal-safe calls"
