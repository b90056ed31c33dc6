// Scalar dot products and the reference tile kernel (a plain loop of dot products).
#include <cstdint>

#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/fp16.h"

namespace hearth::cpu::generic {
namespace {

struct LoadF32 {
  static float at(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
};
struct LoadF16 {
  static float at(const void* p, int64_t i) {
    return fp16_to_fp32(static_cast<const uint16_t*>(p)[i]);
  }
};
struct LoadBf16 {
  static float at(const void* p, int64_t i) {
    return bf16_to_fp32(static_cast<const uint16_t*>(p)[i]);
  }
};

// Lane j sums the products at i = j (mod kLanes), then the lanes are added pairwise, mirroring
// the vector kernels' accumulator layout.
template <typename Load>
float dot_float(int64_t n, const void* w, const void* x) {
  const auto* xf = static_cast<const float*>(x);
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += Load::at(w, i + j) * xf[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] += Load::at(w, i) * xf[i];
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}

// Planar Q8 activation row: n quants then n/32 float scales.
struct ActQ8 {
  const int8_t* qs;
  const float* d;
  ActQ8(const void* x, int64_t n)
      : qs(static_cast<const int8_t*>(x)), d(reinterpret_cast<const float*>(qs + n)) {}
};

void gemm_loop(float (*dot)(int64_t, const void*, const void*), int64_t n, const void* w,
               size_t ldw, int64_t nr, const void* x, size_t ldx, int64_t nt, float* y,
               size_t ldy) {
  for (int64_t t = 0; t < nt; ++t) {
    for (int64_t r = 0; r < nr; ++r) {
      y[t * ldy + r] = dot(n, static_cast<const uint8_t*>(w) + r * ldw,
                           static_cast<const uint8_t*>(x) + t * ldx);
    }
  }
}

}  // namespace

float dot_f32(int64_t n, const void* w, const void* x) { return dot_float<LoadF32>(n, w, x); }
float dot_f16(int64_t n, const void* w, const void* x) { return dot_float<LoadF16>(n, w, x); }
float dot_bf16(int64_t n, const void* w, const void* x) { return dot_float<LoadBf16>(n, w, x); }

float dot_q8_0(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const ActQ8 a(x, n);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b) {
    int32_t isum = 0;
    for (int64_t j = 0; j < kQK; ++j) isum += wb[b].qs[j] * a.qs[b * kQK + j];
    sum += fp16_to_fp32(wb[b].d) * a.d[b] * static_cast<float>(isum);
  }
  return sum;
}

float dot_q4_0(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const ActQ8 a(x, n);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b) {
    const int8_t* q = a.qs + b * kQK;
    int32_t isum = 0;
    for (int64_t j = 0; j < kQK / 2; ++j) {
      isum += ((wb[b].qs[j] & 0x0f) - 8) * q[j];
      isum += ((wb[b].qs[j] >> 4) - 8) * q[j + kQK / 2];
    }
    sum += fp16_to_fp32(wb[b].d) * a.d[b] * static_cast<float>(isum);
  }
  return sum;
}

void gemm_f32(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
              int64_t nt, float* y, size_t ldy) {
  gemm_loop(dot_f32, n, w, ldw, nr, x, ldx, nt, y, ldy);
}
void gemm_f16(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
              int64_t nt, float* y, size_t ldy) {
  gemm_loop(dot_f16, n, w, ldw, nr, x, ldx, nt, y, ldy);
}
void gemm_bf16(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy) {
  gemm_loop(dot_bf16, n, w, ldw, nr, x, ldx, nt, y, ldy);
}
void gemm_q8_0(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy) {
  gemm_loop(dot_q8_0, n, w, ldw, nr, x, ldx, nt, y, ldy);
}
void gemm_q4_0(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy) {
  gemm_loop(dot_q4_0, n, w, ldw, nr, x, ldx, nt, y, ldy);
}

}  // namespace hearth::cpu::generic
