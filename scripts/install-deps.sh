#!/usr/bin/env bash
# Installs the Debian 12 packages Hearth builds and tests with (no other downloads).
set -euo pipefail
packages=(
  build-essential cmake pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libpcre2-dev
  libcpp-httplib-dev         # the server tests' HTTP client only (the server has its own layer)
  clang libclang-rt-14-dev   # libFuzzer + ASan/UBSan for the GGUF fuzz target
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
