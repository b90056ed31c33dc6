// The parts a Session is made of (src/model/): the KV cache's per-sequence bookkeeping and
// layout, the rows of a pass, and the activation buffers, tested directly; the session's
// behaviour as a whole is tested end to end elsewhere (batch_test, batch_invariance_test).
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "model/forward_buffers.h"
#include "model/kv_cache.h"
#include "model/pass_layout.h"

namespace hearth {
namespace {

AttentionParams small_attention() {
  AttentionParams a;
  a.n_head = 4;
  a.n_head_kv = 2;
  a.head_dim = 8;
  a.n_ctx = 16;
  return a;
}

TEST(KvCache, KeepsEachSequencesLengthAndRefusesWhatDoesNotFit) {
  KvCache kv(small_attention(), 3, {true, true});
  EXPECT_EQ(kv.n_ctx(), 16);
  EXPECT_EQ(kv.n_seq(), 3);
  kv.advance(1, 10);
  EXPECT_EQ(kv.n_past(0), 0);
  EXPECT_EQ(kv.n_past(1), 10);
  kv.check_room(1, 6);
  EXPECT_THROW(kv.check_room(1, 7), Error);
  EXPECT_THROW(kv.check_seq(3), Error);
  EXPECT_THROW(kv.check_seq(-1), Error);
  EXPECT_THROW(kv.n_past(3), Error);
  EXPECT_THROW(kv.truncate(1, 11), Error);
  EXPECT_THROW(kv.truncate(1, -1), Error);
  kv.truncate(1, 4);
  EXPECT_EQ(kv.n_past(1), 4);
  EXPECT_EQ(kv.n_past(2), 0);
}

TEST(KvCache, SequencesSitOneWholeContextApartAndDeviceLayersHoldNothing) {
  const AttentionParams attn = small_attention();
  KvCache kv(attn, 3, {true, false, true});
  const size_t seq_bytes = kv_cache_bytes(attn);
  for (const size_t il : {size_t{0}, size_t{2}}) {
    auto* k0 = static_cast<char*>(kv.k(il, 0));
    ASSERT_NE(k0, nullptr);
    EXPECT_EQ(static_cast<char*>(kv.k(il, 2)) - k0, static_cast<std::ptrdiff_t>(2 * seq_bytes));
    EXPECT_EQ(static_cast<char*>(kv.v(il, 1)) - static_cast<char*>(kv.v(il, 0)),
              static_cast<std::ptrdiff_t>(seq_bytes));
    EXPECT_NE(kv.k(il, 0), kv.v(il, 0));
  }
  EXPECT_EQ(kv.k(1, 0), nullptr);
  EXPECT_EQ(kv.v(1, 2), nullptr);
  EXPECT_NE(kv.k(0, 0), kv.k(2, 0));
}

TEST(PassLayout, LaysChunksOutInOrderAtTheEndOfTheirSequences) {
  KvCache kv(small_attention(), 3, {true});
  kv.advance(2, 5);
  kv.advance(0, 1);
  PassLayout pass(3, 8);
  const std::vector<int32_t> a{7, 8, 9}, b{4}, c{1, 2};
  const std::vector<SeqTokens> batch{{2, a}, {1, b}, {0, c}};
  EXPECT_EQ(pass.plan(batch, kv), 6);
  ASSERT_EQ(pass.chunks().size(), 3u);
  std::vector<int64_t> rows;
  for (const sparse::FfnChunk& c : pass.ffn_chunks()) rows.push_back(c.rows);
  EXPECT_EQ(rows, (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(pass.chunks()[1].seq, 1);
  EXPECT_EQ(pass.chunks()[1].row0, 3);
  EXPECT_EQ(pass.chunks()[2].row0, 4);
  const std::vector<int64_t> want{5, 6, 7, 0, 1, 2};
  for (int64_t r = 0; r < 6; ++r) EXPECT_EQ(pass.position(r), want[static_cast<size_t>(r)]) << r;

  // A second, smaller pass replaces the first.
  const std::vector<SeqTokens> one{{1, b}};
  EXPECT_EQ(pass.plan(one, kv), 1);
  EXPECT_EQ(pass.chunks().size(), 1u);
  EXPECT_EQ(pass.position(0), 0);
}

TEST(PassLayout, AttentionChunksCarryTheirCachesAndTheSparseRule) {
  KvCache kv(small_attention(), 2, {true, true});
  PassLayout pass(2, 8);
  const std::vector<int32_t> prompt{1, 2, 3, 4, 5}, step{6};
  const std::vector<SeqTokens> batch{{0, prompt}, {1, step}};
  pass.plan(batch, kv);
  const std::span<const AttentionChunk> chunks = pass.attention_chunks(1, kv, 1);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].k_cache, kv.k(1, 0));
  EXPECT_EQ(chunks[1].v_cache, kv.v(1, 1));
  EXPECT_EQ(chunks[0].n, 5);
  EXPECT_FALSE(chunks[0].sparse);  // longer than the rule's rows
  EXPECT_TRUE(chunks[1].sparse);
  EXPECT_FALSE(pass.attention_chunks(0, kv, 0)[1].sparse);
}

TEST(PassLayout, MarkedPromptsRunDenseOnlyWhereTheSessionsPromptsDo) {
  KvCache kv(small_attention(), 2, {true});
  PassLayout pass(2, 8);
  const std::vector<int32_t> piece{1, 2}, step{6};
  const std::vector<SeqTokens> batch{{0, piece, true}, {1, step}};
  for (const bool dense_prompts : {false, true}) {
    SCOPED_TRACE(dense_prompts);
    pass.plan(batch, kv, dense_prompts);
    EXPECT_EQ(pass.chunks()[0].dense, dense_prompts);
    EXPECT_EQ(pass.ffn_chunks()[0].dense, dense_prompts);
    EXPECT_FALSE(pass.ffn_chunks()[1].dense);  // a generated token
    const std::span<const AttentionChunk> chunks = pass.attention_chunks(0, kv, 8);
    EXPECT_EQ(chunks[0].sparse, !dense_prompts);
    EXPECT_TRUE(chunks[1].sparse);
  }
}

TEST(ForwardBuffers, HoldOnlyWhatTheModelAndModeNeed) {
  ModelConfig c;
  c.n_embd = 24;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 8;  // q wider than n_embd
  const AttentionParams attn = small_attention();
  const ForwardBuffers plain(c, attn, 5, 2, false, 0);
  EXPECT_EQ(plain.x.bytes(), 5 * 24 * sizeof(float));
  EXPECT_EQ(plain.q.bytes(), 5 * 32 * sizeof(float));
  EXPECT_EQ(plain.k.bytes(), 5 * 16 * sizeof(float));
  EXPECT_EQ(plain.xa.data(), nullptr);
  EXPECT_EQ(plain.pos_row.data(), nullptr);
  EXPECT_EQ(plain.masked.data(), nullptr);
  EXPECT_EQ(plain.input_idx.data(), nullptr);
  EXPECT_EQ(plain.attention().masked, nullptr);

  c.block.parallel = true;
  c.block.learned_positions = true;
  const ForwardBuffers full(c, attn, 5, 2, true, 3);
  EXPECT_EQ(full.xa.bytes(), 5 * 24 * sizeof(float));
  EXPECT_EQ(full.pos_row.bytes(), 24 * sizeof(float));
  EXPECT_EQ(full.masked.bytes(), 5 * 24 * sizeof(float));
  EXPECT_EQ(full.input_idx.bytes(), 3 * 32 * sizeof(int32_t));
  EXPECT_EQ(full.input_counts.bytes(), 3 * sizeof(int64_t));
  const AttentionScratch s = full.attention();
  EXPECT_EQ(s.xn, full.xn.f32());
  EXPECT_EQ(s.out, full.attn_out.f32());
  EXPECT_EQ(s.compact, full.input_values.f32());
}

}  // namespace
}  // namespace hearth
