// Neuron-major copies of ffn_down for models that store it only in the usual layout. Sparse decode
// reads the output column of each active neuron; in ffn_down ([n_embd, n_ff]) those columns are
// strided, so a skipped neuron saves no memory traffic. PowerInfer's files (and Hearth's own
// sparse files) carry ffn_down_t instead; for the others this makes it once, at first use.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "core/huge_buffer.h"
#include "core/weight_views.h"
#include "hearth/types.h"

namespace hearth::sparse {

// The transposed ffn_down of every layer that lacks ffn_down_t ([n_ff, n_embd], row i = neuron i's
// output column). F32 and F16 keep their type, so the copy is exact; BF16 becomes F32 (exact).
// Every quantized type (Q4_0, Q8_0, the K-quants, ...) becomes Q8_0 requantized from the
// dequantized values: their blocks run along n_ff, so they cannot be moved without requantizing.
// Q8_0's step (1/254 of a block's largest value) is far below the error of the file's own type,
// it takes at most 8.5 bits per weight (so the copy adds at most 8.5/4.5 of ffn_down for a
// 4-bit file, not a second model), and a sparse token reads half the bytes an F16 copy would
// (docs/design-notes.md, "Neuron-major down"). Rows whose length is not a multiple of 32 become
// F16.
//
// A model-wide file's calibrated shares (input_shares, ModelConfig's) say which layers need the
// copy: one whose down input leaves more rows to read than down_crossover streams ffn_down in
// every decode step anyway (ffn_down.cc), so it gets none, unless the layer has a predictor
// (whose neurons, not the thresholds, decide what down reads).
struct NeuronMajorDown {
  std::vector<Matrix> layers;  // empty Matrix where the file has ffn_down_t or no copy pays
  std::vector<HugeBuffer> storage;
};

// orders[il], when not empty, puts neuron orders[il][j] in row j (the order the layer's other FFN
// matrices are held in, model/neuron_order.h). Empty input_shares: a copy for every layer.
NeuronMajorDown make_neuron_major_down(const std::vector<LayerWeights>& layers,
                                       const std::vector<std::vector<int32_t>>& orders,
                                       const std::vector<float>& input_shares = {});

// The type a transposed copy of a `t` matrix with rows of n_embd is stored in.
DType neuron_major_type(DType t, int64_t n_embd);

// The share of a copy's rows (of type t) above which one token's axpy over them is slower than
// the dense product over the file's matrix (bench/sparse_bench.cc against matvec): the axpy pays
// for converting weights or coefficients per row, and for rows read scattered, short ones (the
// quantized types') further below the dense rate than long ones (bm_scattered_read).
double axpy_crossover(DType t);

// The share of a layer's neurons above which one token's axpy over `down_t` (ffn_down's
// neuron-major copy) is slower than the dense product over `down` (the file's ffn_down): the copy
// type's axpy_crossover, which compares the two over the same bytes, times the bytes a weight
// takes in the file's matrix against the copy (a Q4_0 file's Q8_0 copy holds 1.9 times the bytes
// per weight, so its axpy pays only below about half the share it would over a Q8_0 file).
double down_crossover(const Matrix& down, const Matrix& down_t);

// The input-major copies model-wide input thresholds read in decode steps (InputMajorLayer). Float
// matrices keep their values exactly (F32, F16; BF16 becomes F32), their rows lane-grouped
// (lane_grouped_row), as lane_matvec reads them; every other copy keeps its rows in input order
// (ops/input_sparse.h: copy_is_lane_grouped). Quantized ones are requantized along the other
// axis from the file's values (their blocks run along the input), into a type of about the
// file's size with fast axpy kernels (input_major_type), so that a step reads fewer bytes than
// the dense product: that is a second rounding, which decode steps see and prompts (the file's
// matrices) do not. The copies are made beside the file's matrices.
//
// A copy is made only where it pays: where the input's calibrated share of skipped elements
// (input_shares, ModelConfig's; all copies when empty) is above 0 and, for a quantized copy,
// leaves fewer of its rows to read than the copy type's axpy_crossover, for every matrix that
// input feeds (q, k and v, or gate and up, get their copies together). Elsewhere the products
// take the file's matrix over the zeroed input, which is the same computation at the dense
// speed, with no copy in memory.
struct InputMajor {
  std::vector<InputMajorLayer> layers;
  std::vector<HugeBuffer> storage;
};
// Whether the copies of the matrices one input of layer `layer` feeds pay for themselves: the
// input skips some of its elements, and each copy is float or reads fewer of its rows than its
// copy type's axpy_crossover. Those matrices go through their copies together or not at all
// (attention_block.cc, ffn.cc), so they get them together.
bool input_copies_pay(const std::vector<float>& input_shares, size_t layer, InputKind input,
                      std::initializer_list<const Matrix*> fed);

// What a decode step reads over the matrices one input of layer `l` feeds (q, k and v; wo; gate
// and up; down), when that input's thresholds leave a share `read` of its elements, against the
// dense product over them. `bytes` follows the paths the runtime takes: the copies where
// input_copies_pay makes them, down's neuron-major copy below down_crossover, else the matrices
// whole. `time` is the step's time in units of one dense byte's: a quantized copy read at its
// crossover takes the dense time (that is what the crossover is), so its rows cost 1 /
// crossover of their share; a float copy's walk (lane_matvec, or down's axpy) adds about
// kFloatCopyRowCost bytes of reading per row to its bytes (bm_lane_matvec and bm_sparse_axpy
// against bm_matvec: a copy of 4 KiB rows breaks even with the dense product at about 80% of its
// rows, one of 11 KiB rows at about 90%).
struct InputRead {
  double dense = 0;  // bytes of the dense product
  double bytes = 0;  // bytes the step reads
  double time = 0;   // the step's time, in dense bytes
};
inline constexpr double kFloatCopyRowCost = 1024;
InputRead input_read(const LayerWeights& l, InputKind input, double read);

// joint_qkv false keeps q, k and v in a copy each (copies that stand in for the file's
// matrices, model_impl.h's hold_input_major_only). visit, when given, sees each layer's copies
// once they are made, with the buffers holding them: it may move the copies elsewhere and drop
// those buffers (erase them from the vector) before the next layer's are made.
using InputMajorVisit =
    std::function<void(size_t layer, InputMajorLayer& copies, std::vector<HugeBuffer>& buffers)>;
InputMajor make_input_major(const std::vector<LayerWeights>& layers,
                            const std::vector<float>& input_shares, bool joint_qkv = true,
                            const InputMajorVisit& visit = {});

// The type of the input-major copy of a `t` matrix with `rows` outputs: floats and Q8_0 as
// neuron_major_type; Q4_0 and Q6_K keep theirs; the 5-bit types become Q5_K, the other (smaller)
// ones Q4_K; each falling back to a finer type whose blocks fit the rows.
DType input_major_type(DType t, int64_t rows);

}  // namespace hearth::sparse
