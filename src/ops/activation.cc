#include "ops/activation.h"

#include <cmath>

#include "ops/avx2/ops_avx2.h"

namespace hearth {
namespace {

constexpr float kGeluCoefA = 0.044715f;
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;

// Below this many elements glu runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelElems = 1 << 16;

inline float silu_ref(float x) { return x / (1.0f + std::exp(-x)); }
inline float relu_ref(float x) { return x > 0.0f ? x : 0.0f; }
inline float relu2_ref(float x) {
  const float r = relu_ref(x);
  return r * r;
}
inline float gelu_ref(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x)));
}

template <typename F>
void map(const float* x, int64_t n, float* y, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <typename F>
void map_glu(const float* gate, const float* up, int64_t n, float* out, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(gate[i]) * up[i];
}

}  // namespace

std::optional<Activation> parse_activation(std::string_view name) {
  if (name == "silu") return Activation::Silu;
  if (name == "relu") return Activation::Relu;
  if (name == "relu2") return Activation::Relu2;
  if (name == "gelu") return Activation::Gelu;
  return std::nullopt;
}

std::string_view activation_name(Activation act) {
  switch (act) {
    case Activation::Silu: return "silu";
    case Activation::Relu: return "relu";
    case Activation::Relu2: return "relu2";
    case Activation::Gelu: return "gelu";
  }
  return "?";
}

void activate(cpu::Isa isa, Activation act, const float* x, int64_t n, float* y) {
  const bool simd = ops_avx2::enabled(isa);
  switch (act) {
    case Activation::Silu:
      if (simd) return ops_avx2::silu(x, n, y);
      return map(x, n, y, silu_ref);
    case Activation::Relu:
      // Plain loops: the compiler vectorises these with the base ISA, and they are memory bound.
      return map(x, n, y, relu_ref);
    case Activation::Relu2: return map(x, n, y, relu2_ref);
    case Activation::Gelu:
      if (simd) return ops_avx2::gelu(x, n, y);
      return map(x, n, y, gelu_ref);
  }
}

void glu(cpu::Isa isa, Activation act, const float* gate, const float* up, int64_t n, float* out) {
  const bool simd = ops_avx2::enabled(isa);
  switch (act) {
    case Activation::Silu:
      if (simd) return ops_avx2::swiglu(gate, up, n, out);
      return map_glu(gate, up, n, out, silu_ref);
    case Activation::Relu: return map_glu(gate, up, n, out, relu_ref);
    case Activation::Relu2: return map_glu(gate, up, n, out, relu2_ref);
    case Activation::Gelu:
      if (simd) return ops_avx2::geglu(gate, up, n, out);
      return map_glu(gate, up, n, out, gelu_ref);
  }
}

void glu(cpu::CpuContext& ctx, Activation act, const float* gate, const float* up, int64_t n,
         float* out) {
  const cpu::Isa isa = ctx.isa();
  if (n < kMinParallelElems || ctx.n_threads() == 1) return glu(isa, act, gate, up, n, out);
  // Whole 64-byte lines per thread so that no cache line is written by two threads.
  const int64_t n_lines = (n + 15) / 16;
  ctx.pool().run([&](int ith, int nth) {
    const auto [lb, le] = cpu::split_range(n_lines, ith, nth);
    const int64_t begin = lb * 16, end = le * 16 < n ? le * 16 : n;
    if (begin < end) glu(isa, act, gate + begin, up + begin, end - begin, out + begin);
  });
}

void vec_exp(cpu::Isa isa, const float* x, int64_t n, float* y) {
  if (ops_avx2::enabled(isa)) return ops_avx2::vec_exp(x, n, y);
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

Activation to_activation(FfnActivation a) {
  switch (a) {
    case FfnActivation::Silu: return Activation::Silu;
    case FfnActivation::Relu: return Activation::Relu;
    case FfnActivation::Relu2: return Activation::Relu2;
    case FfnActivation::Gelu: return Activation::Gelu;
  }
  return Activation::Silu;
}

FfnActivation from_activation(Activation a) {
  switch (a) {
    case Activation::Silu: return FfnActivation::Silu;
    case Activation::Relu: return FfnActivation::Relu;
    case Activation::Relu2: return FfnActivation::Relu2;
    case Activation::Gelu: return FfnActivation::Gelu;
  }
  return FfnActivation::Silu;
}

}  // namespace hearth
