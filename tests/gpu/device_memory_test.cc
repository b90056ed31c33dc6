// The CUDA device's memory accounting: exact byte counts, session scratch as reported, clean
// failures (a named hearth::Error, nothing left allocated).
#include "device/cuda/device_memory.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device/cuda_entry.h"
#include "core/error.h"
#include "gpu_test_util.h"
#include "test_model.h"

namespace hearth::test {
namespace {

TEST(GpuMemory, AllocatorCountsExactlyAndNamesFailures) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  gpu::DeviceAllocator alloc(0);
  {
    gpu::DeviceBuffer a(alloc, 1000, "a");
    gpu::DeviceBuffer b(alloc, 24, "b");
    EXPECT_EQ(alloc.allocated(), 1024u);
    gpu::DeviceBuffer c = std::move(a);
    EXPECT_EQ(alloc.allocated(), 1024u);
  }
  EXPECT_EQ(alloc.allocated(), 0u);
  EXPECT_EQ(alloc.peak(), 1024u);
  try {
    gpu::DeviceBuffer huge(alloc, size_t{1} << 52, "an absurd buffer");
    FAIL() << "a 4 PiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("an absurd buffer"), std::string::npos) << e.what();
  }
  EXPECT_EQ(alloc.allocated(), 0u);
}

TEST(GpuMemory, SessionTakesWhatItReports) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const TestModel m(TestModelOptions{});
  std::vector<int32_t> hot;
  for (int32_t i = 0; i < 96; i += 2) hot.push_back(i);
  auto dev = backend::make_cuda_device(0);
  EXPECT_FALSE(dev->name().empty());
  const backend::MemoryInfo info = dev->memory();
  EXPECT_GT(info.total, 0u);
  EXPECT_LE(info.free, info.total);
  for (const SparseMode mode : {SparseMode::Dense, SparseMode::Predictor}) {
    for (const int32_t n_batch : {4, 64}) {  // 64: with cuBLAS scratch in the dense session
      backend::DeviceSessionOptions so;
      so.n_ctx = 100;
      so.n_seq = 3;
      so.n_batch = n_batch;
      so.mode = mode;
      const uint64_t bound = dev->session_scratch_bytes(m.config(), so);
      if (dev->allocated() == 0) dev->load(m.device_model(true, hot, true));
      const uint64_t loaded = dev->allocated();
      EXPECT_GT(loaded, 0u);
      const uint64_t scratch = dev->session_scratch_bytes(m.config(), so);
      EXPECT_LE(scratch, bound) << "the bound before load is below the real need";
      {
        auto session = dev->open_session(so);
        // Two caches (K and V) per attention layer: [n_seq][n_ctx, n_head_kv, head_dim] F16.
        const uint64_t kv = 2ull * m.config().n_layer * 3 * 100 * m.config().n_embd_kv() * 2;
        EXPECT_EQ(dev->allocated() - loaded, scratch + kv);
        EXPECT_GE(dev->peak_allocated(), dev->allocated());
      }
      EXPECT_EQ(dev->allocated(), loaded);
    }
  }
}

TEST(GpuMemory, BadModelsLeaveNothingAllocated) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const TestModel m(TestModelOptions{});
  auto dev = backend::make_cuda_device(0);
  EXPECT_THROW(dev->load(m.device_model(false, {5, 3}, false)), Error);  // not ascending
  EXPECT_THROW(dev->load(m.device_model(false, {96}, false)), Error);    // past n_ff
  EXPECT_EQ(dev->allocated(), 0u);
  EXPECT_THROW(dev->open_session({}), Error);  // nothing loaded
}

// A load that runs out of memory half-way frees what it had copied: the GPU is filled up to
// 512 MiB first, then a model of four 256 MiB layers is loaded.
TEST(GpuMemory, LoadThatRunsOutFreesEverything) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  auto dev = backend::make_cuda_device(0);
  const uint64_t free = dev->memory().free;
  constexpr uint64_t kLeft = 512ull << 20;
  if (free < 2 * kLeft) GTEST_SKIP() << "the GPU has too little free memory for this test";
  gpu::DeviceAllocator other(0);
  gpu::DeviceBuffer hog(other, free - kLeft, "memory another program holds");

  const int64_t n_embd = 4096;
  std::vector<uint8_t> zeros(static_cast<size_t>(n_embd * n_embd) * 4);  // one F32 matrix
  LayerWeights l;
  for (Matrix* w : {&l.wq, &l.wk, &l.wv, &l.wo})
    *w = Matrix{DType::F32, zeros.data(), n_embd, n_embd};
  backend::DeviceModel model;
  model.config.n_embd = n_embd;
  model.config.n_layer = 4;
  model.config.n_head = model.config.n_head_kv = 32;
  model.config.head_dim = n_embd / 32;
  model.config.n_rot = 128;
  model.config.n_ff = 4 * n_embd;
  for (int i = 0; i < 4; ++i) {
    backend::DeviceLayer& d = model.layers.emplace_back();
    d.attention = true;
    d.weights = &l;
  }
  try {
    dev->load(model);
    FAIL() << "1 GiB of weights fit in 512 MiB";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot allocate"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dev->allocated(), 0u);
  EXPECT_GT(dev->peak_allocated(), 0u);
}

}  // namespace
}  // namespace hearth::test
