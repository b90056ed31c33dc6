// F32 activations against F32, F16 and BF16 weight rows: the float tiles (float_tiles.h) on
// 8-lane AVX2 vectors.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/span_tiles.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/float_loads.h"

// After it, so the tile templates are AVX2 code even where the build's flags are missing.
#include "backend/cpu/kernels/float_tiles.h"

namespace hearth::cpu::avx2 {
namespace {

// 3 x 4 keeps 12 accumulators, 3 weight vectors and 1 activation vector in the 16 registers.
// matvec streams weights from DRAM as kFloatStreams streams, gathered rows 8 at a time
// (tiles::float_matvec). A few tokens (batched decode) take the same tiles in column spans
// (span_tiles.h).
template <typename L>
void gemm_float(int64_t n, const RowList& rows, int64_t nr, const void* x, size_t ldx, int64_t nt,
                float* y, size_t ldy) {
  using Tiles = tiles::FloatTiles<Ymm<L>>;
  using Spans = tiles::SpanTileSet<Tiles, 3, 4>;
  if (nt == 1) {
    tiles::float_matvec<Tiles, 8, tiles::kFloatStreams>(n, rows, nr, x, y);
  } else if (nt <= Spans::kMaxTokens) {
    Spans::gemm(n, rows, nr, x, ldx, nt, y, ldy);
  } else {
    TileSet<Tiles, 3, 4>::gemm(n, rows, nr, x, ldx, nt, y, ldy);
  }
}

}  // namespace

void set_float_kernels(Kernels& k) {
  set_tile_kernels<tiles::FloatTiles<Ymm<LoadF32>>, gemm_float<LoadF32>>(k.f32);
  set_tile_kernels<tiles::FloatTiles<Ymm<LoadF16>>, gemm_float<LoadF16>>(k.f16);
  set_tile_kernels<tiles::FloatTiles<Ymm<LoadBf16>>, gemm_float<LoadBf16>>(k.bf16);
  for (WeightKernels* f : {&k.f32, &k.f16, &k.bf16}) {
    f->dot_lanes = Ymm<LoadF32>::kLanes;
    f->gemv_streams = tiles::kFloatStreams;
  }
}

}  // namespace hearth::cpu::avx2
