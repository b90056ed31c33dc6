// A slot's prompt cache: which of the tokens its sequence holds a later prompt may continue from.
#include "server/slot.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/test_util.h"
#include "hearth/model.h"
#include "model/synth.h"

namespace hearth::server {
namespace {

std::shared_ptr<const Model> tiny_model() {
  const std::string path = test::temp_dir() + "/slot-tiny.gguf";
  write_synthetic_model(test::tiny_synth_options(DType::F32), path);
  return Model::load(path);
}

// Runs a greedy request for `prompt` (3 tokens generated) on the slot, with logits that make
// token 10 + step the argmax at each step; returns the tokens the sequence then holds.
std::vector<int32_t> serve(Slot& slot, const Model& m, const std::vector<int32_t>& prompt) {
  GenerationRequest req;
  req.prompt = prompt;
  req.max_tokens = 3;
  req.sampling.temp = 0.0f;
  req.ignore_eos = true;
  slot.start(std::make_shared<GenerationJob>(req), slot.reusable(prompt));
  std::vector<int32_t> held = prompt;
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab), 0.0f);
  for (int32_t step = 0;; ++step) {
    const auto in = slot.input(64);
    if (step > 0) held.push_back(in[0]);  // a sampled token fed back
    logits.assign(logits.size(), 0.0f);
    logits[static_cast<size_t>(10 + step)] = 1.0f;
    if (!slot.advance(logits, 64)) break;
  }
  slot.finish();
  return held;
}

TEST(Slot, ContinuesFromGeneratedTokensOnlyWhereTheyMatchAPrompts) {
  const auto m = tiny_model();
  const std::vector<int32_t> prompt = {1, 40, 41, 42, 43};
  for (const bool reuse_generated : {true, false}) {
    SCOPED_TRACE(reuse_generated);
    Slot slot(0, *m, reuse_generated);
    const std::vector<int32_t> held = serve(slot, *m, prompt);
    ASSERT_EQ(held, (std::vector<int32_t>{1, 40, 41, 42, 43, 10, 11}));
    std::vector<int32_t> next = held;
    next.push_back(99);  // a next turn going on from the answer
    EXPECT_EQ(slot.reusable(next), reuse_generated ? 7 : 5);
    EXPECT_EQ(slot.reusable(prompt), 4);  // at least one token is evaluated again
    // The next turn's prompt is then in the cache as a prompt, all of it reusable.
    serve(slot, *m, next);
    std::vector<int32_t> third = next;
    third.push_back(98);
    EXPECT_EQ(slot.reusable(third), 8);
  }
}

}  // namespace
}  // namespace hearth::server
