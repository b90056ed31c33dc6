// The residual stream in its principal axes: a fixed orthogonal change of basis Q of the residual
// stream, folded into the weights, so that model-wide thresholds (calib/input_sparsity.h) skip
// elements of q/k/v's and gate/up's input in a basis where that input's energy sits in few
// elements. A small element then carries less of the product than in the model's own axes, and
// the same share skipped costs less divergence (LaRoSA, arXiv 2507.01299, rotates each layer's
// input with adapters between layers; one rotation for the whole stream needs none).
//
// With h' = Q^T h everywhere, the model computes the same function:
//   - RMSNorm commutes with Q once its weight g is folded into the matrices that read the normed
//     vector: a reader W becomes W diag(g) Q, and every norm weight becomes 1;
//   - a matrix that writes the stream (wo, down) becomes Q^T W, its bias Q^T b;
//   - the token embeddings' rows e become Q^T e; a tied output head gets its own tensor, since
//     its rows fold the output norm and the embeddings' rows do not.
// Q holds the eigenvectors of the normed residual's second moment, pooled over every layer's
// attention and FFN inputs on calibration text, largest first (principal_axes), or those axes
// refined so that a token's smallest elements at the target share hold less of its energy
// (sparse_axes, calib/sparse_axes.h: what model-wide calibration uses).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "hearth/model.h"

namespace hearth::calib {

struct ResidualRotation {
  int64_t n = 0;                 // n_embd
  std::vector<double> q;         // [n, n] row-major; column i is the i-th axis: h' = Q^T h
  std::vector<double> variance;  // [n] the normed residual's mean square along each axis
};

// Why the model's residual stream cannot be rotated (LayerNorm's mean, norms after a half's
// output, learned positions, predictors that read the stream), or "" when it can.
std::string rotation_blocker(const Model& model);

// Whether the file says it was rotated already (hearth.residual_rotation): its stream is in its
// principal axes, and rotating again would only round quantized matrices once more.
bool already_rotated(const Model& model);

// Whether every tensor the rotation changes is stored in a float type or Q8_0. Rotating rounds
// quantized tensors again in their own type: at 8 bits that costs about 0.1% of perplexity, at 4
// bits several percent (docs/benchmarks.md, "The residual stream in its principal axes").
bool rotation_rounds_finely(const Model& model);

// The principal axes of the normed residual over `tokens` (windows of `window` tokens, dense).
// Throws hearth::Error when rotation_blocker is not "".
ResidualRotation principal_axes(const std::shared_ptr<const Model>& model,
                                std::span<const int32_t> tokens, int64_t window, int n_threads,
                                const std::function<void(const std::string&)>& log);

// Normed residual vectors sampled for sparse_axes at most: kSparseAxesVectors, and no more than
// kSparseAxesValues values (128 MiB of floats; 16384 vectors of a 2048-wide stream).
inline constexpr int64_t kSparseAxesVectors = 131072;
inline constexpr int64_t kSparseAxesValues = int64_t{1} << 25;

// The principal axes, then refined on samples of the same vectors for thresholds that skip
// `skipped` of each input (calib/sparse_axes.h) in `steps` steps; the result goes to `log`.
ResidualRotation sparse_axes(const std::shared_ptr<const Model>& model,
                             std::span<const int32_t> tokens, int64_t window, int n_threads,
                             double skipped, int64_t steps,
                             const std::function<void(const std::string&)>& log);

struct RotatedModelReport {
  int64_t rotated = 0;      // tensors whose values changed
  int64_t requantized = 0;  // of them, quantized ones (rounded again in their own type)
};

// Writes `model`'s file with its residual stream rotated by `r`, every tensor in its own type,
// plus hearth.residual_rotation = true.
RotatedModelReport write_rotated_model(const Model& model, const ResidualRotation& r,
                                       const std::string& path, int n_threads);

// Calibration tokens the axes are found on, at most: stories260K's thresholds lost 2-3% less
// perplexity with axes from 50000 tokens than from 8192 (docs/benchmarks.md).
inline constexpr size_t kRotationTokens = 50000;

// sparse_axes are fitted to this much more than the model-wide share: the search then gives
// some inputs more than the target, and on stories260K axes fitted 0.1 and 0.2 above it lost
// 1-2% less perplexity at 40% and 50%, 0.3 above as much as none (docs/benchmarks.md).
inline constexpr double kSparseAxesExtraShare = 0.2;

// Model-wide calibration's first step: the axes of the first kRotationTokens of calibrate()'s
// training tokens for `o` (sparse_axes for o.sparsity + kSparseAxesExtraShare, at most 0.95, in
// o.rotation_steps steps, or the principal axes where that is 0), and `model` written rotated by
// them to `path`; what it did goes to o.log. Throws hearth::Error as principal_axes() and
// calibrate() do.
RotatedModelReport rotate_for_calibration(const std::shared_ptr<const Model>& model,
                                          const CalibrateOptions& o, const std::string& path);

}  // namespace hearth::calib
