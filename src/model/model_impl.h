// What a loaded Model holds. Internal: frontends see only include/hearth/model.h.
#pragma once

#include <memory>
#include <mutex>

#include "gguf/gguf.h"
#include "hearth/model.h"
#include "model/config.h"
#include "model/weights.h"
#include "sparse/neuron_major.h"
#include "text/tokenizer.h"

namespace hearth {

struct Model::Impl {
  std::unique_ptr<gguf::GgufFile> file;  // owns the mapping every weight points into
  ModelConfig config;
  ArchFamily family = ArchFamily::Llama;  // picks the weight list and the forward pass
  Weights weights;
  std::unique_ptr<text::Tokenizer> tokenizer;

  // Transposed ffn_down for layers whose file lacks ffn_down_t, made on first use by a sparse
  // session (dense sessions never pay for it); thread-safe, then immutable.
  const sparse::NeuronMajorDown& neuron_major_down() const {
    std::call_once(neuron_major_once_, [this] {
      neuron_major_ = sparse::make_neuron_major_down(weights.layers);
    });
    return neuron_major_;
  }

 private:
  mutable std::once_flag neuron_major_once_;
  mutable sparse::NeuronMajorDown neuron_major_;
};

}  // namespace hearth
