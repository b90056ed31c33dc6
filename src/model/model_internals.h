// What tools above the model layer (calibration, imatrix) read of a loaded model beyond its public
// API: the file it was loaded from and its bound weights. They get these views, not Model::Impl,
// so that the model's inner state (device, neuron order, caches) stays the model layer's own.
#pragma once

#include "core/weight_views.h"
#include "gguf/gguf.h"
#include "hearth/model.h"

namespace hearth {

// The GGUF file the model was loaded from (mapped or read), for as long as the model lives.
const gguf::GgufFile& model_file(const Model& model);

// The model's weights as bound at load (in the held neuron order when the model was reordered:
// load with reorder_neurons off to read them in the file's).
const Weights& model_weights(const Model& model);

}  // namespace hearth
