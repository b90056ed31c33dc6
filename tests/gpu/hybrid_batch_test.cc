// Batch invariance of hybrid sessions on a CUDA GPU (DESIGN.md section 6, issue 24): attention
// and a third of the FFN's weights on the device, the cold neurons on the host. A sparse
// prompt's logits at -b 1, 9 and 40 are the same bits: 9 tokens put two tokens' neurons in one
// device FFN list (groups of up to 8), and 40 is a batch long enough that a dense session's
// attention would take cuBLAS. The CPU stand-in device's version of this test is in
// tests/unit/hybrid_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gpu_test_util.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_impl.h"

namespace hearth::test {
namespace {

constexpr int32_t kCtx = 64, kPromptTokens = 40;

// A budget in GiB for a third of the model's weights, on top of the session buffers the
// placement sets aside first: the GPU's own estimate, the larger of a dense session's (cuBLAS
// scratch for prompts) and a predictor session's, as the placement takes it.
double third_of(const std::shared_ptr<const Model>& m) {
  backend::DeviceSessionOptions so;
  so.n_ctx = kCtx;
  so.n_batch = kPromptTokens;
  for (const LayerWeights& l : m->impl().weights.layers) {
    so.predictor_width = std::max(so.predictor_width, l.fc1.rows);
  }
  const auto gpu = backend::make_cuda_device(0);
  uint64_t scratch = 0;
  for (const SparseMode mode : {SparseMode::Dense, SparseMode::Predictor}) {
    so.mode = mode;
    scratch = std::max(scratch, gpu->session_scratch_bytes(m->config(), so));
  }
  return (static_cast<double>(m->weight_bytes_per_token()) / 3 + static_cast<double>(scratch)) /
         (1 << 30);
}

TEST(GpuHybrid, SparsePromptsAreBatchInvariant) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const std::string path =
      write_skewed_sparse_model(DType::F16, temp_dir() + "/gpu-hybrid-batch.gguf");
  const double budget = third_of(Model::load(path));
  const std::vector<int32_t> prompt = fixed_prompt(kPromptTokens);
  for (const SparseMode mode : {SparseMode::Oracle, SparseMode::Predictor}) {
    SCOPED_TRACE(to_string(mode));
    LoadOptions lo;
    lo.device.device = "cuda";
    lo.device.vram_budget_gib = budget;
    lo.device.n_ctx = kCtx;
    lo.device.n_batch = kPromptTokens;
    lo.device.sparse = mode;
    lo.device.reset_gpu_index = true;
    const auto hyb = Model::load(path, lo);
    ASSERT_FALSE(hyb->device_name().empty()) << hyb->placement_note();
    SessionOptions o;
    o.sparse = mode;
    o.n_ctx = kCtx;
    o.n_threads = 2;
    o.n_batch = 1;
    const auto one = prompt_logits(hyb, o, prompt);
    for (const int32_t n_batch : {9, kPromptTokens}) {
      o.n_batch = n_batch;
      EXPECT_TRUE(same_bits(prompt_logits(hyb, o, prompt), one)) << "-b " << n_batch;
    }
  }
}

}  // namespace
}  // namespace hearth::test
