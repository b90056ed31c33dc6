#!/usr/bin/env bash
# The whole test suite: build, every CTest test (unit, golden, ...), then the GGUF reader fuzz
# target for a short while under ASan/UBSan. Golden tests skip cleanly without ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
FUZZ_SECONDS=${FUZZ_SECONDS:-30} scripts/fuzz.sh
