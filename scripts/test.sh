#!/usr/bin/env bash
# The whole test suite: build, every CTest test (unit, golden, ...), the CUDA build and its gpu
# tests when nvcc is installed, the same tests again under AddressSanitizer/UBSan (bad input must
# never become a memory error), then the GGUF reader fuzz target for a short while. Golden tests
# skip cleanly without ../shared. SANITIZE=0 skips the sanitizer pass (it rebuilds everything and
# roughly doubles the time).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
# The CUDA backend, wherever the toolkit is installed (CI has nvcc but no GPU: the gpu tests
# compile and skip). HEARTH_CUDA_ARCHS is the architecture list compiled here: 80 by default, one
# architecture (whose PTX runs on every newer GPU) so the suite stays fast; CMake's own default
# for builds by hand is 80;89;90 (docs/cuda.md). The step builds a second tree (about 6 minutes
# on 2 cores); CUDA=0 skips it.
nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
if [ "${CUDA:-1}" = 1 ] && [ -n "$nvcc" ]; then
  cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DHEARTH_CUDA=ON -DHEARTH_BUILD_BENCH=OFF \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${HEARTH_CUDA_ARCHS:-80}" >/dev/null
  cmake --build build-cuda -j"$(nproc)" --target hearth_lib hearth test_gpu
  ctest --test-dir build-cuda -L gpu --output-on-failure --timeout 900
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  BUILD_DIR=build-asan scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEARTH_SANITIZE=ON \
    -DHEARTH_BUILD_BENCH=OFF
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 900
fi
FUZZ_SECONDS=${FUZZ_SECONDS:-30} scripts/fuzz.sh
