// Whether a model-wide file's thresholds are what `--sparse auto` runs (docs/design-notes.md,
// "Model-wide input sparsity"): only where decode steps through them read clearly fewer bytes
// than dense ones. Internal to src/model/.
#pragma once

#include <cstdint>

#include "model/model_impl.h"

namespace hearth {

// Above this share of the dense decode's bytes, threshold decode runs no faster than dense (which
// then also keeps exact outputs and row groups): its gathers, masks and extra passes cost about
// what the skipped bytes save (docs/benchmarks.md).
inline constexpr double kMaxThresholdByteShare = 0.75;

// The bytes a decode step reads with the file's model-wide thresholds, as a share of the dense
// step's: the inputs' calibrated shares (ModelConfig::input_shares) against the copies
// input_copies_pay makes and the down projection's crossover. 1 where the file has no shares.
double threshold_byte_share(const Model::Impl& m);

// Sets m.thresholds_pay (and m.sparse_note where they do not) for a model-wide file.
void weigh_thresholds(Model::Impl& m);

}  // namespace hearth
