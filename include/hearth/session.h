// A Session is one conversation with a Model: its KV cache, activation buffers and thread pool.
// Buffers are sized at construction, so evaluating tokens never allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "hearth/model.h"
#include "hearth/types.h"

namespace hearth {

struct SessionOptions {
  int32_t n_ctx = 0;      // 0: the model's training context, at most 4096
  int32_t n_threads = 0;  // 0: all hardware threads
  int32_t n_batch = 512;  // tokens evaluated per forward pass in prompt processing
  KvType kv_type = KvType::F16;
};

class Session {
 public:
  Session(std::shared_ptr<const Model> model, const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends tokens at the end of the context and returns the logits [n_vocab] that predict the
  // token after the last one (valid until the next call). Throws hearth::Error if the tokens do
  // not fit in the context or an id is out of range.
  std::span<const float> eval(std::span<const int32_t> tokens);

  // Like eval, but returns the logits of every token: [tokens.size(), n_vocab], row-major.
  // `out` must hold tokens.size() * n_vocab floats.
  void eval_all(std::span<const int32_t> tokens, std::span<float> out);

  int32_t n_past() const;  // tokens in the context
  int32_t n_ctx() const;
  int32_t n_threads() const;
  void reset();            // forget the context

  const Model& model() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth
