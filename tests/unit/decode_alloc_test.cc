// The decode loop must not allocate (DESIGN.md section 5): after a warm-up, evaluating tokens (one
// sequence, or several batched) does no heap allocation at all. Counted by replacing the global operator new in this test binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels/row_groups.h"
#include "common/kernel_test_util.h"
#include "common/test_util.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_impl.h"
#include "model/synth.h"

// AddressSanitizer owns operator new/delete itself (and checks that they pair up), so under ASan
// the count is not taken and the test skips.
#if defined(__SANITIZE_ADDRESS__)
#define HEARTH_COUNT_ALLOCATIONS 0
#else
#define HEARTH_COUNT_ALLOCATIONS 1
#endif

namespace {
std::atomic<long> g_allocations{0};
}

#if HEARTH_COUNT_ALLOCATIONS
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// GCC cannot see that these replace the operators whose memory comes from the malloc above.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
#endif

namespace hearth {
namespace {

// Whether operator new is being counted (with HEARTH_COUNT_ALLOCATIONS).
bool counting_works() {
  const long probe = g_allocations.load();
  delete new std::vector<int>(16);
  return g_allocations.load() > probe;
}

std::shared_ptr<const Model> relu_model(DType type) {
  const SynthOptions so = test::tiny_synth_options(type, FfnActivation::Relu);
  const std::string path = test::temp_dir() + "/m.gguf";
  write_synthetic_model(so, path);
  return Model::load(path);
}

SessionOptions session_options(SparseMode mode, int32_t n_seq) {
  SessionOptions o;
  o.n_threads = 2;
  o.n_ctx = 64;
  o.sparse = mode;
  o.n_seq = n_seq;
  return o;
}

TEST(DecodeLoop, AllocatesNothingAfterWarmUp) {
  if (!HEARTH_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  ASSERT_TRUE(counting_works()) << "operator new is not being counted";
  for (const DType type : {DType::F32, DType::Q4_0})
  for (const SparseMode mode : {SparseMode::Dense, SparseMode::Oracle}) {
    Session session(relu_model(type), session_options(mode, 1));
    const std::vector<int32_t> prompt = {1, 40, 41, 42, 43, 44, 45};
    session.eval(prompt);
    int32_t token = 50;
    session.eval({&token, 1});

    const long before = g_allocations.load();
    for (int i = 0; i < 20; ++i) {
      token = 60 + i;
      session.eval({&token, 1});
    }
    session.reset();
    session.eval(prompt);
    EXPECT_EQ(g_allocations.load() - before, 0) << dtype_name(type) << " " << to_string(mode);
  }
}

// A server's batch, one sequence per first token: each one's prompt, then one token each per step.
struct Steps {
  std::vector<int32_t> next;
  std::vector<SeqTokens> prompts, step;

  Steps(const std::vector<int32_t>& first, const std::vector<int32_t>& prompt) : next(first) {
    for (int32_t i = 0; i < static_cast<int32_t>(next.size()); ++i) {
      prompts.push_back({i, prompt});
      step.push_back({i, {&next[static_cast<size_t>(i)], 1}});
    }
  }
  // Step i's tokens.
  void advance(int i) {
    for (int32_t& t : next) t = 60 + (t + i) % 100;
  }
};

// The server's loop: one eval_batch per step over every sequence, a prompt joining now and then.
TEST(DecodeLoop, BatchedStepsAllocateNothingAfterWarmUp) {
  if (!HEARTH_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  ASSERT_TRUE(counting_works()) << "operator new is not being counted";
  for (const DType type : {DType::F32, DType::Q4_0})
  for (const SparseMode mode : {SparseMode::Dense, SparseMode::Oracle}) {
    const auto model = relu_model(type);
    Session session(model, session_options(mode, 4));
    const std::vector<int32_t> prompt = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49};
    Steps s({50, 51, 52, 53}, prompt);
    std::vector<float> logits(4 * static_cast<size_t>(model->config().n_vocab));
    const std::vector<SeqTokens> joining = {s.step[0], s.step[1], s.step[2], {3, prompt}};
    session.eval_batch(s.prompts, logits);
    session.eval_batch(s.step, logits);

    const long before = g_allocations.load();
    for (int i = 0; i < 20; ++i) {
      s.advance(i);
      session.eval_batch(s.step, logits);
    }
    session.truncate(2, 5);
    session.reset(3);
    session.eval_batch(joining, logits);
    EXPECT_EQ(g_allocations.load() - before, 0) << dtype_name(type) << " " << to_string(mode);
  }
}

// Weights held as row groups (LoadOptions::row_groups), at every level this CPU has: batched steps
// of more sequences than a group kernel's tile of tokens, and short prompts joining them, unpack
// the codes as they go (kernels/row_groups.h, unpack_codes).
TEST(DecodeLoop, RowGroupStepsAllocateNothingAfterWarmUp) {
  if (!HEARTH_COUNT_ALLOCATIONS)
    GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  ASSERT_TRUE(counting_works()) << "operator new is not being counted";
  for (const cpu::Isa isa : test::isas()) {
    const test::IsaCap cap(isa);
    for (const DType type : {DType::Q4_0, DType::Q4_K}) {
      if (!cpu::select_kernels(isa).weights(type).gemm_row_groups) continue;
      SynthOptions so = test::tiny_synth_options(type, FfnActivation::Silu);
      so.n_embd = 256;  // whole super-blocks
      so.n_ff = 512;
      const std::string path = test::temp_dir() + "/groups.gguf";
      write_synthetic_model(so, path);
      LoadOptions lo;
      lo.row_groups = RowGroups::All;
      const auto model = Model::load(path, lo);
      const std::string where =
          std::string(cpu::isa_name(isa)) + " " + std::string(dtype_name(type));
      ASSERT_TRUE(model->impl().weights.layers.front().ffn_up.row_groups) << where;

      Session session(model, session_options(SparseMode::Dense, 8));
      // 7 steps and this prompt: one product of kMaxDecodeStepTokens tokens.
      const std::vector<int32_t> prompt = {1, 40, 41, 42, 43, 44, 45, 46, 47};
      Steps s(std::vector<int32_t>(8, 50), prompt);
      std::vector<float> logits(8 * static_cast<size_t>(model->config().n_vocab));
      std::vector<SeqTokens> joining(s.step.begin(), s.step.end() - 1);
      joining.push_back({7, prompt});
      ASSERT_EQ(7 + static_cast<int64_t>(prompt.size()), cpu::kMaxDecodeStepTokens);
      session.eval_batch(s.prompts, logits);
      session.eval_batch(s.step, logits);

      const long before = g_allocations.load();
      for (int i = 0; i < 10; ++i) {
        s.advance(i);
        session.eval_batch(s.step, logits);
        session.eval_batch({s.step.data(), 1}, logits);
      }
      session.reset(7);
      session.eval_batch(joining, logits);
      EXPECT_EQ(g_allocations.load() - before, 0) << where;
    }
  }
}

}  // namespace
}  // namespace hearth
