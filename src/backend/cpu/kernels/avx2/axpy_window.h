// The walk over a sparse axpy's active rows shared by the AVX2 driver (axpy_avx2.cc) and the
// AVX-512 one-token K-quant kernels (avx512/axpy_kquant_avx512.cc): active rows (a nonzero
// coefficient for some token) are collected into a window of up to kAxpyWindow, topped up
// whenever fewer than two passes' worth remain, and handed out kAxpyRows at a time in ascending
// j, each pass with the rows of the next one to prefetch. Both drivers group rows into passes
// identically, so a kernel that sums per pass (the K-quants' min terms) gives the same bits in
// either. Include only from files compiled with AVX2 or more (see avx2_util.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cpu/kernels/generic/generic_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// Rows per pass: 4 weight streams, and for one token 4 broadcast coefficients, 4 accumulators
// and 4 decoded vectors of a quantized block in the 16 registers of AVX2.
inline constexpr int kAxpyRows = 4;
inline constexpr int kAxpyWindow = 64;

// Calls pass.template operator()<R>(rows, next, js) for consecutive runs of R <= kAxpyRows active
// rows: rows[r] is row idx[js[r]] of w (ldw bytes apart), next[r] a row of the following pass
// (the pass's own rows for the last one).
template <typename Pass>
void for_each_axpy_pass(const uint8_t* w, size_t ldw, const int32_t* idx, int64_t nr,
                        const float* a, size_t lda, int64_t nt, Pass&& pass) {
  static_assert(kAxpyRows == 4, "the switch below covers 1 to 4 rows");
  // Active rows [p, m) of the window. kAxpyRows spare entries repeat the last row, so a pass
  // before a short final one still reads kAxpyRows valid `next` pointers.
  const uint8_t* rows[kAxpyWindow + kAxpyRows];
  int64_t js[kAxpyWindow];
  int p = 0, m = 0;
  int64_t j = 0;
  const auto top_up = [&] {
    std::copy(rows + p, rows + m, rows);
    std::copy(js + p, js + m, js);
    m -= p;
    p = 0;
    for (; j < nr && m < kAxpyWindow; ++j) {
      if (!generic::axpy_row_active(a, lda, nt, j)) continue;
      rows[m] = w + static_cast<size_t>(idx[j]) * ldw;
      js[m++] = j;
    }
    for (int r = m; r < m + kAxpyRows && m > 0; ++r) rows[r] = rows[m - 1];
  };
  top_up();
  while (p < m) {
    if (m - p < 2 * kAxpyRows && j < nr) top_up();
    const uint8_t* const* cur = rows + p;
    const uint8_t* const* next = p + kAxpyRows < m ? cur + kAxpyRows : cur;
    const int count = std::min(kAxpyRows, m - p);
    switch (count) {
      case 4:
        pass.template operator()<4>(cur, next, js + p);
        break;
      case 3:
        pass.template operator()<3>(cur, next, js + p);
        break;
      case 2:
        pass.template operator()<2>(cur, next, js + p);
        break;
      default:
        pass.template operator()<1>(cur, next, js + p);
        break;
    }
    p += count;
  }
}

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
