#include "calib/residual_rotation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "backend/cpu/context.h"
#include "calib/sparse_axes.h"
#include "calib/symmetric_eigen.h"
#include "calib/windows.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quantize.h"
#include "gguf/gguf.h"
#include "hearth/session.h"
#include "model/model_internals.h"
#include "ops/matmul.h"
#include "sparse/calib_report_charts.h"

namespace hearth::calib {
namespace {

// The tensor `name` of f as floats, [rows, ne0] row-major.
std::vector<float> tensor_floats(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail("the model has no tensor ", name);
  const auto type = static_cast<DType>(t->type);
  const int64_t cols = t->ne[0], rows = t->n_elements() / cols;
  const int64_t stride = row_bytes(type, cols);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(type, t->data + r * stride, out.data() + r * cols, cols);
  }
  return out;
}

std::string layer_tensor(int64_t il, const char* name) {
  return "blk." + std::to_string(il) + "." + name;
}

// What the rotation does to a tensor, by its name.
struct Role {
  enum Kind {
    Keep,     // not in the residual stream's basis
    Rows,     // rows are vectors of the stream (readers, embeddings): r -> Q^T (g . r)
    Columns,  // columns are (writers: wo, down): W -> Q^T W
    Ones,     // a norm's weight, folded into its readers
  } kind = Keep;
  std::string norm;  // Rows: the norm whose weight g folds in ("": none)
};

// "blk.N.SUFFIX" -> SUFFIX, or "" for a tensor outside the blocks.
std::string block_suffix(const std::string& name, int64_t* il) {
  if (name.rfind("blk.", 0) != 0) return "";
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return "";
  *il = std::stoll(name.substr(4, dot - 4));
  return name.substr(dot + 1);
}

Role role_of(const std::string& name) {
  if (name == "token_embd.weight") return {Role::Rows, ""};
  if (name == "output.weight") return {Role::Rows, "output_norm.weight"};
  if (name == "output_norm.weight") return {Role::Ones, ""};
  int64_t il = 0;
  const std::string s = block_suffix(name, &il);
  if (s == "attn_norm.weight" || s == "ffn_norm.weight") return {Role::Ones, ""};
  if (s == "attn_q.weight" || s == "attn_k.weight" || s == "attn_v.weight" ||
      s == "attn_qkv.weight") {
    return {Role::Rows, layer_tensor(il, "attn_norm.weight")};
  }
  if (s == "ffn_gate.weight" || s == "ffn_up.weight") {
    return {Role::Rows, layer_tensor(il, "ffn_norm.weight")};
  }
  // ffn_down_t holds down's columns as rows; the writers' biases are one such row.
  if (s == "ffn_down_t.weight" || s == "attn_output.bias" || s == "ffn_down.bias" ||
      s == "ffn_down_t.bias") {
    return {Role::Rows, ""};
  }
  if (s == "attn_output.weight" || s == "ffn_down.weight") return {Role::Columns, ""};
  return {};
}

// Sums x x^T of the normed residual, x / g, over the inputs of every layer's first attention
// and FFN product (the readers of attn_norm's and ffn_norm's output).
class SecondMoment : public MatmulObserver {
 public:
  // Keeps every `stride`-th normed vector seen (0: none) as a sample.
  SecondMoment(const gguf::GgufFile& f, const ModelConfig& c, int n_threads, int64_t stride)
      : n_(c.n_embd), stride_(stride), sum_(static_cast<size_t>(n_ * n_), 0.0), ctx_(n_threads) {
    const BlockRecipe& b = c.block;
    for (int64_t il = 0; il < c.n_layer; ++il) {
      const std::vector<float> ga = tensor_floats(f, layer_tensor(il, "attn_norm.weight"));
      const std::vector<float> gf = tensor_floats(f, layer_tensor(il, "ffn_norm.weight"));
      gains_[layer_tensor(il, b.fused_qkv ? "attn_qkv.weight" : "attn_q.weight")] = ga;
      gains_[layer_tensor(il, "ffn_up.weight")] = gf;
    }
  }

  void observe(const std::string& name, int64_t n, const float* x, int64_t cols) override {
    const auto it = gains_.find(name);
    if (it == gains_.end() || cols != n_ || n <= 0) return;
    const std::vector<float>& g = it->second;
    // xt[n_, n]: the normed rows, transposed, so that one product gives x^T x.
    xt_.resize(static_cast<size_t>(n_ * n));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < n_; ++j) {
        xt_[static_cast<size_t>(j * n + t)] = g[j] != 0.0f ? x[t * n_ + j] / g[j] : 0.0f;
      }
      if (stride_ > 0 && seen_++ % stride_ == 0) {
        for (int64_t j = 0; j < n_; ++j) samples_.push_back(xt_[static_cast<size_t>(j * n + t)]);
      }
    }
    prod_.resize(static_cast<size_t>(n_ * n_));
    matmul(ctx_, DType::F32, xt_.data(), n_, n, xt_.data(), n_, prod_.data());
    for (size_t i = 0; i < prod_.size(); ++i) sum_[i] += prod_[i];
    count_ += n;
  }

  int64_t count() const { return count_; }
  // The samples kept, [size / n, n], handed over.
  std::vector<float> take_samples() { return std::move(samples_); }
  // The mean, symmetrized (the float products of x^T x are not exactly symmetric).
  std::vector<double> mean() const {
    std::vector<double> m(sum_.size());
    const double inv = 1.0 / static_cast<double>(std::max<int64_t>(count_, 1));
    for (int64_t i = 0; i < n_; ++i) {
      for (int64_t j = 0; j < n_; ++j) {
        m[static_cast<size_t>(i * n_ + j)] =
            0.5 * (sum_[static_cast<size_t>(i * n_ + j)] + sum_[static_cast<size_t>(j * n_ + i)]) *
            inv;
      }
    }
    return m;
  }

 private:
  int64_t n_, stride_;
  std::vector<double> sum_;
  int64_t count_ = 0, seen_ = 0;
  std::vector<float> samples_;
  std::map<std::string, std::vector<float>> gains_;
  std::vector<float> xt_, prod_;
  cpu::CpuContext ctx_;
};

// Rotates rows of the stream: rows[m, n] -> rows . Q (each row r becomes Q^T r), after scaling
// the columns by g when given.
class RowRotator {
 public:
  RowRotator(const ResidualRotation& r, int n_threads) : n_(r.n), ctx_(n_threads) {
    qt_.resize(static_cast<size_t>(n_ * n_));
    for (int64_t i = 0; i < n_; ++i) {
      for (int64_t k = 0; k < n_; ++k) {
        qt_[static_cast<size_t>(i * n_ + k)] =
            static_cast<float>(r.q[static_cast<size_t>(k * n_ + i)]);
      }
    }
  }
  void rotate(std::vector<float>& rows, const std::vector<float>* g) {
    const int64_t m = static_cast<int64_t>(rows.size()) / n_;
    if (g != nullptr) {
      for (int64_t t = 0; t < m; ++t) {
        for (int64_t k = 0; k < n_; ++k) rows[static_cast<size_t>(t * n_ + k)] *= (*g)[k];
      }
    }
    out_.resize(rows.size());
    // out[m, n] = rows[m, n] . (Q^T)^T
    matmul(ctx_, DType::F32, qt_.data(), n_, n_, rows.data(), m, out_.data());
    rows.swap(out_);
  }
  // w[n, cols] (rows in the stream's basis) -> Q^T w, as Q^T's rows times w's columns.
  void rotate_columns(std::vector<float>& w, int64_t cols) {
    std::vector<float> wt(w.size());  // [cols, n]
    for (int64_t r = 0; r < n_; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        wt[static_cast<size_t>(c * n_ + r)] = w[static_cast<size_t>(r * cols + c)];
      }
    }
    // w[n, cols] = Q^T[n, n] . (wt[cols, n])^T
    matmul(ctx_, DType::F32, wt.data(), cols, n_, qt_.data(), n_, w.data());
  }

 private:
  int64_t n_;
  std::vector<float> qt_, out_;
  cpu::CpuContext ctx_;
};

void store(DType type, const std::vector<float>& values, int64_t cols, uint8_t* dst) {
  quantize_rows(type, values.data(), dst, static_cast<int64_t>(values.size()) / cols, cols);
}

}  // namespace

std::string rotation_blocker(const Model& model) {
  const ModelConfig& c = model.config();
  const BlockRecipe& b = c.block;
  if (c.norm != NormType::Rms) return "its norms are LayerNorms, whose mean does not rotate";
  if (b.parallel) return "its attention and FFN share one norm's output (parallel blocks)";
  if (b.post_norms) return "it normalizes each half's output before the residual add";
  if (b.learned_positions) return "it adds learned position embeddings";
  for (const gguf::TensorInfo& t : model_file(model).tensors()) {
    int64_t il = 0;
    if (block_suffix(t.name, &il) == "fc1.weight") return "its predictors read the residual stream";
  }
  return "";
}

bool already_rotated(const Model& model) {
  return model_file(model).get_bool("hearth.residual_rotation").value_or(false);
}

bool rotation_rounds_finely(const Model& model) {
  for (const gguf::TensorInfo& t : model_file(model).tensors()) {
    const auto type = static_cast<DType>(t.type);
    if (role_of(t.name).kind != Role::Keep && dtype_block_size(type) > 1 && type != DType::Q8_0) {
      return false;
    }
  }
  return true;
}

namespace {

// The principal axes over `tokens`, and with max_samples > 0 up to that many of the normed
// vectors they come from, spread evenly over the tokens and layers.
ResidualRotation axes_and_samples(const std::shared_ptr<const Model>& model,
                                  std::span<const int32_t> tokens, int64_t window, int n_threads,
                                  const std::function<void(const std::string&)>& log,
                                  int64_t max_samples, std::vector<float>* samples) {
  const std::string blocker = rotation_blocker(*model);
  if (!blocker.empty()) fail("the residual stream cannot be rotated: ", blocker);
  const ModelConfig& c = model->config();
  const int64_t vectors = static_cast<int64_t>(tokens.size()) * 2 * c.n_layer;
  const int64_t stride =
      max_samples > 0 ? std::max<int64_t>(1, (vectors + max_samples - 1) / max_samples) : 0;
  SecondMoment moment(model_file(*model), c, n_threads, stride);
  SessionOptions so;
  so.n_threads = n_threads;
  so.sparse = SparseMode::Dense;
  so.matmul_observer = &moment;
  run_windows(model, tokens, so, window, log, "rotation");
  if (moment.count() == 0) fail("no residual inputs were seen to find the rotation from");
  SymmetricEigen e = symmetric_eigen(moment.mean(), c.n_embd);
  ResidualRotation r;
  r.n = c.n_embd;
  r.q = std::move(e.vectors);
  r.variance = std::move(e.values);
  if (samples != nullptr) *samples = moment.take_samples();
  return r;
}

}  // namespace

ResidualRotation principal_axes(const std::shared_ptr<const Model>& model,
                                std::span<const int32_t> tokens, int64_t window, int n_threads,
                                const std::function<void(const std::string&)>& log) {
  return axes_and_samples(model, tokens, window, n_threads, log, 0, nullptr);
}

ResidualRotation sparse_axes(const std::shared_ptr<const Model>& model,
                             std::span<const int32_t> tokens, int64_t window, int n_threads,
                             double skipped, int64_t steps,
                             const std::function<void(const std::string&)>& log) {
  std::vector<float> h;
  const int64_t n = model->config().n_embd;
  ResidualRotation r =
      axes_and_samples(model, tokens, window, n_threads, log,
                       std::clamp<int64_t>(kSparseAxesValues / n, 1, kSparseAxesVectors), &h);
  const int64_t m = static_cast<int64_t>(h.size()) / n;
  const auto start = std::chrono::steady_clock::now();
  const auto progress = [&](int64_t step, double lost) {
    if (log && step % std::max<int64_t>(1, steps / 10) == 0) {
      log(str_cat("rotation: step ", step, "/", steps, ", ", sparse::calib::percent(lost, 2),
                  " of the energy dropped"));
    }
  };
  const SparseAxesReport rep =
      refine_sparse_axes(r.q, n, h, m, skipped, steps, n_threads, progress);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.variance = rep.variance;
  if (log) {
    log(str_cat("rotation: axes refined for ", static_cast<int>(std::lround(100 * skipped)),
                "% of each input skipped, on ", m, " samples in ", rep.steps, " steps (",
                static_cast<int>(std::lround(seconds)), " s): a token's smallest elements hold ",
                sparse::calib::percent(rep.lost_before, 2),
                " of its energy in the principal axes, ", sparse::calib::percent(rep.lost_after, 2),
                " in these"));
  }
  return r;
}

RotatedModelReport write_rotated_model(const Model& model, const ResidualRotation& r,
                                       const std::string& path, int n_threads) {
  const gguf::GgufFile& in = model_file(model);
  const ModelConfig& c = model.config();
  if (r.n != c.n_embd) fail("a rotation of ", r.n, " axes for a stream of ", c.n_embd);
  gguf::GgufWriter w;
  for (const auto& [key, value] : in.metadata()) w.copy_value(key, value);
  w.set_bool("hearth.residual_rotation", true);
  w.set_magic_powerinfer(in.is_powerinfer());
  RowRotator rot(r, n_threads);
  RotatedModelReport report;
  auto add = [&](const gguf::TensorInfo& t, const std::string& name, Role role) {
    const auto type = static_cast<DType>(t.type);
    if (role.kind == Role::Keep) {
      w.add_tensor(name, t.type, std::span<const int64_t>(t.ne, static_cast<size_t>(t.n_dims)),
                   t.data, t.nbytes);
      return;
    }
    ++report.rotated;
    if (dtype_block_size(type) > 1) ++report.requantized;
    const uint64_t bytes =
        static_cast<uint64_t>(row_bytes(type, t.ne[0]) * (t.n_elements() / t.ne[0]));
    w.add_tensor_lazy(name, t.type, std::span<const int64_t>(t.ne, static_cast<size_t>(t.n_dims)),
                      bytes, [&in, &rot, &t, role, type](uint8_t* dst) {
                        std::vector<float> v = tensor_floats(in, t.name);
                        if (role.kind == Role::Ones) {
                          std::fill(v.begin(), v.end(), 1.0f);
                        } else if (role.kind == Role::Columns) {
                          rot.rotate_columns(v, t.ne[0]);
                        } else {
                          const std::vector<float> g = role.norm.empty()
                                                           ? std::vector<float>{}
                                                           : tensor_floats(in, role.norm);
                          rot.rotate(v, g.empty() ? nullptr : &g);
                        }
                        store(type, v, t.ne[0], dst);
                      });
  };
  for (const gguf::TensorInfo& t : in.tensors()) {
    const Role role = role_of(t.name);
    if (role.kind == Role::Rows && t.ne[0] != c.n_embd) {
      fail("tensor ", t.name, " has rows of ", t.ne[0], ", not the stream's ", c.n_embd);
    }
    add(t, t.name, role);
  }
  if (in.find_tensor("output.weight") == nullptr) {
    // Tied: the head reads the embeddings' rows with the output norm folded in.
    const gguf::TensorInfo* e = in.find_tensor("token_embd.weight");
    if (e == nullptr) fail("the model has no token_embd.weight");
    add(*e, "output.weight", {Role::Rows, "output_norm.weight"});
  }
  w.write(path);
  return report;
}

RotatedModelReport rotate_for_calibration(const std::shared_ptr<const Model>& model,
                                          const CalibrateOptions& o, const std::string& path) {
  std::vector<int32_t> tokens = training_tokens(*model, o);
  tokens.resize(std::min(tokens.size(), kRotationTokens));
  const bool refine = o.rotation_steps > 0 && o.sparsity > 0 && o.sparsity < 1;
  const ResidualRotation r =
      refine
          ? sparse_axes(model, tokens, o.window, o.n_threads,
                        std::min(o.sparsity + kSparseAxesExtraShare, 0.95), o.rotation_steps, o.log)
          : principal_axes(model, tokens, o.window, o.n_threads, o.log);
  double total = 0, top = 0;
  for (double v : r.variance) total += v;
  const size_t tenth = std::max<size_t>(1, r.variance.size() / 10);
  for (size_t i = 0; i < tenth; ++i) top += r.variance[i];
  const RotatedModelReport rep = write_rotated_model(*model, r, path, o.n_threads);
  if (o.log) {
    o.log(str_cat("rotation: the residual stream in ",
                  refine ? "its sparse axes" : "its principal axes", " (the first ", tenth, " of ",
                  r.n, " hold ", static_cast<int>(100 * top / std::max(total, 1e-300) + 0.5),
                  "% of its mean square); ", rep.rotated, " tensors rotated",
                  rep.requantized > 0
                      ? str_cat(", ", rep.requantized, " of them quantized again in their own type")
                      : std::string()));
  }
  return rep;
}

}  // namespace hearth::calib
