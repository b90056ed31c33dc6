// sparse_axpy_each: many tokens' one-token axpys, each token's bits those of sparse_axpy over its
// own list alone. Two ways, the same bits:
// - Token by token (any list): each token's chunks as the one-token path cuts them, chunk by
//   chunk over a thread's tokens so a chunk's rows stay in cache from token to token.
// - As one product (lists that axpy_chunks cuts by row: float rows, lists over at least half
//   of W): a float row's terms are plain FMAs in ascending j and a zero coefficient adds an exact
//   zero, so a chunk summed with every row of its range, zero coefficients where the token has
//   none, is the token's own chunk, bit for bit. Every such token's chunks are unions of the same
//   kMaxChunks row ranges, so each range is one several-token axpy over a dense coefficient
//   matrix, whose kernel keeps a column block of a dozen tokens' sums in registers (a matrix
//   product). Threads split the columns, so W is read once per call, and each range's slice of
//   a panel of columns is converted once into a packed F32 buffer that every token block then
//   reads from cache. It does every term the dense product of the row-major matrix does (zero
//   coefficients included), so at best it matches that product's speed.
#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "ops/sparse_axpy_chunks.h"
#include "ops/sparse_matmul.h"

namespace hearth {
namespace {

using axpy_detail::axpy_chunks;
using axpy_detail::axpy_into_parts;
using axpy_detail::check_args;
using axpy_detail::grid_row;
using axpy_detail::kMaxChunks;

// Tokens per kernel call (the kernels hold up to 12 in registers), and output columns per pass
// over the row ranges (so a range's slice of W, re-read by each token block, stays in cache).
constexpr int64_t kBlockTokens = 12;
constexpr int64_t kPanelCols = 512;

// One token's list, chunks and output row.
struct TokenList {
  const int32_t* idx;
  const float* a;
  int64_t count;
  const int64_t* bounds;  // [chunks + 1], positions in the list
  int64_t chunks;
  float* y;  // [cols]
};

size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Tokens tokens[0, nt) one at a time, chunk by chunk over all of them: the tokens' chunks of one
// index cover much the same rows, which then stay in cache from token to token. Each token's
// partials are added in chunk order, as sparse_axpy adds them. part: [cols] of scratch.
void each_token(const cpu::WeightKernels& k, const uint8_t* wb, size_t ldw, int64_t cols,
                const TokenList* const* tokens, int64_t nt, float* part) {
  int64_t most = 1;
  for (int64_t t = 0; t < nt; ++t) most = std::max(most, tokens[t]->chunks);
  for (int64_t c = 0; c < most; ++c) {
    for (int64_t t = 0; t < nt; ++t) {
      const TokenList& l = *tokens[t];
      if (l.chunks == 1) {
        // Unchunked, as sparse_axpy's column split sums each column: in one pass over the list.
        if (c > 0) continue;
        std::memset(l.y, 0, static_cast<size_t>(cols) * sizeof(float));
        k.axpy(cols, wb, ldw, l.idx, l.count, l.a, static_cast<size_t>(l.count), 1, l.y,
               static_cast<size_t>(cols));
        continue;
      }
      if (c >= l.chunks) continue;
      axpy_into_parts(k, wb, ldw, cols, l.idx, l.count, l.a, l.bounds, c, c + 1,
                      c == 0 ? l.y : part);
      if (c > 0) {
        for (int64_t i = 0; i < cols; ++i) l.y[i] += part[i];
      }
    }
  }
}

// Floats per row of a packed slice of W: a panel and one more cache line, so that the rows of a
// slice do not all fall in the same L1 sets.
constexpr int64_t kPackStride = kPanelCols + 16;

// The most rows of one of the kMaxChunks row ranges of W.
int64_t max_range_rows(int64_t rows) { return rows / kMaxChunks + 1; }

// What the product of the row-cut tokens works in: x is shared, the rest is one thread's.
struct ProductScratch {
  const float* x;  // [nt, rows]: each token's coefficients by row, zero off its list
  float* parts;    // [nt, kPanelCols]: each token's current chunk, a panel of columns
  float* sums;     // [nt, kPanelCols]: each token's chunks before it, added
  float* pack;     // [max_range_rows, kPackStride]: a range's rows of the panel, as F32
};

// x[i * rows + j] = token i's coefficient of row j (zero where it has none).
void scatter_coefficients(const TokenList* const* tokens, int64_t nt, int64_t rows, float* x) {
  std::fill(x, x + nt * rows, 0.0f);
  for (int64_t i = 0; i < nt; ++i) {
    const TokenList& l = *tokens[i];
    for (int64_t q = 0; q < l.count; ++q) x[i * rows + l.idx[q]] = l.a[q];
  }
}

// Asks for the rows [r0, r1) of part `part` of `parts` of rows [q0, q1) of W, columns [c0, c1).
void prefetch_slice(const uint8_t* wb, size_t ldw, DType wtype, int64_t q0, int64_t q1, int64_t c0,
                    int64_t c1, int64_t part, int64_t parts) {
  const auto first = static_cast<size_t>(row_bytes(wtype, c0));
  const auto last = static_cast<size_t>(row_bytes(wtype, c1));
  const int64_t r0 = q0 + (q1 - q0) * part / parts, r1 = q0 + (q1 - q0) * (part + 1) / parts;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* const row = wb + static_cast<size_t>(r) * ldw;
    for (size_t b = first; b < last; b += 64) __builtin_prefetch(row + b, 0, 2);  // to L2
  }
}

// Columns [c_begin, c_end) of the outputs of row-cut tokens[0, nt): chunk by chunk (row
// ranges), a panel of columns at a time, every block of kBlockTokens tokens one axpy over each
// range's rows. Each range's slice of the panel is first converted to F32 (exactly) into a
// packed buffer, so that the token blocks read it converted, from consecutive cache lines, and
// add it with the F32 kernel (k32), whose FMAs are those of W's own type; meanwhile the next
// range's slice is fetched. iota: 0, 1, ...
void each_by_product(const cpu::WeightKernels& k, const cpu::WeightKernels& k32, DType wtype,
                     const uint8_t* wb, size_t ldw, int64_t rows, int64_t c_begin, int64_t c_end,
                     const TokenList* const* tokens, int64_t nt, const int32_t* iota,
                     const ProductScratch& s) {
  // sum = the first chunk's sum, then += each later one's, as sparse_axpy adds its partials
  // (in a panel-sized buffer that stays in cache, not in y).
  const auto fold = [&](int64_t i, bool first, int64_t w) {
    const float* const part = s.parts + i * kPanelCols;
    float* const sum = s.sums + i * kPanelCols;
    if (first) {
      std::copy(part, part + w, sum);
    } else {
      for (int64_t c = 0; c < w; ++c) sum[c] += part[c];
    }
  };
  const int64_t blocks = (nt + kBlockTokens - 1) / kBlockTokens;
  for (int64_t c0 = c_begin; c0 < c_end; c0 += kPanelCols) {
    const int64_t c1 = std::min(c_end, c0 + kPanelCols);
    std::fill(s.parts, s.parts + nt * kPanelCols, 0.0f);
    for (int64_t g = 0; g < kMaxChunks; ++g) {
      // Tokens whose next chunk starts with range g: the chunk before it is complete.
      for (int64_t i = 0; i < nt && g > 0; ++i) {
        const int64_t per_chunk = kMaxChunks / tokens[i]->chunks;
        if (g % per_chunk != 0) continue;
        fold(i, g == per_chunk, c1 - c0);
        std::fill(s.parts + i * kPanelCols, s.parts + (i + 1) * kPanelCols, 0.0f);
      }
      const int64_t r0 = grid_row(g, rows), r1 = grid_row(g + 1, rows);
      if (r1 == r0) continue;
      for (int64_t r = r0; r < r1; ++r) {
        k.to_float(wb + static_cast<size_t>(r) * ldw + row_bytes(wtype, c0),
                   s.pack + (r - r0) * kPackStride, c1 - c0);
      }
      // The next range of this panel, or the first of the next panel.
      const bool last = g + 1 == kMaxChunks;
      const int64_t n0 = last ? 0 : r1, n1 = last ? grid_row(1, rows) : grid_row(g + 2, rows);
      const int64_t p0 = last ? c1 : c0, p1 = last ? std::min(c_end, c1 + kPanelCols) : c1;
      for (int64_t b = 0; b < blocks; ++b) {
        if (p1 > p0) prefetch_slice(wb, ldw, wtype, n0, n1, p0, p1, b, blocks);
        const int64_t t0 = b * kBlockTokens;
        k32.axpy(c1 - c0, s.pack, kPackStride * sizeof(float), iota, r1 - r0, s.x + t0 * rows + r0,
                 static_cast<size_t>(rows), std::min(kBlockTokens, nt - t0),
                 s.parts + t0 * kPanelCols, static_cast<size_t>(kPanelCols));
      }
    }
    for (int64_t i = 0; i < nt; ++i) {
      fold(i, tokens[i]->chunks == 1, c1 - c0);
      std::copy(s.sums + i * kPanelCols, s.sums + i * kPanelCols + (c1 - c0), tokens[i]->y + c0);
    }
  }
}

}  // namespace

void sparse_axpy_each(cpu::CpuContext& ctx, DType wtype, const void* w_t, int64_t rows,
                      int64_t cols, const int32_t* idx, const float* a, int64_t ld,
                      const int64_t* counts, int64_t n, float* y) {
  if (n == 1) return sparse_axpy(ctx, wtype, w_t, rows, cols, idx, counts[0], a, 1, y);
  for (int64_t t = 0; t < n; ++t) {
    if (counts[t] > ld) fail("sparse_axpy_each: ", counts[t], " rows in a list of ", ld);
    check_args("sparse_axpy_each", wtype, rows, cols, idx + t * ld, counts[t], 1);
  }
  if (cols == 0 || n == 0) return;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype);
  const auto ldw = static_cast<size_t>(row_bytes(wtype, cols));
  const auto* wb = static_cast<const uint8_t*>(w_t);
  // Scratch: the tokens' lists [n], their chunk bounds [n, kMaxChunks + 1], the row-cut tokens
  // [n] and the others [n], the row-cut ones' coefficients by row [n, rows], 0, 1, ...,
  // rows - 1, then per thread a partial sum [cols], the product's partial sums [n, kPanelCols]
  // and its packed slice.
  const int nth = ctx.n_threads();
  const size_t list_bytes = round64(static_cast<size_t>(n) * sizeof(TokenList));
  const size_t bound_bytes = round64(static_cast<size_t>(n * (kMaxChunks + 1)) * sizeof(int64_t));
  const size_t order_bytes = round64(static_cast<size_t>(n) * sizeof(TokenList*));
  const size_t x_bytes = round64(static_cast<size_t>(n * rows) * sizeof(float));
  const size_t iota_bytes = round64(static_cast<size_t>(rows) * sizeof(int32_t));
  const size_t part_bytes = round64(static_cast<size_t>(cols) * sizeof(float));
  const size_t panel_bytes = round64(static_cast<size_t>(n * kPanelCols) * sizeof(float));
  const size_t pack_bytes =
      round64(static_cast<size_t>(max_range_rows(rows) * kPackStride) * sizeof(float));
  const size_t shared_bytes = list_bytes + bound_bytes + 2 * order_bytes + x_bytes + iota_bytes;
  const size_t thread_bytes = part_bytes + 2 * panel_bytes + pack_bytes;
  auto* arena =
      static_cast<uint8_t*>(ctx.scratch(shared_bytes + static_cast<size_t>(nth) * thread_bytes));
  auto* tokens = reinterpret_cast<TokenList*>(arena);
  auto* bounds = reinterpret_cast<int64_t*>(arena + list_bytes);
  uint8_t* at_bytes = arena + list_bytes + bound_bytes;
  const auto take = [&at_bytes](size_t bytes) { return std::exchange(at_bytes, at_bytes + bytes); };
  auto* by_row = reinterpret_cast<const TokenList**>(take(order_bytes));
  auto* others = reinterpret_cast<const TokenList**>(take(order_bytes));
  auto* x = reinterpret_cast<float*>(take(x_bytes));
  auto* iota = reinterpret_cast<int32_t*>(take(iota_bytes));
  uint8_t* const per_thread = arena + shared_bytes;
  int64_t n_row = 0, n_other = 0;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t* const it = idx + t * ld;
    const float* const at = a + t * ld;
    int64_t* const b = bounds + t * (kMaxChunks + 1);
    bool cut_by_row = false;
    const int64_t chunks = axpy_chunks(wtype, it, at, counts[t], rows, b, &cut_by_row);
    tokens[t] = {it, at, counts[t], b, chunks, y + t * cols};
    if (cut_by_row) {
      by_row[n_row++] = &tokens[t];
    } else {
      others[n_other++] = &tokens[t];
    }
  }
  if (n_row > 0) {
    scatter_coefficients(by_row, n_row, rows, x);
    for (int64_t r = 0; r < rows; ++r) iota[r] = static_cast<int32_t>(r);
  }
  // Row-cut tokens: each thread all of them, over its share of the columns (in steps of 16, a
  // vector), so that W is read once. The others: each thread its share of them.
  const int64_t col_steps = (cols + 15) / 16;
  ctx.pool().run([&](int ith, int) {
    uint8_t* const mine = per_thread + static_cast<size_t>(ith) * thread_bytes;
    const auto [s0, s1] = cpu::split_range(col_steps, ith, nth);
    if (n_row > 0 && s1 > s0) {
      float* const panels = reinterpret_cast<float*>(mine + part_bytes);
      const ProductScratch ps{x, panels, panels + panel_bytes / sizeof(float),
                              panels + 2 * panel_bytes / sizeof(float)};
      each_by_product(k, ctx.kernels().f32, wtype, wb, ldw, rows, 16 * s0, std::min(cols, 16 * s1),
                      by_row, n_row, iota, ps);
    }
    const auto [t0, t1] = cpu::split_range(n_other, ith, nth);
    if (t1 > t0) {
      each_token(k, wb, ldw, cols, others + t0, t1 - t0, reinterpret_cast<float*>(mine));
    }
  });
}

int64_t compact_row(const float* x, int64_t n, const int32_t* map, int32_t* idx, float* a) {
  int64_t k = 0;
  for (int64_t j = 0; j < n; ++j) {
    idx[k] = map ? map[j] : static_cast<int32_t>(j);
    a[k] = x[j];
    k += x[j] != 0.0f ? 1 : 0;
  }
  return k;
}

int64_t compact_rows(const float* x, int64_t n, int64_t cols, int32_t* idx, float* a,
                     int64_t* counts) {
  for (int64_t t = 0; t < n; ++t) {
    counts[t] = compact_row(x + t * cols, cols, nullptr, idx + t * cols, a + t * cols);
  }
  if (n == 1) return counts[0];
  int64_t any = 0;
  for (int64_t j = 0; j < cols; ++j) {
    bool used = false;
    for (int64_t t = 0; t < n && !used; ++t) used = x[t * cols + j] != 0.0f;
    any += used ? 1 : 0;
  }
  return any;
}

}  // namespace hearth
