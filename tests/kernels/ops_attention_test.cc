// ops/attention.h against a naive double-precision attention, for decode and prefill, F32 and F16
// caches, GQA ratios 1/2/4, odd head sizes, sliding windows, soft-capped scores, and 1-4 threads
// (whose results must be identical).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/context.h"
#include "common/kernel_test_util.h"
#include "core/fp16.h"
#include "ops/attention.h"

namespace hearth {
namespace {

using cpu::Isa;

using test::isas;

std::vector<float> random_vec(int64_t n, uint32_t seed, float lo, float hi) {
  return test::uniform_floats(n, seed, lo, hi);
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes) : ptr(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64)) {}
  ~AlignedBuffer() { std::free(ptr); }
  void* ptr;
};

// A KV cache filled for positions [0, n_filled) and poisoned with NaN beyond, so that reading a
// position a query must not see shows up in the output.
struct Cache {
  Cache(const AttentionParams& p, int64_t n_filled, uint32_t seed)
      : k(kv_cache_bytes(p)), v(kv_cache_bytes(p)) {
    const int64_t row = static_cast<int64_t>(p.n_head_kv) * p.head_dim;
    const auto kf = random_vec(p.n_ctx * row, seed, -1.5f, 1.5f);
    const auto vf = random_vec(p.n_ctx * row, seed + 1, -1.0f, 1.0f);
    std::vector<float> nan_row(static_cast<size_t>(row), std::numeric_limits<float>::quiet_NaN());
    for (int64_t pos = 0; pos < p.n_ctx; ++pos) {
      const bool filled = pos < n_filled;
      kv_store(Isa::Scalar, p, filled ? kf.data() + pos * row : nan_row.data(), 0, pos, 1, k.ptr);
      kv_store(Isa::Scalar, p, filled ? vf.data() + pos * row : nan_row.data(), 0, pos, 1, v.ptr);
    }
  }
  AlignedBuffer k, v;
};

double cache_at(const AttentionParams& p, const void* cache, int64_t i) {
  return p.kv_type == DType::F16 ? fp16_to_fp32(static_cast<const uint16_t*>(cache)[i])
                                 : static_cast<const float*>(cache)[i];
}

std::vector<double> attention_naive(const AttentionParams& p, const std::vector<float>& q,
                                    const void* k, const void* v, int64_t pos0, int64_t n_tokens) {
  const int hd = p.head_dim, group = p.n_head / p.n_head_kv;
  std::vector<double> out(static_cast<size_t>(n_tokens * p.n_head * hd));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < p.n_head; ++h) {
      const int kvh = h / group;
      const float* qv = q.data() + (t * p.n_head + h) * hd;
      const int64_t n = pos0 + t + 1;
      const int64_t lo = p.window > 0 ? std::max<int64_t>(0, n - p.window) : 0;
      std::vector<double> s(static_cast<size_t>(n), -INFINITY);
      double max = -INFINITY, sum = 0.0;
      for (int64_t j = lo; j < n; ++j) {
        double dot = 0.0;
        for (int d = 0; d < hd; ++d) dot += qv[d] * cache_at(p, k, kv_index(p, j, kvh, d));
        s[j] = dot / std::sqrt(static_cast<double>(hd));
        if (p.softcap > 0) s[j] = p.softcap * std::tanh(s[j] / p.softcap);
        max = std::max(max, s[j]);
      }
      for (auto& x : s) sum += x = std::exp(x - max);
      double* o = out.data() + (t * p.n_head + h) * hd;
      for (int64_t j = lo; j < n; ++j) {
        for (int d = 0; d < hd; ++d) o[d] += s[j] / sum * cache_at(p, v, kv_index(p, j, kvh, d));
      }
    }
  }
  return out;
}

struct Case {
  int n_head, n_head_kv, head_dim;
  int64_t n_ctx, pos0, n_tokens;
  int64_t window = 0;  // sliding window (0: every earlier position)
  float softcap = 0.0f;
};

const Case kCases[] = {
    {8, 4, 8, 512, 0, 1},               // stories260K shapes, first token
    {8, 4, 8, 512, 40, 1},              // stories260K decode
    {4, 4, 64, 96, 0, 23},              // MHA prefill from empty
    {4, 2, 64, 96, 11, 17},             // GQA 2, prefill continuing a cache
    {8, 2, 128, 300, 250, 1},           // GQA 4 decode, longer context
    {8, 2, 128, 300, 0, 37},            // GQA 4 prefill
    {2, 1, 13, 40, 3, 9},               // odd head_dim: scalar tails in the SIMD kernel
    {3, 3, 20, 40, 7, 5},               // head_dim 20: one 16-wide chunk and a tail of 4
    {6, 2, 80, 64, 30, 2},              // head_dim 80 (64 + 16), two decode tokens
    {8, 2, 128, 300, 250, 1, 17},       // sliding window, decode
    {4, 2, 20, 96, 11, 37, 13},         // sliding window, prefill: each query its own first key
    {2, 1, 13, 40, 0, 9, 64},           // a window longer than the context seen so far
    {8, 2, 128, 300, 250, 1, 0, 1.0f},  // soft-capped scores, decode
    {4, 2, 20, 96, 11, 37, 13, 0.5f},   // soft-capped, windowed prefill
    {2, 1, 13, 40, 3, 9, 0, 0.25f},     // a cap far below the scores, odd head_dim
    {32, 4, 64, 300, 250, 1},   // GQA 8 decode (Llama-shaped): a KV head's queries in one tile
    {16, 2, 64, 200, 0, 13},    // GQA 8 prefill: tiles of 8 queries and their remainders
    {12, 2, 24, 100, 20, 3},    // GQA 6, head_dim 24: tiles of 5 to 8 queries
    {28, 4, 128, 200, 150, 1},  // GQA 7 decode (Qwen2-shaped): an odd tile
    {8, 2, 256, 60, 40, 2},     // head_dim 256 (Gemma-shaped)
    {4, 2, 264, 150, 80, 3},    // head_dim 264: value sums in two runs of chunks
};

AttentionParams params_of(const Case& c, DType kv_type, bool head_major) {
  AttentionParams p;
  p.head_major = head_major;
  p.n_head = c.n_head;
  p.n_head_kv = c.n_head_kv;
  p.head_dim = c.head_dim;
  p.n_ctx = c.n_ctx;
  p.kv_type = kv_type;
  p.window = c.window;
  p.softcap = c.softcap;
  return p;
}

void run_case(const Case& c, DType kv_type, bool head_major) {
  const AttentionParams p = params_of(c, kv_type, head_major);
  const int64_t n_out = c.n_tokens * c.n_head * c.head_dim;
  const Cache cache(p, c.pos0 + c.n_tokens, 7);
  const auto q = random_vec(n_out, 3, -1.5f, 1.5f);
  const auto ref = attention_naive(p, q, cache.k.ptr, cache.v.ptr, c.pos0, c.n_tokens);

  for (Isa isa : isas()) {
    std::vector<float> first;
    for (int threads : {1, 2, 3, 4}) {
      cpu::CpuContext ctx(threads, isa);
      AlignedBuffer ws(attention_workspace_bytes(p, threads));
      std::vector<float> out(static_cast<size_t>(n_out), -7.0f);
      attention(ctx, p, q.data(), cache.k.ptr, cache.v.ptr, c.pos0, c.n_tokens, out.data(), ws.ptr);
      double worst = 0.0;
      for (int64_t i = 0; i < n_out; ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
      // Values are O(1); float dot products of <= 128 terms and softmax over <= 300 keys stay
      // within a few 1e-7 of the double result (the F16 cache is exact input to both).
      EXPECT_LT(worst, 2e-6) << cpu::isa_name(isa) << " threads " << threads << " hd " << c.head_dim
                             << (head_major ? " head-major" : "") << " pos0 " << c.pos0
                             << " n_tokens " << c.n_tokens;
      if (first.empty()) {
        first = out;
      } else {
        ASSERT_EQ(out, first) << "result depends on the thread count: " << threads;
      }
    }
  }
}

TEST(OpsAttention, F32CacheMatchesNaive) {
  for (const bool head_major : {false, true}) {
    for (const Case& c : kCases) run_case(c, DType::F32, head_major);
  }
}

TEST(OpsAttention, F16CacheMatchesNaive) {
  for (const bool head_major : {false, true}) {
    for (const Case& c : kCases) run_case(c, DType::F16, head_major);
  }
}

// The same attention over either layout, to the bit; a head-major cache holds each KV head's
// positions as one run.
TEST(OpsAttention, HeadMajorCacheGivesTheSameBits) {
  AttentionParams p;
  p.n_head = 16;
  p.n_head_kv = 2;
  p.head_dim = 24;
  p.n_ctx = 50;
  p.kv_type = DType::F16;
  const int64_t n_tokens = 9, pos0 = 30;
  const auto q = random_vec(n_tokens * p.n_head * p.head_dim, 17, -1.5f, 1.5f);
  std::vector<std::vector<float>> outs;
  for (const bool head_major : {false, true}) {
    p.head_major = head_major;
    const Cache cache(p, pos0 + n_tokens, 18);
    if (head_major) {
      const auto* k = static_cast<const uint16_t*>(cache.k.ptr);
      // Head 1's position 3 follows head 1's position 2, n_ctx rows after head 0's.
      EXPECT_EQ(kv_index(p, 3, 1, 0) - kv_index(p, 2, 1, 0), p.head_dim);
      EXPECT_EQ(kv_index(p, 0, 1, 0), p.n_ctx * p.head_dim);
      EXPECT_NE(k[kv_index(p, 3, 1, 5)], k[kv_index(p, 3, 0, 5)]);
    }
    cpu::CpuContext ctx(2, cpu::detect_isa());
    AlignedBuffer ws(attention_workspace_bytes(p, 2));
    outs.emplace_back(q.size());
    attention(ctx, p, q.data(), cache.k.ptr, cache.v.ptr, pos0, n_tokens, outs.back().data(),
              ws.ptr);
  }
  EXPECT_EQ(outs[0], outs[1]);
}

// The AVX-512 tile reproduces the AVX2 tile's arithmetic for every query (scores folded by the
// same tree, values summed in the same order), so the two levels agree to the bit.
TEST(OpsAttention, Avx512TileGivesTheAvx2Bits) {
  if (cpu::detect_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512 on this machine";
  for (const DType kv_type : {DType::F32, DType::F16}) {
    for (const Case& c : kCases) {
      const AttentionParams p = params_of(c, kv_type, true);
      const int64_t n_out = c.n_tokens * c.n_head * c.head_dim;
      const Cache cache(p, c.pos0 + c.n_tokens, 21);
      const auto q = random_vec(n_out, 22, -1.5f, 1.5f);
      std::vector<std::vector<float>> outs;
      for (const auto& [isa, threads] :
           {std::pair{Isa::Avx2, 2}, std::pair{Isa::Avx512, 1}, std::pair{Isa::Avx512, 3}}) {
        cpu::CpuContext ctx(threads, isa);
        AlignedBuffer ws(attention_workspace_bytes(p, threads));
        outs.emplace_back(static_cast<size_t>(n_out));
        attention(ctx, p, q.data(), cache.k.ptr, cache.v.ptr, c.pos0, c.n_tokens,
                  outs.back().data(), ws.ptr);
      }
      EXPECT_EQ(outs[1], outs[0]) << "hd " << c.head_dim << " heads " << c.n_head << "/"
                                  << c.n_head_kv << " pos0 " << c.pos0;
      EXPECT_EQ(outs[2], outs[0]);
    }
  }
}

TEST(OpsAttention, PrefillEqualsTokenByTokenDecode) {
  // The causal mask makes a batch of tokens equivalent to feeding them one at a time, whatever
  // tiles the queries are grouped in (GQA 2, and GQA 8, whose decode steps take 8-query tiles).
  for (const auto& [n_head, n_head_kv] : {std::pair{4, 2}, std::pair{16, 2}}) {
    AttentionParams p;
    p.n_head = n_head;
    p.n_head_kv = n_head_kv;
    p.head_dim = 32;
    p.n_ctx = 64;
    const int64_t n_tokens = 21, row = p.n_head * p.head_dim;
    const Cache cache(p, n_tokens, 11);
    const auto q = random_vec(n_tokens * row, 12, -2.0f, 2.0f);
    for (Isa isa : isas()) {
      cpu::CpuContext ctx(2, isa);
      AlignedBuffer ws(attention_workspace_bytes(p, 2));
      std::vector<float> batch(static_cast<size_t>(n_tokens * row)), single(batch.size());
      attention(ctx, p, q.data(), cache.k.ptr, cache.v.ptr, 0, n_tokens, batch.data(), ws.ptr);
      for (int64_t t = 0; t < n_tokens; ++t) {
        attention(ctx, p, q.data() + t * row, cache.k.ptr, cache.v.ptr, t, 1,
                  single.data() + t * row, ws.ptr);
      }
      EXPECT_EQ(batch, single) << cpu::isa_name(isa) << " GQA " << n_head / n_head_kv;
    }
  }
}

TEST(OpsAttention, CustomScale) {
  AttentionParams p;
  p.n_head = 2;
  p.n_head_kv = 2;
  p.head_dim = 16;
  p.n_ctx = 8;
  const Cache cache(p, 5, 13);
  const auto q = random_vec(2 * 16, 14, -1.0f, 1.0f);
  // scale s on q·k equals the default scale on q · (s · sqrt(head_dim)).
  std::vector<float> q_scaled = q;
  for (auto& x : q_scaled) x *= 0.5f * 4.0f;
  for (Isa isa : isas()) {
    cpu::CpuContext ctx(1, isa);
    AlignedBuffer ws(attention_workspace_bytes(p, 1));
    std::vector<float> a(q.size()), b(q.size());
    p.scale = 0.5f;
    attention(ctx, p, q.data(), cache.k.ptr, cache.v.ptr, 4, 1, a.data(), ws.ptr);
    p.scale = 0.0f;
    attention(ctx, p, q_scaled.data(), cache.k.ptr, cache.v.ptr, 4, 1, b.data(), ws.ptr);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
  }
}

TEST(OpsAttention, KvStoreF16RoundsLikeScalar) {
  AttentionParams p;
  p.n_head_kv = 3;
  p.head_dim = 7;  // rows of 21: exercises the 8-wide tail
  p.n_ctx = 10;
  p.kv_type = DType::F16;
  auto src = random_vec(4 * 21, 15, -70000.0f, 70000.0f);
  const auto small = random_vec(21, 16, -1e-6f, 1e-6f);  // F16 subnormals
  std::copy(small.begin(), small.end(), src.begin() + 21);
  for (Isa isa : isas()) {
    std::vector<uint16_t> cache(static_cast<size_t>(p.n_ctx * 21), 0xABCD);
    kv_store(isa, p, src.data(), 0, 5, 4, cache.data());
    for (int64_t i = 0; i < 5 * 21; ++i) ASSERT_EQ(cache[i], 0xABCD);
    for (int64_t i = 0; i < 4 * 21; ++i) ASSERT_EQ(cache[5 * 21 + i], fp32_to_fp16(src[i])) << i;
    ASSERT_EQ(cache[9 * 21], 0xABCD);
  }
  // F32 rows, strided source.
  p.kv_type = DType::F32;
  std::vector<float> cache(static_cast<size_t>(p.n_ctx * 21));
  kv_store(Isa::Scalar, p, src.data(), 42, 1, 2, cache.data());
  for (int64_t i = 0; i < 21; ++i) {
    EXPECT_EQ(cache[21 + i], src[i]);
    EXPECT_EQ(cache[42 + i], src[42 + i]);
  }
}

}  // namespace
}  // namespace hearth
