// CudaDevice's attention() against the host's attention block (forward_llama.cc's ops, scalar
// kernels, quantized weights decoded exactly) on a small model: every weight type, F16 and F32
// caches, both RoPE layouts, two sequences, a prompt chunk (cuBLAS path) followed by decode steps
// at later positions; and a sparse session's prompt against the same tokens one step each.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "gpu_test_util.h"
#include "test_model.h"

namespace hearth::test {
namespace {

// The host runs quantized projections on their exactly decoded weights, as the device does (it
// never quantizes activations, HostAttention's exact_weights). What is left is the device's prompt
// path (linear.h): activations rounded to F16/BF16, and Q8_0/Q4_0 weights decoded into an F16
// scratch, which rounds d·q once more; later steps read the KV cache those prompts wrote.
double attention_tolerance(DType t) {
  switch (t) {
    case DType::F32:
      return 2e-4;
    case DType::F16:
      return 3e-3;
    case DType::BF16:
      return 2e-2;
    default:
      return 1e-2;
  }
}

TEST(GpuDevice, AttentionMatchesHostForward) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t n_ctx = 64;
  struct Step {
    int seq;
    int64_t n, pos0;
  };
  // Sequence 0: a 35-token prompt, then 3 tokens, then one; sequence 1 interleaved.
  const Step steps[] = {{0, 35, 0}, {1, 5, 0}, {0, 3, 35}, {1, 1, 5}, {0, 1, 38}};
  for (const DType t : kAllTypes) {
    for (const KvType kv : {KvType::F16, KvType::F32}) {
      for (const RopeType rope : {RopeType::Normal, RopeType::Neox}) {
        TestModelOptions o;
        o.type = t;
        o.rope = rope;
        o.n_rot = rope == RopeType::Neox ? 8 : 16;  // Neox: half the head rotated
        const TestModel m(o);
        backend::DeviceSessionOptions so;
        so.n_ctx = static_cast<int32_t>(n_ctx);
        so.n_seq = 2;
        so.n_batch = 40;
        so.kv_type = kv;
        GpuSession gpu = open_gpu_session(m.device_model(true, {}, false), so);
        HostAttention host(m, n_ctx, 2, kv, /*exact_weights=*/quantized(t));
        uint32_t seed = 90;
        for (const Step& st : steps) {
          const auto x = random_floats(st.n * o.n_embd, ++seed, 1.0f);
          std::vector<float> want = x, got = x;
          for (int64_t il = 0; il < o.n_layer; ++il) {
            host.run(il, st.seq, want.data(), st.n, st.pos0);
            gpu.session->attention(il, st.seq, got.data(), st.n, st.pos0);
          }
          expect_close_to_max(got, want, attention_tolerance(t),
                              std::string(dtype_name(t)) + (kv == KvType::F16 ? " f16" : " f32") +
                                  " cache, seq " + std::to_string(st.seq) + " pos0 " +
                                  std::to_string(st.pos0) + " n " + std::to_string(st.n));
        }
      }
    }
  }
}

// In a sparse session a prompt's attention block gives every token the bits a decode step gives
// it (the matvec kernel at every batch size, no cuBLAS): a 35-token prompt in one call against
// the same tokens one call each, every weight type, both cache types.
TEST(GpuDevice, SparseSessionAttentionIsBatchInvariant) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t n_ctx = 64, n = 35;
  for (const DType t : kAllTypes) {
    for (const KvType kv : {KvType::F16, KvType::F32}) {
      TestModelOptions o;
      o.type = t;
      const TestModel m(o);
      backend::DeviceSessionOptions so;
      so.n_ctx = static_cast<int32_t>(n_ctx);
      so.n_batch = 40;
      so.kv_type = kv;
      so.mode = SparseMode::Oracle;
      GpuSession whole = open_gpu_session(m.device_model(true, {}, false), so);
      GpuSession steps = open_gpu_session(m.device_model(true, {}, false), so);
      const auto x = random_floats(n * o.n_embd, 95, 1.0f);
      std::vector<float> got = x, want = x;
      for (int64_t il = 0; il < o.n_layer; ++il) {
        whole.session->attention(il, 0, got.data(), n, 0);
        for (int64_t i = 0; i < n; ++i) {
          steps.session->attention(il, 0, want.data() + i * o.n_embd, 1, i);
        }
      }
      EXPECT_TRUE(same_bits(got, want))
          << dtype_name(t) << (kv == KvType::F16 ? " f16" : " f32") << " cache";
    }
  }
}

TEST(GpuDevice, AttentionRejectsBadCalls) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const TestModel m(TestModelOptions{});
  backend::DeviceSessionOptions so;
  so.n_ctx = 16;
  so.n_batch = 4;
  GpuSession gpu = open_gpu_session(m.device_model(true, {}, false), so);
  backend::DeviceSession* session = gpu.session.get();
  std::vector<float> x(8 * m.config().n_embd, 0.5f);
  EXPECT_THROW(session->attention(0, 0, x.data(), 5, 0), Error);   // over n_batch
  EXPECT_THROW(session->attention(0, 1, x.data(), 1, 0), Error);   // no such sequence
  EXPECT_THROW(session->attention(0, 0, x.data(), 4, 14), Error);  // past n_ctx
  EXPECT_THROW(session->attention(9, 0, x.data(), 1, 0), Error);   // no such layer
}

}  // namespace
}  // namespace hearth::test
