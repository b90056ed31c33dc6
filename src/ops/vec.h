// Small vector helpers of the forward pass and the sampler: residual add, scaling, dot product,
// softmax, argmax. Single-threaded (the vectors are one hidden state or one row of logits); `isa`
// picks the scalar reference or the AVX2 variant. Scalar and AVX2 give identical bits for the
// element-wise ops; reductions (dot, softmax's sum) differ only in summation order.
#pragma once

#include <cstdint>

#include "backend/cpu/dispatch.h"

namespace hearth {

// y[n] += x[n]   (residual connection)
void vec_add(cpu::Isa isa, float* y, const float* x, int64_t n);

// out[n] = a[n] + b[n]   (out may alias a or b)
void vec_add_to(cpu::Isa isa, float* out, const float* a, const float* b, int64_t n);

// y[n] *= x[n]
void vec_mul(cpu::Isa isa, float* y, const float* x, int64_t n);

// y[n] *= s
void vec_scale(cpu::Isa isa, float* y, float s, int64_t n);

// y[n] = cap · tanh(y[n] / cap): a soft-cap (Gemma 2's attention scores and logits). One plain
// loop for every ISA, so that every attention kernel caps its scores to the same bits.
void vec_soft_cap(float* y, float cap, int64_t n);

// y[n] += a * x[n]
void vec_axpy(cpu::Isa isa, float* y, float a, const float* x, int64_t n);

// Σ a[i]·b[i] over a[n], b[n], accumulated in float.
float vec_dot_f32(cpu::Isa isa, const float* a, const float* b, int64_t n);

// Largest element of x[n]; n >= 1.
float vec_max(cpu::Isa isa, const float* x, int64_t n);

// x[n] = softmax(x) in place: e^(x - max) / Σ e^(x - max); the sum is accumulated in double, as in
// ggml. Elements of -inf get probability 0; n >= 1 and at least one element must be finite.
void softmax(cpu::Isa isa, float* x, int64_t n);

// Writes the indices i of x[n] with x[i] >= threshold to idx, ascending, and returns how many
// (NaN never qualifies). idx has room for n entries: the vector variant stores whole vectors at
// the next free slot, which may reach past the count but never past n. A sparse FFN's active
// neurons from its predictor's scores.
int64_t select_at_least(cpu::Isa isa, const float* x, int64_t n, float threshold, int32_t* idx);

// Zeroes the elements of v[n] whose magnitude is at most the threshold (at 0: keeps exactly the
// non-zero ones) and returns how many are left. The magnitude rules of the sparse modes.
int64_t mask_below(float* v, int64_t n, float threshold);

// Index of the largest element of x[n] (the first one on ties, like llama.cpp's greedy sampler);
// NaNs are never chosen unless all elements are NaN (then 0). n >= 1.
int64_t argmax(const float* x, int64_t n);

}  // namespace hearth
