// FFN activations and their gated (GLU) forms. Every function works on raw float arrays;
// `out`/`y` may alias an input. The AVX2 variants of silu and gelu use a polynomial e^x whose
// relative error is a few 1e-7; the scalar references call std::exp / std::tanh as ggml's scalar
// code does.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "backend/cpu/context.h"
#include "backend/cpu/dispatch.h"
#include "hearth/types.h"

namespace hearth {

enum class Activation {
  Silu,   // x / (1 + e^-x)                         (Llama, Mistral, Qwen: SwiGLU)
  Relu,   // max(x, 0)                              (ReLU-fied models: ReGLU)
  Relu2,  // max(x, 0)^2                            (squared ReLU)
  Gelu,   // 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))   (Falcon, OPT-like; ggml's tanh form)
};

// "silu", "relu", "relu2", "gelu" (the values of the hearth.ffn_activation key); nullopt otherwise.
std::optional<Activation> parse_activation(std::string_view name);
std::string_view activation_name(Activation act);

// The public enum (ModelConfig::ffn_act) and this one name the same four functions.
Activation to_activation(FfnActivation a);
FfnActivation from_activation(Activation a);

// y[n] = act(x[n])
void activate(cpu::Isa isa, Activation act, const float* x, int64_t n, float* y);

// out[n] = act(gate[n]) · up[n]   (SwiGLU for Silu, ReGLU for Relu, GeGLU for Gelu)
void glu(cpu::Isa isa, Activation act, const float* gate, const float* up, int64_t n, float* out);

// Same as glu over a whole batch (gate/up/out [n_tokens · n_ff] flattened); splits the elements
// over the context's threads when there are enough of them.
void glu(cpu::CpuContext& ctx, Activation act, const float* gate, const float* up, int64_t n,
         float* out);

// Named shorthands (single-threaded).
inline void silu(cpu::Isa isa, const float* x, int64_t n, float* y) {
  activate(isa, Activation::Silu, x, n, y);
}
inline void relu(cpu::Isa isa, const float* x, int64_t n, float* y) {
  activate(isa, Activation::Relu, x, n, y);
}
inline void gelu(cpu::Isa isa, const float* x, int64_t n, float* y) {
  activate(isa, Activation::Gelu, x, n, y);
}
inline void swiglu(cpu::Isa isa, const float* gate, const float* up, int64_t n, float* out) {
  glu(isa, Activation::Silu, gate, up, n, out);
}
inline void reglu(cpu::Isa isa, const float* gate, const float* up, int64_t n, float* out) {
  glu(isa, Activation::Relu, gate, up, n, out);
}

// y[n] = e^x[n]: the vector exponential behind silu and gelu, exposed for softmax-like callers
// and for testing its accuracy.
void vec_exp(cpu::Isa isa, const float* x, int64_t n, float* y);

}  // namespace hearth
