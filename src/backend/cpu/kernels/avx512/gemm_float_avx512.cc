// F32 activations against F32, F16 and BF16 weight rows: the float tiles (float_tiles.h) on
// 16-lane AVX-512 vectors. The 32 zmm registers hold much larger tiles than AVX2's 16 ymm, which
// is what few-token decode needs: with F16 every weight vector costs a conversion on the FMA
// ports, so the fraction of those ports left to FMAs grows with the tokens a weight vector
// meets.
#include "backend/cpu/kernels/avx512/avx512_kernels.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"
#include "backend/cpu/kernels/float_tiles.h"
#include "backend/cpu/kernels/span_tiles.h"
#include "backend/cpu/kernels/tile_set.h"

namespace hearth::cpu::avx512 {
namespace {

// Tile shapes. One token streams weights from DRAM as kFloatStreams streams where rows run
// consecutively, scattered gathered rows 8 at a time (tiles::float_matvec). A few tokens take 4 x 4
// tiles in column spans: each tile of T tokens costs R weight conversions per R x T FMAs, so larger
// T should win, but 3 x 8 is slower there: 8 activation rows 8 KiB apart plus the weight rows share
// one L1 set per column, more than a 12-way L1 holds. Many tokens (prompts) take 6 x 4 over whole
// rows: 24 accumulators, 6 weight vectors and an activation vector fill the 32 registers, and each
// column meets 4 activation rows where 3 x 8 meets 8, which measured faster (4 x 6 and 5 x 5 as
// fast; docs/benchmarks.md). Token blocks come in multiples of 4, so 4 tokens leave no edge tiles.
template <typename L>
void gemm_float(int64_t n, const tiles::RowList& rows, int64_t nr, const void* x, size_t ldx,
                int64_t nt, float* y, size_t ldy) {
  using Tiles = tiles::FloatTiles<Zmm<L>>;
  using Spans = tiles::SpanTileSet<Tiles, 4, 4>;
  if (nt == 1) {
    tiles::float_matvec<Tiles, 8, tiles::kFloatStreams>(n, rows, nr, x, y);
  } else if (nt <= Spans::kMaxTokens) {
    Spans::gemm(n, rows, nr, x, ldx, nt, y, ldy);
  } else {
    tiles::TileSet<Tiles, 6, 4>::gemm(n, rows, nr, x, ldx, nt, y, ldy);
  }
}

}  // namespace

void set_float_kernels(Kernels& k) {
  tiles::set_tile_kernels<tiles::FloatTiles<Zmm<LoadF32>>, gemm_float<LoadF32>>(k.f32);
  tiles::set_tile_kernels<tiles::FloatTiles<Zmm<LoadF16>>, gemm_float<LoadF16>>(k.f16);
  tiles::set_tile_kernels<tiles::FloatTiles<Zmm<LoadBf16>>, gemm_float<LoadBf16>>(k.bf16);
  for (WeightKernels* f : {&k.f32, &k.f16, &k.bf16}) {
    f->dot_lanes = Zmm<LoadF32>::kLanes;
    f->gemv_streams = tiles::kFloatStreams;
  }
}

}  // namespace hearth::cpu::avx512
