#!/usr/bin/env bash
# The whole test suite: build, every CTest test (unit, golden, server, gpu, ...), the same tests
# but the golden ones again under AddressSanitizer/UBSan (bad input must never become a memory
# error), then the GGUF reader fuzz target for a short while. Golden tests skip cleanly without ../shared, gpu tests
# without a GPU. Wherever the CUDA toolkit is installed the CUDA backend is built into the same
# tree (CI has nvcc but no GPU: it compiles, and the gpu tests skip), for one architecture,
# HEARTH_CUDA_ARCHS (default 80, whose PTX runs on every newer GPU), so the suite stays fast;
# CMake's own default for builds by hand is 80;89;90 (docs/cuda.md). CUDA=0 builds without it;
# SANITIZE=0 skips the sanitizer pass (it rebuilds everything and roughly doubles the time).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cuda_flags=()
nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
if [ "${CUDA:-1}" = 1 ] && [ -n "$nvcc" ]; then
  cuda_flags=(-DHEARTH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc"
              -DCMAKE_CUDA_ARCHITECTURES="${HEARTH_CUDA_ARCHS:-80}")
else
  cuda_flags=(-DHEARTH_CUDA=OFF)
fi
scripts/build.sh "${cuda_flags[@]}"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
# The sanitizer pass runs every test but the golden and slow ones (real models, or long
# training and calibration runs, through code that quicker unit tests cover, and minutes each
# under ASan), built with -O1 and line tables only (-g1), which
# compiles faster than -O2 -g and still gives file:line in every report. (Every test binary is
# built: a missing one would show up in CTest as a failing *_NOT_BUILT test.)
if [ "${SANITIZE:-1}" = 1 ]; then
  BUILD_DIR=build-asan scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DHEARTH_SANITIZE=ON -DHEARTH_BUILD_BENCH=OFF
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 900 -LE 'golden|slow'
fi
FUZZ_SECONDS=${FUZZ_SECONDS:-30} scripts/fuzz.sh
