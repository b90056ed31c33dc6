// Model::Impl::hold_row_groups (model_impl.h): matrices of the types that have row groups
// (backend/cpu/kernels/row_groups.h) rewritten as them, in the file's bytes where the file was
// read into memory: those every session reads whole, and on a dense model every one.
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels/row_groups.h"
#include "model/model_impl.h"

namespace hearth {
namespace {

// A matrix to rewrite, and the views of its rows that follow it (a fused projection's parts).
struct Target {
  Matrix* m;
  std::vector<Matrix*> views;
};

}  // namespace

bool Model::Impl::hold_row_groups(RowGroups which) {
  // A device takes rows of the file's layout.
  if (device || which == RowGroups::None) return false;
  // Sparse sessions read single rows of the FFN (gathered up and gate, neuron-major copies of
  // down): its matrices only where every session runs dense.
  const bool ffn = which == RowGroups::All && auto_sparse_mode() == SparseMode::Dense;
  // Thresholds on attention's inputs read input-major copies made from its rows, unless every
  // session runs dense.
  const bool attention =
      ffn || std::none_of(config.thresholds.begin(), config.thresholds.end(),
                          [](const LayerThresholds& t) { return t.attn_in > 0 || t.attn_out > 0; });
  // The types whose groups pay at this CPU's level: the ones its kernel table has them for.
  const cpu::Kernels kernels = cpu::select_kernels(cpu::detect_isa());
  const auto groupable = [&](const Matrix& m) {
    return m.present() && !m.input_major && kernels.weights(m.type).to_row_group &&
           kernels.weights(m.type).gemm_row_groups && m.rows % cpu::kGroupRows == 0 &&
           file->contains(m.data, m.bytes());
  };
  const auto whole_groups = [](std::initializer_list<Matrix*> views) {
    for (const Matrix* v : views) {
      if (v->present() && v->rows % cpu::kGroupRows != 0) return false;
    }
    return true;
  };
  std::vector<Target> targets;
  const auto add = [&](Matrix& m, std::vector<Matrix*> views = {}) {
    if (groupable(m)) targets.push_back({&m, std::move(views)});
  };
  // A fused projection as one matrix with its parts as views (where they are whole groups), else
  // each part on its own.
  const auto add_parts = [&](Matrix& fused, std::initializer_list<Matrix*> parts) {
    if (!fused.present()) {
      for (Matrix* m : parts) add(*m);
    } else if (whole_groups(parts)) {
      add(fused, parts);
    }
  };
  for (LayerWeights& l : weights.layers) {
    if (attention) {
      add_parts(l.wqkv, {&l.wq, &l.wk, &l.wv});
      add(l.wo);
    }
    if (ffn) {
      add_parts(l.ffn_gate_up, {&l.ffn_gate, &l.ffn_up});
      add(l.ffn_down);
    }
  }
  // A tied output head is the embedding table, whose rows the embedding lookup reads.
  if (weights.output.data != weights.token_embd.data) add(weights.output);
  if (targets.empty()) return false;

  // `image`: the writable file image, where the file was read into memory (each group then
  // replaces its 16 rows), else null (a mapped file: the groups go to buffers of their own and
  // the mapped pages are released).
  const auto rewrite = [&](uint8_t* image) {
    std::vector<uint8_t> rows;
    for (const Target& t : targets) {
      Matrix& m = *t.m;
      const auto ldw = static_cast<size_t>(row_bytes(m.type, m.cols));
      const size_t group_bytes = cpu::kGroupRows * ldw;
      const auto* from = static_cast<const uint8_t*>(m.data);
      uint8_t* to = nullptr;
      if (image) {
        to = image + (from - file->image());
      } else {
        grouped.emplace_back(m.bytes());
        to = grouped.back().data();
      }
      rows.resize(group_bytes);
      const auto to_group = kernels.weights(m.type).to_row_group;
      for (int64_t g = 0; g < m.rows / cpu::kGroupRows; ++g) {
        std::memcpy(rows.data(), from + g * group_bytes, group_bytes);
        to_group(m.cols, rows.data(), ldw, to + g * group_bytes);
      }
      if (!image) file->release(m.data, m.bytes());
      // Views keep their offsets into the matrix (whole groups), moved with it.
      for (Matrix* v : t.views) {
        v->data = to + (static_cast<const uint8_t*>(v->data) - from);
        v->row_groups = true;
      }
      m.data = to;
      m.row_groups = true;
    }
  };
  if (!file->edit_in_place(file->image(), file->file_size(), rewrite)) rewrite(nullptr);
  ffn_row_groups = ffn;
  return true;
}

}  // namespace hearth
