#!/usr/bin/env bash
# The whole test suite: build, every CTest test (unit, golden, ...), the same tests again under
# AddressSanitizer/UBSan (bad input must never become a memory error), then the GGUF reader fuzz
# target for a short while. Golden tests skip cleanly without ../shared. SANITIZE=0 skips the
# sanitizer pass (it rebuilds everything and roughly doubles the time).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
if [ "${SANITIZE:-1}" = 1 ]; then
  BUILD_DIR=build-asan scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEARTH_SANITIZE=ON \
    -DHEARTH_BUILD_BENCH=OFF
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 900
fi
FUZZ_SECONDS=${FUZZ_SECONDS:-30} scripts/fuzz.sh
