#include "model/kv_cache.h"

#include "core/error.h"

namespace hearth {

KvCache::KvCache(const AttentionParams& attn, int32_t n_seq, const std::vector<bool>& host_layer)
    : n_ctx_(static_cast<int32_t>(attn.n_ctx)),
      seq_bytes_(kv_cache_bytes(attn)),
      n_past_(static_cast<size_t>(n_seq), 0) {
  const size_t bytes = seq_bytes_ * static_cast<size_t>(n_seq);
  for (const bool here : host_layer) {
    k_.push_back(here ? AlignedBuffer(bytes) : AlignedBuffer());
    v_.push_back(here ? AlignedBuffer(bytes) : AlignedBuffer());
  }
}

void KvCache::check_seq(int32_t seq) const {
  if (seq < 0 || seq >= n_seq()) fail("sequence ", seq, " is out of range [0, ", n_seq(), ")");
}

void KvCache::check_room(int32_t seq, size_t n) const {
  const int32_t past = n_past(seq);
  if (n > static_cast<size_t>(n_ctx_ - past)) {
    fail("cannot evaluate ", n, " tokens", n_seq() > 1 ? str_cat(" in sequence ", seq) : "",
         ": the context holds ", past, " of ", n_ctx_, " tokens");
  }
}

int32_t KvCache::n_past(int32_t seq) const {
  check_seq(seq);
  return n_past_[static_cast<size_t>(seq)];
}

void KvCache::truncate(int32_t seq, int32_t n) {
  const int32_t past = n_past(seq);
  if (n < 0 || n > past)
    fail("cannot truncate sequence ", seq, " to ", n, " tokens: it holds ", past);
  n_past_[static_cast<size_t>(seq)] = n;
}

void* KvCache::at(const AlignedBuffer& layer, int32_t seq) const {
  if (!layer.data()) return nullptr;
  return static_cast<char*>(layer.data()) + static_cast<size_t>(seq) * seq_bytes_;
}

}  // namespace hearth
