// The decode loop must not allocate (DESIGN.md section 5): after a warm-up, evaluating tokens does
// no heap allocation at all. Counted by replacing the global operator new in this test binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "common/test_util.h"
#include "hearth/model.h"
#include "hearth/session.h"
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
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace hearth {
namespace {

TEST(DecodeLoop, AllocatesNothingAfterWarmUp) {
  if (!HEARTH_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  const long probe = g_allocations.load();
  auto* counted = new std::vector<int>(16);
  delete counted;
  ASSERT_GT(g_allocations.load(), probe) << "operator new is not being counted";

  for (const DType type : {DType::F32, DType::Q4_0})
  for (const SparseMode mode : {SparseMode::Dense, SparseMode::Oracle}) {
    SynthOptions so;
    so.n_embd = 64;
    so.n_layer = 2;
    so.n_ff = 128;
    so.n_head = 4;
    so.n_head_kv = 2;
    so.n_vocab = 300;
    so.type = type;
    so.act = FfnActivation::Relu;
    const std::string path = test::temp_dir() + "/m.gguf";
    write_synthetic_model(so, path);
    const auto model = Model::load(path);
    SessionOptions o;
    o.n_threads = 2;
    o.n_ctx = 64;
    o.sparse = mode;
    Session session(model, o);
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

}  // namespace
}  // namespace hearth
