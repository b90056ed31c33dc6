// Calibrated model files: the input model's metadata and tensors, plus what calibration made.
// The keys and tensors are documented in docs/formats.md ("Calibration").
#include <cmath>
#include <string>

#include "calib/calibrate.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/model_internals.h"

namespace hearth::calib {
namespace {

constexpr const char* kStatsPrefix = "hearth.calibration.";

std::string blk(int64_t il, const char* name) {
  return "blk." + std::to_string(il) + "." + name;
}

bool is_calibration_key(const std::string& k) {
  if (k.rfind(kStatsPrefix, 0) == 0 || k == "hearth.predictor_thresholds") return true;
  for (const ThresholdKey& t : kThresholdKeys) {
    if (k == t.key) return true;
  }
  return false;
}

// The thresholds' keys: each that some layer uses (its field non-zero somewhere).
void write_thresholds(gguf::GgufWriter& w, const std::vector<LayerThresholds>& thresholds) {
  for (const ThresholdKey& k : kThresholdKeys) {
    std::vector<float> v;
    bool used = false;
    for (const LayerThresholds& t : thresholds) {
      v.push_back(t.*k.field);
      used = used || t.*k.field != 0.0f;
    }
    if (used) w.set_f32_array(k.key, v);
  }
}

// Tensors calibration replaces: predictors (when it writes new ones) and statistics.
bool replaced_tensor(const std::string& name, bool new_predictors) {
  const auto ends = [&](const char* s) {
    const std::string suffix = s;
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (name.rfind("blk.", 0) != 0) return false;
  if (ends(".ffn_act_freq") || ends(".calib_x") || ends(".calib_fired") || ends(".heldout_x") ||
      ends(".heldout_fired")) {
    return true;
  }
  return new_predictors && (ends(".fc1.weight") || ends(".fc2.weight"));
}

std::vector<float> layer_values(const sparse::CalibReport& r, double sparse::CalibLayerReport::*f) {
  std::vector<float> v;
  for (const auto& l : r.layers) v.push_back(static_cast<float>(l.*f));
  return v;
}

// Owns the f16 copies of the predictors until the writer has written them.
struct F16Store {
  std::vector<std::vector<uint16_t>> blobs;
  const uint16_t* add(const std::vector<float>& values) {
    auto& b = blobs.emplace_back(values.size());
    for (size_t i = 0; i < values.size(); ++i) b[i] = fp32_to_fp16(values[i]);
    return b.data();
  }
};

constexpr uint32_t kI8 = 24;  // ggml's GGML_TYPE_I8

// The samples of one layer as two tensors: x [S, n_embd] F32 (kept exact, so training from a
// saved profile gives the bits of a one-shot run) and the fired mask [S, n_ff] I8.
void add_samples(gguf::GgufWriter& w, int64_t il, const char* name,
                 const sparse::PredictorSamples& s) {
  const int64_t n = s.size();
  const int64_t ne_x[2] = {s.n_embd, n}, ne_f[2] = {s.n_ff, n};
  w.add_tensor(blk(il, (std::string(name) + "_x").c_str()), static_cast<uint32_t>(DType::F32),
               ne_x, s.x.data(), s.x.size() * sizeof(float));
  w.add_tensor(blk(il, (std::string(name) + "_fired").c_str()), kI8, ne_f, s.fired.data(),
               s.fired.size());
}

sparse::PredictorSamples read_samples(const gguf::GgufFile& f, const ModelConfig& c, int64_t il,
                                      const char* name) {
  const std::string xn = blk(il, (std::string(name) + "_x").c_str());
  const std::string fn = blk(il, (std::string(name) + "_fired").c_str());
  const gguf::TensorInfo* x = f.find_tensor(xn);
  const gguf::TensorInfo* fired = f.find_tensor(fn);
  if (!x || !fired) fail(f.path(), ": no saved profile (", xn, "); make one with --stage profile");
  if (x->type != static_cast<uint32_t>(DType::F32) || fired->type != kI8 || x->ne[0] != c.n_embd ||
      fired->ne[0] != c.n_ff || x->ne[1] != fired->ne[1]) {
    fail(f.path(), ": ", xn, " / ", fn, " do not have the shapes of a saved profile");
  }
  sparse::PredictorSamples s;
  s.n_embd = c.n_embd;
  s.n_ff = c.n_ff;
  const auto* xp = reinterpret_cast<const float*>(x->data);
  s.x.assign(xp, xp + x->n_elements());
  s.fired.assign(fired->data, fired->data + fired->n_elements());
  for (const uint8_t v : s.fired) {
    if (v > 1) fail(f.path(), ": ", fn, " holds values other than 0 and 1");
  }
  return s;
}

std::vector<float> read_array(const gguf::GgufFile& f, const std::string& key, size_t n) {
  auto v = f.get_float_array(key);
  if (!v) return std::vector<float>(n, std::nanf(""));
  if (v->size() != n) fail(f.path(), ": metadata key '", key, "' has ", v->size(), " values for ", n, " layers");
  return *v;
}

}  // namespace

void write_calibrated_model(const Model& model, const CalibrationResult& r, const std::string& out) {
  const gguf::GgufFile& in = model_file(model);
  const ModelConfig& c = model.config();
  const bool new_predictors = !r.predictors.empty();
  gguf::GgufWriter w;
  w.set_magic_powerinfer(in.is_powerinfer());
  for (const auto& [key, value] : in.metadata()) {
    if (!is_calibration_key(key)) w.copy_value(key, value);
  }
  for (const gguf::TensorInfo& t : in.tensors()) {
    if (replaced_tensor(t.name, new_predictors)) continue;
    w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, static_cast<size_t>(t.n_dims)),
                 t.data, t.nbytes);
  }

  const sparse::CalibReport& rep = r.report;
  w.set_string(std::string(kStatsPrefix) + "kind", rep.kind);
  w.set_u64(std::string(kStatsPrefix) + "tokens", static_cast<uint64_t>(rep.tokens));
  w.set_u64(std::string(kStatsPrefix) + "heldout_tokens", static_cast<uint64_t>(r.heldout_tokens));
  if (!std::isnan(rep.target)) w.set_f32(std::string(kStatsPrefix) + "target", static_cast<float>(rep.target));
  const std::vector<float> sparsity = layer_values(rep, &sparse::CalibLayerReport::true_sparsity);
  w.set_f32_array(std::string(kStatsPrefix) + "sparsity", sparsity);
  std::vector<float> recall, precision, predicted;
  if (new_predictors) {
    recall = layer_values(rep, &sparse::CalibLayerReport::recall);
    precision = layer_values(rep, &sparse::CalibLayerReport::precision);
    predicted = layer_values(rep, &sparse::CalibLayerReport::predicted_sparsity);
    w.set_f32_array(std::string(kStatsPrefix) + "recall", recall);
    w.set_f32_array(std::string(kStatsPrefix) + "precision", precision);
    w.set_f32_array(std::string(kStatsPrefix) + "predicted_sparsity", predicted);
  }
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const auto& freq = rep.layers[static_cast<size_t>(il)].freq;
    const int64_t ne[1] = {c.n_ff};
    w.add_tensor(blk(il, "ffn_act_freq"), static_cast<uint32_t>(DType::F32), ne, freq.data(),
                 freq.size() * sizeof(float));
  }

  for (size_t il = 0; il < r.profile.train.size(); ++il) {
    add_samples(w, static_cast<int64_t>(il), "calib", r.profile.train[il]);
    add_samples(w, static_cast<int64_t>(il), "heldout", r.profile.heldout[il]);
  }

  F16Store store;
  std::vector<float> thresholds;
  if (new_predictors) {
    for (int64_t il = 0; il < c.n_layer; ++il) {
      const LayerPredictor& p = r.predictors[static_cast<size_t>(il)];
      const int64_t ne1[2] = {c.n_embd, p.rank}, ne2[2] = {p.rank, c.n_ff};
      w.add_tensor(blk(il, "fc1.weight"), static_cast<uint32_t>(DType::F16), ne1,
                   store.add(p.fc1), p.fc1.size() * 2);
      w.add_tensor(blk(il, "fc2.weight"), static_cast<uint32_t>(DType::F16), ne2,
                   store.add(p.fc2), p.fc2.size() * 2);
      thresholds.push_back(p.threshold);
    }
    w.set_f32_array("hearth.predictor_thresholds", thresholds);
  }
  write_thresholds(w, r.thresholds);
  std::vector<float> shares;
  for (const auto& l : rep.layers) shares.insert(shares.end(), l.input_share.begin(), l.input_share.end());
  if (!shares.empty()) w.set_f32_array(std::string(kStatsPrefix) + "input_shares", shares);
  w.write(out);
}

sparse::CalibReport read_calib_report(const Model& model) {
  const gguf::GgufFile& f = model_file(model);
  const ModelConfig& c = model.config();
  const auto kind = f.get_string(std::string(kStatsPrefix) + "kind");
  if (!kind) fail(f.path(), ": not a calibrated model (no ", kStatsPrefix, "kind); run hearth calibrate first");
  sparse::CalibReport r;
  r.model = f.path().substr(f.path().find_last_of('/') + 1);
  r.kind = std::string(*kind);
  r.tokens = f.get_int(std::string(kStatsPrefix) + "tokens").value_or(0);
  r.target = f.get_float(std::string(kStatsPrefix) + "target").value_or(std::nan(""));
  const auto n = static_cast<size_t>(c.n_layer);
  const auto sparsity = read_array(f, std::string(kStatsPrefix) + "sparsity", n);
  const auto recall = read_array(f, std::string(kStatsPrefix) + "recall", n);
  const auto precision = read_array(f, std::string(kStatsPrefix) + "precision", n);
  const auto predicted = read_array(f, std::string(kStatsPrefix) + "predicted_sparsity", n);
  // The input shares as the loader read and checked them (ModelConfig::input_shares).
  const std::vector<float>& shares = c.input_shares;
  const size_t per_layer = shares.empty() ? 0 : kInputKinds;
  for (size_t il = 0; il < n; ++il) {
    sparse::CalibLayerReport l;
    const gguf::TensorInfo* t = f.find_tensor(blk(static_cast<int64_t>(il), "ffn_act_freq"));
    if (!t || t->type != static_cast<uint32_t>(DType::F32) || t->n_elements() != c.n_ff) {
      fail(f.path(), ": ", blk(static_cast<int64_t>(il), "ffn_act_freq"), " is missing or not F32 [n_ff]");
    }
    const auto* freq = reinterpret_cast<const float*>(t->data);
    l.freq.assign(freq, freq + c.n_ff);
    l.true_sparsity = sparsity[il];
    l.recall = recall[il];
    l.precision = precision[il];
    l.predicted_sparsity = predicted[il];
    if (il < c.predictor_thresholds.size()) l.threshold = c.predictor_thresholds[il];
    if (il < c.thresholds.size()) l.threshold = c.thresholds[il].down;
    for (size_t k = 0; k < per_layer; ++k) l.input_share.push_back(shares[il * per_layer + k]);
    const Matrix& fc1 = model_weights(model).layers[il].fc1;
    l.predictor_rank = fc1.present() ? fc1.rows : 0;
    r.layers.push_back(std::move(l));
  }
  return r;
}

ProfileData read_profile(const Model& model) {
  const gguf::GgufFile& f = model_file(model);
  const ModelConfig& c = model.config();
  const sparse::CalibReport rep = read_calib_report(model);
  if (rep.kind != "profile") {
    fail(f.path(), ": not a saved profile (calibration kind '", rep.kind,
         "'); make one with --stage profile");
  }
  ProfileData d;
  d.tokens = rep.tokens;
  d.heldout_tokens = f.get_int(std::string(kStatsPrefix) + "heldout_tokens").value_or(0);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const auto& l = rep.layers[static_cast<size_t>(il)];
    d.freq.push_back(l.freq);
    d.sparsity.push_back(l.true_sparsity);
    d.train.push_back(read_samples(f, c, il, "calib"));
    d.heldout.push_back(read_samples(f, c, il, "heldout"));
  }
  return d;
}

}  // namespace hearth::calib
