// Predictors held in Q8_0 (docs/design-notes.md, "Predictor precision").
//
// A decode step in predictor mode reads every layer's predictor whole, whatever the sparsity: on
// the ~1B synthetic model at 90% its F16 fc1 and fc2 are two thirds of the FFN's bytes. Held in
// Q8_0 (ggml's rounding, 8.5 bits a weight) they read 47% fewer bytes. The scores then carry the
// Q8_0 rounding of the weights and of the predictor's input (as every quantized product does),
// which changes a neuron's selection only where its score is that close to the threshold.
#pragma once

#include "model/model_impl.h"

namespace hearth {

// Converts every float predictor matrix (fc1, fc2: F32, F16 or BF16) whose rows are whole Q8_0
// blocks to Q8_0, in the rows' order as held (after reorder_neurons). A file read into memory
// takes the Q8_0 rows in place of the float ones (they are shorter), so nothing more is held; a
// mapped file's are copied into m.converted. Other matrices keep their type.
void hold_predictors_q8(Model::Impl& m);

}  // namespace hearth
