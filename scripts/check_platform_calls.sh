#!/usr/bin/env bash
# Fails when an operating-system header or call shows up outside the platform layer (src/platform/<os>/):
# the rest of the trainer is standard C++ plus its libraries, so it builds for Linux and Windows alike.
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
echo "check_platform_calls: no operating-system header or /proc path outside src/platform/"
