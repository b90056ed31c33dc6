// Normalisation layers. Both follow ggml's arithmetic step for step (sums in double, the scale
// 1/sqrtf(mean + eps) in float, then x·scale·w rounded per multiplication) so that a dense forward
// pass matches llama.cpp's to the bit wherever summation order allows.
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "backend/cpu/dispatch.h"

namespace hearth {

// RMSNorm of one row: y[n] = x[n] · (1 / sqrtf(mean(x²) + eps)) · w[n].
// w may be null (no weight). y may alias x.
void rms_norm(cpu::Isa isa, const float* x, const float* w, float eps, int64_t n, float* y);

// RMSNorm of every row: x[n_rows, n] -> y[n_rows, n], weight w[n] shared by all rows. Splits the
// rows over the context's threads when there are enough of them to pay for it.
void rms_norm_rows(cpu::CpuContext& ctx, const float* x, const float* w, float eps, int64_t n_rows,
                   int64_t n, float* y);

// LayerNorm of one row (Falcon, OPT): y[n] = (x[n] - mean) · (1 / sqrtf(var + eps)) · w[n] + b[n].
// w and b may each be null. y may alias x.
void layer_norm(cpu::Isa isa, const float* x, const float* w, const float* b, float eps, int64_t n,
                float* y);

// LayerNorm of every row: x[n_rows, n] -> y[n_rows, n], w[n] and b[n] shared (each may be null).
void layer_norm_rows(cpu::CpuContext& ctx, const float* x, const float* w, const float* b,
                     float eps, int64_t n_rows, int64_t n, float* y);

}  // namespace hearth
