#include "ops/attention_block.h"

#include <algorithm>

#include "ops/input_sparse.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/sparse_matmul.h"
#include "ops/vec.h"

namespace hearth {

AttentionParams attention_params(const ModelConfig& c, int64_t n_ctx, KvType kv_type) {
  AttentionParams a;
  a.n_head = static_cast<int>(c.n_head);
  a.n_head_kv = static_cast<int>(c.n_head_kv);
  a.head_dim = static_cast<int>(c.head_dim);
  a.n_ctx = n_ctx;
  a.kv_type = kv_type == KvType::F16 ? DType::F16 : DType::F32;
  a.window = c.n_swa;
  a.scale = c.attn_scale;
  a.softcap = c.attn_softcap;
  // Decode steps read each KV head's rows as a stream.
  a.head_major = true;
  return a;
}

namespace {

// The model's rotated dimensions and pair style at `base`, unscaled.
RopeParams plain_rope(const ModelConfig& c, float base) {
  RopeParams rp;
  rp.n_rot = static_cast<int>(c.n_rot);
  rp.freq_base = base;
  rp.style = c.rope_type == RopeType::Neox ? RopeStyle::Neox : RopeStyle::Normal;
  return rp;
}

}  // namespace

RopeParams sliding_rope_params(const ModelConfig& c) { return plain_rope(c, c.rope_freq_base_swa); }

AttentionParams layer_attention(const AttentionParams& a, const ModelConfig& c, int64_t il) {
  AttentionParams l = a;
  l.window = c.layer_window(il);
  return l;
}

RopeParams rope_params(const ModelConfig& c, int64_t n_ctx) {
  RopeParams rp = plain_rope(c, c.rope_freq_base);
  rp.freq_scale = c.rope_freq_scale;
  rp.freq_factors = c.rope_freq_factors;
  // LongRoPE: the long factors where the context goes past the original one (as llama.cpp).
  if (!c.rope_factors_long.empty()) {
    rp.freq_factors = n_ctx > c.rope_n_ctx_orig ? c.rope_factors_long : c.rope_factors_short;
  }
  rp.attn_factor = c.rope_attn_factor;
  rp.ext_factor = c.rope_ext_factor;
  if (rp.ext_factor != 0.0f) {
    yarn_corr_dims(rp.n_rot, c.rope_n_ctx_orig, rp.freq_base, c.rope_yarn_beta_fast,
                   c.rope_yarn_beta_slow, &rp.corr_low, &rp.corr_high);
  }
  return rp;
}

int64_t default_context(const ModelConfig& c) {
  // Like llama.cpp: a 128K-token model would otherwise take gigabytes of KV cache for a short chat.
  return std::min<int64_t>(c.n_ctx_train, 4096);
}

void block_norm(cpu::CpuContext& ctx, const ModelConfig& c, const float* x, const float* w,
                const float* b, int64_t n, float* y) {
  if (c.norm == NormType::Layer) {
    layer_norm_rows(ctx, x, w, b, c.norm_eps, n, c.n_embd, y);
  } else {
    rms_norm_rows(ctx, x, w, c.norm_eps, n, c.n_embd, y);
  }
}

namespace {

// Zeroes the small elements of x[n, cols] in the sparse chunks' rows and counts the weights they
// skip (each element of a row multiplies `fan_out` weights). At threshold 0 x is not touched, but
// the weights still count: the share skipped is of all the layer's projection weights. Without
// stats to count into and a threshold, nothing happens.
void mask_sparse_rows(std::span<const AttentionChunk> chunks, float* x, int64_t cols,
                      float threshold, int64_t fan_out, const AttentionThresholds& th) {
  for (const AttentionChunk& ch : chunks) {
    if (!ch.sparse) continue;
    const int64_t elements = ch.n * cols;
    const int64_t kept =
        threshold > 0.0f ? mask_below(x + ch.row0 * cols, elements, threshold) : elements;
    if (th.stats) {
      th.stats->count_inputs(th.layer, static_cast<uint64_t>(elements * fan_out),
                             static_cast<uint64_t>((elements - kept) * fan_out));
    }
  }
}

// y[n, m.rows] = x · m^T for x whose small elements were zeroed, through the input-major copy
// m_t, from x's non-zero elements compacted into s.idx / s.compact / s.counts (k inputs non-zero
// in some row; row stride m_t.rows). The rows it does not read (m_t.rows - k) come off the
// pass's count.
void input_sparse_product(cpu::CpuContext& ctx, const Matrix& m, const Matrix& m_t,
                          const AttentionScratch& s, int64_t k, int64_t n, float* y,
                          const AttentionThresholds& th) {
  input_major_product(ctx, m, m_t, SparseInputs{s.idx, s.compact, m_t.rows, s.counts}, n, y);
  if (th.stats) {
    th.stats->weight_bytes -= static_cast<uint64_t>(m_t.rows - k) * row_bytes(m_t.type, m_t.cols);
  }
}

// The pass's rows in runs whose products are taken alike, in row order: f(row0, rows, sparse)
// for each run of consecutive chunks that are all sparse or all not, the sparse ones in pieces of
// at most copy_rows rows (what the input-major copies' scratch holds). copy_rows 0 (no copies):
// one run of all n rows, whose products need not tell the chunks apart.
template <typename F>
void for_each_run(std::span<const AttentionChunk> chunks, int64_t n, int64_t copy_rows, F&& f) {
  if (copy_rows == 0) {
    f(int64_t{0}, n, false);
    return;
  }
  for (size_t c = 0; c < chunks.size();) {
    const bool sparse = chunks[c].sparse;
    const int64_t row0 = chunks[c].row0;
    int64_t rows = 0;
    while (c < chunks.size() && chunks[c].sparse == sparse) rows += chunks[c++].n;
    const int64_t piece = sparse ? copy_rows : rows;
    for (int64_t r = 0; r < rows; r += piece) f(row0 + r, std::min(piece, rows - r), sparse);
  }
}

// q, k and v (into rows r0.. of s.q, s.k, s.v) of the zeroed input a[n, n_embd] through the
// layer's input-major copies, where this batch reads them (input_sparse_reads_copy): the joint
// copy in one product whose rows [q | k | v] are then dealt out, or the three copies. False where
// the batch takes the file's matrices instead.
bool qkv_through_copies(cpu::CpuContext& ctx, const ModelConfig& c, const LayerWeights& l,
                        const InputMajorLayer& im, const AttentionScratch& s, int64_t r0,
                        const float* a, int64_t n, const AttentionThresholds& th) {
  const bool joint = im.wqkv_t.present();
  if (joint ? !input_sparse_reads_copy(l.wq, im.wqkv_t, n)
            : !(im.wq_t.present() && im.wk_t.present() && im.wv_t.present() &&
                input_sparse_reads_copy(l.wq, im.wq_t, n))) {
    return false;
  }
  const int64_t k = compact_rows(a, n, c.n_embd, s.idx, s.compact, s.counts);
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_embd_kv();
  float* const q = s.q + r0 * q_dim;
  float* const kk = s.k + r0 * kv_dim;
  float* const v = s.v + r0 * kv_dim;
  if (!joint) {
    input_sparse_product(ctx, l.wq, im.wq_t, s, k, n, q, th);
    input_sparse_product(ctx, l.wk, im.wk_t, s, k, n, kk, th);
    input_sparse_product(ctx, l.wv, im.wv_t, s, k, n, v, th);
    return true;
  }
  input_sparse_product(ctx, l.wq, im.wqkv_t, s, k, n, s.qkv, th);
  for (int64_t t = 0; t < n; ++t) {
    const float* row = s.qkv + t * (q_dim + 2 * kv_dim);
    std::copy_n(row, q_dim, q + t * q_dim);
    std::copy_n(row + q_dim, kv_dim, kk + t * kv_dim);
    std::copy_n(row + q_dim + kv_dim, kv_dim, v + t * kv_dim);
  }
  return true;
}

}  // namespace

void attention_block(cpu::CpuContext& ctx, const ModelConfig& c, const AttentionParams& attn,
                     const RopeTable& rope, const LayerWeights& l,
                     std::span<const AttentionChunk> chunks, const AttentionScratch& s,
                     const float* a, int64_t n, float* out, const AttentionThresholds& th) {
  const cpu::Isa isa = ctx.isa();
  const int n_head = static_cast<int>(c.n_head), head_dim = static_cast<int>(c.head_dim);
  const int n_head_kv = static_cast<int>(c.n_head_kv);
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_embd_kv();
  if (th.qkv > 0.0f) {
    std::copy_n(a, n * c.n_embd, s.masked);  // a may be the parallel FFN's input too
    a = s.masked;
  }
  mask_sparse_rows(chunks, s.masked, c.n_embd, th.qkv, q_dim + 2 * kv_dim, th);
  // The sparse chunks' rows read the copies and the others the file's matrices, run by run, so
  // that each row gets what it gets in a pass of its own kind.
  const InputMajorLayer* im = th.input_major;
  const int64_t copy_rows = im ? s.copy_rows : 0;
  for_each_run(chunks, n, copy_rows, [&](int64_t r0, int64_t rn, bool sparse) {
    const float* ar = a + r0 * c.n_embd;
    if (sparse && th.qkv > 0.0f && qkv_through_copies(ctx, c, l, *im, s, r0, ar, rn, th)) return;
    linear_shared(
        ctx, {{&l.wq, s.q + r0 * q_dim}, {&l.wk, s.k + r0 * kv_dim}, {&l.wv, s.v + r0 * kv_dim}},
        ar, rn);
  });
  add_bias(isa, s.q, l.bq, n, q_dim);
  add_bias(isa, s.k, l.bk, n, kv_dim);
  add_bias(isa, s.v, l.bv, n, kv_dim);
  // Per-head norms: rows of head_dim, in place.
  const float eps = c.norm_eps;
  if (l.attn_q_norm) rms_norm_rows(ctx, s.q, l.attn_q_norm, eps, n * n_head, head_dim, s.q);
  if (l.attn_k_norm) rms_norm_rows(ctx, s.k, l.attn_k_norm, eps, n * n_head_kv, head_dim, s.k);
  const bool rotate = c.rope_type != RopeType::None;
  for (const AttentionChunk& ch : chunks) {
    float* const qc = s.q + ch.row0 * q_dim;
    float* const kc = s.k + ch.row0 * kv_dim;
    if (rotate) {
      rope.apply(qc, ch.n, n_head, head_dim, ch.pos0);
      rope.apply(kc, ch.n, n_head_kv, head_dim, ch.pos0);
    }
    kv_store(isa, attn, kc, 0, ch.pos0, ch.n, ch.k_cache);
    kv_store(isa, attn, s.v + ch.row0 * kv_dim, 0, ch.pos0, ch.n, ch.v_cache);
    attention(ctx, attn, qc, ch.k_cache, ch.v_cache, ch.pos0, ch.n, s.att + ch.row0 * q_dim,
              s.workspace);
  }
  mask_sparse_rows(chunks, s.att, q_dim, th.wo, c.n_embd, th);
  for_each_run(chunks, n, copy_rows, [&](int64_t r0, int64_t rn, bool sparse) {
    const float* att = s.att + r0 * q_dim;
    float* const y = out + r0 * c.n_embd;
    if (sparse && th.wo > 0.0f && im->wo_t.present() &&
        input_sparse_reads_copy(l.wo, im->wo_t, rn)) {
      const int64_t k = compact_rows(att, rn, q_dim, s.idx, s.compact, s.counts);
      input_sparse_product(ctx, l.wo, im->wo_t, s, k, rn, y, th);
    } else {
      linear(ctx, l.wo, att, rn, y);
    }
  });
  add_bias(isa, out, l.bo, n, c.n_embd);
}

void attention_residual(cpu::CpuContext& ctx, const ModelConfig& c, const AttentionParams& attn,
                        const RopeTable& rope, const LayerWeights& l,
                        std::span<const AttentionChunk> chunks, const AttentionScratch& s, float* x,
                        int64_t n, const AttentionThresholds& th) {
  block_norm(ctx, c, x, l.attn_norm, l.attn_norm_b, n, s.xn);
  attention_block(ctx, c, attn, rope, l, chunks, s, s.xn, n, s.out, th);
  if (l.attn_post_norm) block_norm(ctx, c, s.out, l.attn_post_norm, nullptr, n, s.out);
  vec_add(ctx.isa(), x, s.out, n * c.n_embd);
}

}  // namespace hearth
