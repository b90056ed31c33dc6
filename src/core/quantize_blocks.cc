// Row drivers for the block quantizers (quantize_legacy.cc, quantize_kquants.cc): the reference
// row, and the search row that keeps the better of the search and the reference per block.
#include "core/quantize_blocks.h"

#include <cstring>
#include <vector>

#include "core/block_codec.h"
#include "core/dequantize_blocks.h"

namespace hearth {
namespace {

const BlockCodec* codec(DType t) {
  const BlockCodec* c = legacy_codec(t);
  return c ? c : kquant_codec(t);
}

constexpr int64_t kMaxBlock = 256;
constexpr size_t kMaxBlockBytes = 256;  // the largest of these blocks is Q5_K's 176 bytes

// sum_j w_j (x_j - y_j)^2 of one block as `t` stores it (w null: all 1).
double block_error(DType t, const void* block, const float* x, const float* w, int64_t n) {
  float y[kMaxBlock];
  dequantize_row_blocks(t, block, y, n);
  double e = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const double r = static_cast<double>(x[j]) - y[j];
    e += (w ? w[j] : 1.0) * r * r;
  }
  return e;
}

// The block's importance with a small floor (1e-4 of its mean), or nullptr when it is all 0: a
// group of zero-weight values would otherwise leave every least-squares sum of its fit at 0 and
// collapse its scale to 0, though its values are still used by every other input.
const float* floor_weights(const float* w, int64_t n, float* out) {
  if (!w) return nullptr;
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += w[j] > 0.0f ? w[j] : 0.0f;
  if (!(s > 0.0)) return nullptr;
  const float floor = static_cast<float>(1e-4 * s / static_cast<double>(n));
  for (int64_t j = 0; j < n; ++j) out[j] = (w[j] > 0.0f ? w[j] : 0.0f) + floor;
  return out;
}

// The row x[n] in type t (whose codec is c), block by block through one of c's unweighted fits.
void each_block(const BlockCodec& c, void (*fit)(const float*, void*), DType t, const float* x,
                void* y, int64_t n) {
  const int64_t bytes = dtype_block_bytes(t);
  auto* out = static_cast<uint8_t*>(y);
  for (int64_t b = 0; b < n / c.block_size; ++b) fit(x + b * c.block_size, out + b * bytes);
}

}  // namespace

bool quantize_row_blocks(DType t, const float* x, void* y, int64_t n) {
  const BlockCodec* c = codec(t);
  if (!c) return false;
  each_block(*c, c->reference, t, x, y, n);
  return true;
}

bool quantize_row_blocks_quick(DType t, const float* x, void* y, int64_t n) {
  const BlockCodec* c = codec(t);
  if (!c) return false;
  each_block(*c, c->quick ? c->quick : c->reference, t, x, y, n);
  return true;
}

bool quantize_row_blocks_search(DType t, const float* x, const float* w, void* y, int64_t n) {
  const BlockCodec* c = codec(t);
  if (!c) return false;
  const int64_t bs = c->block_size;
  const auto bytes = static_cast<size_t>(dtype_block_bytes(t));
  auto* out = static_cast<uint8_t*>(y);
  uint8_t ref[kMaxBlockBytes];
  float floored[kMaxBlock];
  for (int64_t b = 0; b < n / bs; ++b) {
    const float* xb = x + b * bs;
    // The comparison with the reference weighs by the importance as given, or by 1 with none.
    const float* given = w ? w + b * bs : nullptr;
    const float* wb = floor_weights(given, bs, floored) ? given : nullptr;
    uint8_t* yb = out + static_cast<size_t>(b) * bytes;
    c->search(xb, wb ? floored : nullptr, yb);
    c->reference(xb, ref);
    if (block_error(t, ref, xb, wb, bs) < block_error(t, yb, xb, wb, bs)) std::memcpy(yb, ref, bytes);
  }
  return true;
}

}  // namespace hearth
