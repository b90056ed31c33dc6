// ISA detection and the kernel table. The table is filled once (per CpuContext) with the best
// variant this machine supports; kernels are plain function pointers so the choice costs nothing
// per call. Every entry has a scalar reference in kernels/generic/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace hearth::cpu {

// AvxVnni is AVX2 plus AVX-VNNI: the AVX2 kernels, with VNNI 8-bit dot products for Q8_0/Q4_0.
// Avx512 is AVX2 plus AVX-512 F/BW/VL/DQ and AVX512-VNNI (not AVX-VNNI: Ice Lake and Cascade Lake
// have the 512-bit form only): 16-lane float tiles in 32 registers, and its own VNNI kernels.
// Ordered from least to most capable.
enum class Isa { Scalar, Avx2, AvxVnni, Avx512 };

// Whether code for `isa` may use AVX2/FMA/F16C (every ISA above Scalar includes them).
constexpr bool has_avx2(Isa isa) { return isa != Isa::Scalar; }

// Best ISA of this CPU. HEARTH_ISA=scalar, avx2, avxvnni or avx512 in the environment caps it
// (to compare variants on one machine); a level the CPU lacks is ignored.
Isa detect_isa();
// Whether this CPU (and its OS, for the AVX register state) can run the kernels of `isa`.
bool cpu_supports(Isa isa);
std::string_view isa_name(Isa isa);

// The form activations take before a dot product with weight rows. Float weights (F32, F16,
// BF16) multiply F32 activations directly. Quantized weights multiply activations quantized once
// per call with ggml's Q8_0 rounding (same integers and f16 scales as ggml's Q8_0 blocks), stored
// in a kernel-friendly interleaved layout described in kernels/act_layout.h. Q8K is the same
// layout with ggml's Q8_K rounding instead (one float scale per 256 elements, the largest
// magnitude at -127, round half to even), which ggml's K-quant and IQ4_XS dot products use:
// those types take it so that their results track llama.cpp's, near-ties included. Scalar and
// vector quantizers produce bit-identical activation rows.
enum class ActFormat { F32, Q8, Q8K };

// Bytes of one activation row of n elements (a multiple of 32 bytes so rows stay aligned).
size_t act_row_bytes(ActFormat f, int64_t n);

// Kernels for weights of one dtype. Weight rows are `ldw` bytes apart, activation rows `ldx`
// bytes apart (in the weight type's ActFormat), output rows `ldy` floats apart.
struct WeightKernels {
  ActFormat act = ActFormat::F32;
  // x[n] -> one activation row in `act` format; null for ActFormat::F32 (used as is).
  void (*to_act)(const float* x, void* y, int64_t n) = nullptr;
  // Row of this dtype -> y[n] floats.
  void (*to_float)(const void* x, float* y, int64_t n) = nullptr;
  // Dot product of one weight row with one activation row of n elements.
  float (*dot)(int64_t n, const void* w, const void* x) = nullptr;
  // y[t * ldy + r] = dot(w row r, x row t) for r < nr, t < nt: the register-blocked tile kernel
  // behind matvec (nt = 1) and matmul. Callers pick nr, nt; the kernel tiles internally.
  void (*gemm)(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy) = nullptr;
  // gemm over the weight rows idx[0..nr) (row r at w + idx[r] * ldw): y[t * ldy + j] =
  // dot(w row idx[j], x row t). Sparse FFNs read only the active neurons' rows of ffn_up and
  // ffn_gate. Each output is bit-identical to what gemm gives for that row and token, so an
  // all-active sparse layer equals the dense one.
  void (*gemm_gather)(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                      const void* x, size_t ldx, int64_t nt, float* y, size_t ldy) = nullptr;
  // Weighted sum of the weight rows idx[0..nr) (n columns from w; the caller offsets w to the
  // first column, at a block boundary): y[t * ldy + c] += a[t * lda + j] * W[idx[j]][c], added
  // for j in ascending order, float math (quantized rows are dequantized, activations are not
  // quantized). Except one token (nt == 1) of Q4_0: like the dense Q4_0 kernels it works in
  // 8-bit integers, rounding the coefficients a_j * d_j of each group of 32 active rows and each
  // block to int8 with one scale (generic_kernels.h, kAxpyGroup; the error is bounded like that
  // of the dense path's Q8_0 activations). The down projection of a sparse FFN over a
  // neuron-major (transposed) ffn_down. A row whose nt coefficients are all exactly zero is
  // skipped unread: for one token that is the bandwidth a sparse FFN saves. Vector variants
  // differ from the reference only by FMA rounding.
  void (*axpy)(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
               size_t lda, int64_t nt, float* y, size_t ldy) = nullptr;
  // One token of axpy over consecutive parts of the list, each into its own output: positions
  // [ends[p - 1], ends[p]) of idx and a (ends[-1] = 0) add into y + p * ldy, the same bits as one
  // axpy call per part. One call lets a kernel that reads ahead keep doing so across the parts'
  // boundaries (sparse_axpy's per-chunk partial sums, lane_matvec's lanes). Null where a type
  // has no such kernel: callers then call axpy per part.
  void (*axpy_parts)(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                     const int64_t* ends, int64_t n_parts, float* y, size_t ldy) = nullptr;
  // Float types: y[t * ldy + c] = sum_j coef[j * ldc + t] * W[idx[j]][c] for t < nt, c < n,
  // overwriting y, every listed row read: the bits of axpy into a zeroed y (a zero coefficient
  // adds an exact zero), with the coefficients packed token-fastest. The several-token product
  // of an input-major copy over whole inputs (ops/lane_matvec.cc). Null for other types.
  void (*axpy_dense)(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                     const float* coef, size_t ldc, int64_t nt, float* y, size_t ldy) = nullptr;
  // Row groups (kernels/row_groups.h), for types that have them (null for the others). The 16
  // rows at w, ldw bytes apart, rewritten as one group at out (16 * ldw bytes, not aliasing w).
  void (*to_row_group)(int64_t n, const void* w, size_t ldw, void* out) = nullptr;
  // gemm over ng groups of such rows (group g at w + 16 * g * ldw, rows [16 g, 16 g + 16) of
  // the matrix): y[t * ldy + r] = row r . x row t. Not gemm's bits: a row's sums are kept per
  // scale in integers and finished in column order, the same bits at every ISA level and for
  // every token count.
  void (*gemm_row_groups)(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x,
                          size_t ldx, int64_t nt, float* y, size_t ldy) = nullptr;
  // Float types: the lanes of dot's (and gemm's) sums. Each output is L = dot_lanes sums, lane l
  // adding the products of inputs i = l (mod L) in ascending i as axpy adds (FMA where the ISA
  // has it), then lanes folded in halves (lane i += lane i + L/2, down to one). The same bits
  // can so be reached from an input-major copy (ops/lane_matvec.cc). 0 for other types.
  int dot_lanes = 0;
  // How many forward streams a one-token gemm reads contiguous rows as: 1, or S parts of the
  // rows it is given side by side (kernels/tile_set.h, gemv_streams), which want ranges long
  // enough for S parts of some length (ops/matmul_common.h).
  int gemv_streams = 1;
};

struct Kernels {
  Isa isa = Isa::Scalar;
  WeightKernels f32, f16, bf16, q8_0, q4_0;
  // The block types of core/quant_blocks.h.
  WeightKernels q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs;
  // F32 <-> F16 rows (KV cache writes and reads).
  void (*fp32_to_fp16_row)(const float* x, uint16_t* y, int64_t n) = nullptr;
  void (*fp16_to_fp32_row)(const uint16_t* x, float* y, int64_t n) = nullptr;

  // Kernels for weights of dtype t (throws hearth::Error for a dtype without kernels).
  const WeightKernels& weights(DType t) const;
};

Kernels select_kernels(Isa isa);

}  // namespace hearth::cpu
