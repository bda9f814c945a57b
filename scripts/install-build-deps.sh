#!/usr/bin/env bash
# Installs the system packages needed to build cairn-local (llama.cpp through llama-cpp-2):
# cmake, clang and libclang-dev (bindgen). Does nothing when they are already present.
# Needs root (or sudo) and Debian/Ubuntu's apt-get.
set -euo pipefail

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v clang >/dev/null 2>&1 || need+=(clang)
# bindgen loads libclang.so at build time.
if ! compgen -G '/usr/lib/llvm-*/lib/libclang.so' >/dev/null \
  && ! compgen -G '/usr/lib/*/libclang.so' >/dev/null; then
  need+=(libclang-dev)
fi
command -v c++ >/dev/null 2>&1 || need+=(build-essential)

if [ ${#need[@]} -eq 0 ]; then
  echo "install-build-deps: cmake, clang and libclang are present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-build-deps: need root to install: ${need[*]}" >&2
    exit 1
  fi
fi

echo "install-build-deps: installing ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
