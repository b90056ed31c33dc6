// Reads a model's hyper-parameters from GGUF metadata (llama.cpp's key names, under the
// architecture's prefix) and validates them against each other.
#pragma once

#include "gguf/gguf.h"
#include "hearth/types.h"
#include "ops/activation.h"

namespace hearth {

// Throws hearth::Error naming the file and key for a missing, mistyped or inconsistent value, and
// for an architecture Hearth does not implement.
ModelConfig read_config(const gguf::GgufFile& file);

// Whether thresholds skip inputs of the attention or of gate/up (model-wide files), whose
// products then read input-major copies in decode steps.
bool model_wide(const std::vector<LayerThresholds>& thresholds);

// The metadata keys of LayerThresholds' fields, one float per layer each (docs/formats.md); the
// config reads them and calibration writes them.
struct ThresholdKey {
  const char* key;
  float LayerThresholds::*field;
};
inline constexpr ThresholdKey kThresholdKeys[] = {
    {"hearth.attn_in_thresholds", &LayerThresholds::attn_in},
    {"hearth.attn_out_thresholds", &LayerThresholds::attn_out},
    {"hearth.ffn_in_thresholds", &LayerThresholds::ffn_in},
    {"hearth.gate_thresholds", &LayerThresholds::gate},
    {"hearth.down_thresholds", &LayerThresholds::down},
};

// Parses hearth.ffn_activation values: "silu", "relu", "relu2", "gelu".
FfnActivation parse_ffn_activation(std::string_view name, const std::string& where);

}  // namespace hearth
