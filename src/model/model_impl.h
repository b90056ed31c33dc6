// What a loaded Model holds. Internal: frontends see only include/hearth/model.h.
#pragma once

#include <memory>

#include "gguf/gguf.h"
#include "hearth/model.h"
#include "model/weights.h"
#include "text/tokenizer.h"

namespace hearth {

struct Model::Impl {
  std::unique_ptr<gguf::GgufFile> file;  // owns the mapping every weight points into
  ModelConfig config;
  Weights weights;
  std::unique_ptr<text::Tokenizer> tokenizer;
};

}  // namespace hearth
