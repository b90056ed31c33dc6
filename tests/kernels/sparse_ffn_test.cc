// The fused one-token sparse FFN (ops/sparse_ffn.h) against a double-precision reference, for
// every weight type and ISA, on odd sizes (n_ff spanning
// several blocks with a ragged last one, a predictor width that is no multiple of anything);
// the same bits for any thread count; all candidates firing equals the dense FFN.
#include "ops/sparse_ffn.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/kernel_test_util.h"
#include "core/error.h"
#include "ops/matmul.h"
#include "ops/sparse_matmul.h"

namespace hearth {
namespace {

// About half the neurons are candidates: three blocks, the last one ragged.
constexpr int64_t kEmbd = 96, kFf = 4 * kFusedBlock + 45, kHidden = 37;

struct Layer {
  DType type = DType::F32;
  std::vector<uint8_t> fc2, up, gate, down_t;
  std::vector<float> fc2f, upf, gatef, downf, bias;
  std::vector<int32_t> cand;
  std::vector<float> h, x;
  float threshold = 0.0f;

  SparseFfnLayer view(bool gated, bool predictor, bool biased) const {
    SparseFfnLayer f;
    if (predictor) f.fc2 = {DType::F16, fc2.data(), kFf, kHidden};
    f.up = {type, up.data(), kFf, kEmbd};
    if (gated) f.gate = {type, gate.data(), kFf, kEmbd};
    f.down_t = {type, down_t.data(), kFf, kEmbd};
    f.up_bias = biased ? bias.data() : nullptr;
    f.cand = cand.data();
    f.n_cand = static_cast<int64_t>(cand.size());
    f.threshold = threshold;
    f.act = Activation::Relu;
    return f;
  }
};

std::vector<float> dequant(DType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols) {
  std::vector<float> f(static_cast<size_t>(rows * cols));
  dequantize_row(t, w.data(), f.data(), rows * cols);
  return f;
}

double dot(const float* w, const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(w[i]) * x[i];
  return s;
}

// Candidates: every other neuron plus a few runs, ascending. Threshold: in the widest gap between
// the reference scores around the 70th percentile, so float rounding cannot flip a decision.
Layer make_layer(DType t, uint32_t seed) {
  Layer l;
  l.type = t;
  l.fc2 = test::random_weights(DType::F16, kFf, kHidden, seed);
  l.up = test::random_weights(t, kFf, kEmbd, seed + 1);
  l.gate = test::random_weights(t, kFf, kEmbd, seed + 2);
  l.down_t = test::random_weights(t, kFf, kEmbd, seed + 3);
  l.fc2f = dequant(DType::F16, l.fc2, kFf, kHidden);
  l.upf = dequant(t, l.up, kFf, kEmbd);
  l.gatef = dequant(t, l.gate, kFf, kEmbd);
  l.downf = dequant(t, l.down_t, kFf, kEmbd);
  l.bias = test::random_floats(kFf, seed + 4, 0.1f);
  for (int32_t i = 0; i < kFf; ++i) {
    if (i % 2 == 0 || (i / 40) % 3 == 1) l.cand.push_back(i);
  }
  l.h = test::uniform_floats(kHidden, seed + 5, 0.0f, 1.0f);
  l.x = test::random_floats(kEmbd, seed + 6);
  std::vector<double> s;
  for (int32_t i : l.cand) s.push_back(dot(&l.fc2f[i * kHidden], l.h.data(), kHidden));
  std::sort(s.begin(), s.end());
  size_t best = s.size() * 6 / 10;
  for (size_t i = best; i + 1 < s.size() * 8 / 10; ++i) {
    if (s[i + 1] - s[i] > s[best + 1] - s[best]) best = i;
  }
  l.threshold = static_cast<float>((s[best] + s[best + 1]) / 2);
  return l;
}

// out[n_embd] in double over the neurons whose reference score reaches the threshold, from
// activations a_j that the library's own (separately tested) gather kernels compute, so what is
// checked is the op's selection, blocking and summation: within float rounding of the double
// sum, plus for one-token Q4_0 the int8 rounding of its coefficients per group of 32 fired rows
// of each block (test::coef_quant_bound). `tol` receives each output's tolerance.
std::vector<double> reference(const Layer& l, cpu::Isa isa, bool gated, bool predictor, bool biased,
                              std::vector<double>* tol, int64_t* fired) {
  cpu::CpuContext ctx(1, isa);
  const auto ldw = static_cast<size_t>(row_bytes(l.type, kEmbd));
  std::vector<double> out(kEmbd, 0.0), abs(kEmbd, 0.0), quant(kEmbd, 0.0);
  *fired = 0;
  for (size_t c0 = 0; c0 < l.cand.size(); c0 += kFusedBlock) {
    std::vector<int32_t> idx;
    for (size_t c = c0; c < std::min(l.cand.size(), c0 + kFusedBlock); ++c) {
      const int32_t i = l.cand[c];
      if (!predictor || dot(&l.fc2f[i * kHidden], l.h.data(), kHidden) >= l.threshold) {
        idx.push_back(i);
      }
    }
    const auto m = static_cast<int64_t>(idx.size());
    *fired += m;
    std::vector<float> u(idx.size()), g(idx.size()), a(idx.size());
    gather_matmul(ctx, l.type, l.up.data(), kFf, kEmbd, idx.data(), m, l.x.data(), 1, u.data());
    gather_matmul(ctx, l.type, l.gate.data(), kFf, kEmbd, idx.data(), m, l.x.data(), 1, g.data());
    for (int64_t j = 0; j < m; ++j) {
      const float uj = u[j] + (biased ? l.bias[idx[j]] : 0.0f);
      a[j] = gated ? std::max(0.0f, g[j]) * uj : std::max(0.0f, uj);
    }
    for (int64_t c = 0; c < kEmbd; ++c) {
      for (int64_t j = 0; j < m; ++j) {
        const double p = static_cast<double>(a[j]) * l.downf[idx[j] * kEmbd + c];
        out[c] += p;
        abs[c] += std::fabs(p);
      }
      quant[c] +=
          test::coef_quant_bound(l.type, l.down_t.data(), ldw, idx.data(), m, a.data(), 1, c);
    }
  }
  tol->resize(kEmbd);
  for (int64_t c = 0; c < kEmbd; ++c) {
    (*tol)[c] = (*fired + 2) * FLT_EPSILON * abs[c] + quant[c] + 1e-30;
  }
  return out;
}

std::vector<float> run(const Layer& l, const SparseFfnLayer& f, cpu::Isa isa, int threads,
                       int64_t* fired) {
  cpu::CpuContext ctx(threads, isa);
  SparseFfnWorkspace ws;
  ws.reserve(kEmbd, kFf, kHidden);
  std::vector<float> out(kEmbd, std::nanf(""));
  *fired = sparse_ffn_decode(ctx, f, l.h.data(), l.x.data(), ws, out.data());
  return out;
}

TEST(SparseFfnDecode, MatchesReferenceForEveryTypeAndIsa) {
  for (cpu::Isa isa : test::isas()) {
    for (DType t : test::kAllTypes) {
      const Layer l = make_layer(t, 11);
      for (int variant = 0; variant < 4; ++variant) {
        const bool gated = variant != 1, predictor = variant != 2, biased = variant == 3;
        std::vector<double> tol;
        int64_t want_fired = 0;
        const auto want = reference(l, isa, gated, predictor, biased, &tol, &want_fired);
        int64_t fired = 0;
        const auto got = run(l, l.view(gated, predictor, biased), isa, 2, &fired);
        const std::string what = std::string(cpu::isa_name(isa)) + " " +
                                 std::string(dtype_name(t)) + " variant " + std::to_string(variant);
        ASSERT_EQ(fired, want_fired) << what;
        ASSERT_GT(fired, 0) << what;
        if (predictor) {
          ASSERT_LT(fired, static_cast<int64_t>(l.cand.size())) << what;
        }
        for (int64_t c = 0; c < kEmbd; ++c) {
          ASSERT_NEAR(got[c], want[c], tol[c]) << what << " column " << c;
        }
      }
    }
  }
}

TEST(SparseFfnDecode, SameBitsForAnyThreadCount) {
  for (cpu::Isa isa : test::isas()) {
    for (DType t : test::kAllTypes) {
      const Layer l = make_layer(t, 23);
      const SparseFfnLayer f = l.view(true, true, false);
      int64_t fired1 = 0;
      const auto one = run(l, f, isa, 1, &fired1);
      for (int threads : {2, 3, 4}) {
        int64_t fired = 0;
        const auto many = run(l, f, isa, threads, &fired);
        EXPECT_EQ(fired, fired1);
        EXPECT_EQ(std::memcmp(one.data(), many.data(), kEmbd * sizeof(float)), 0)
            << cpu::isa_name(isa) << " " << dtype_name(t) << " threads " << threads;
      }
    }
  }
}

// Without a predictor over all neurons it is the dense FFN: down · (relu(gate · x) ⊙ up · x).
TEST(SparseFfnDecode, AllNeuronsEqualDenseFfn) {
  Layer l = make_layer(DType::F32, 31);
  l.cand.resize(kFf);
  std::iota(l.cand.begin(), l.cand.end(), 0);
  cpu::CpuContext ctx(2);
  std::vector<float> g(kFf), u(kFf), a(kFf), down(static_cast<size_t>(kEmbd * kFf)), want(kEmbd);
  matvec(ctx, DType::F32, l.gate.data(), kFf, kEmbd, l.x.data(), g.data());
  matvec(ctx, DType::F32, l.up.data(), kFf, kEmbd, l.x.data(), u.data());
  for (int64_t i = 0; i < kFf; ++i) a[i] = std::max(0.0f, g[i]) * u[i];
  for (int64_t i = 0; i < kFf; ++i) {
    for (int64_t c = 0; c < kEmbd; ++c) down[c * kFf + i] = l.downf[i * kEmbd + c];
  }
  matvec(ctx, DType::F32, down.data(), kEmbd, kFf, a.data(), want.data());
  int64_t fired = 0;
  const auto got = run(l, l.view(true, false, false), ctx.isa(), 2, &fired);
  EXPECT_EQ(fired, kFf);
  for (int64_t c = 0; c < kEmbd; ++c) {
    // Two float sums of the same terms in different orders: within twice sequential summation's
    // bound of each other.
    double abs = 0;
    for (int64_t i = 0; i < kFf; ++i) abs += std::fabs(a[i] * down[c * kFf + i]);
    EXPECT_NEAR(got[c], want[c], 2 * (kFf + 2) * FLT_EPSILON * abs) << c;
  }
}

TEST(SparseFfnDecode, RejectsBadInput) {
  Layer l = make_layer(DType::F16, 41);
  cpu::CpuContext ctx(1);
  std::vector<float> out(kEmbd);
  SparseFfnWorkspace small;
  small.reserve(kEmbd, kFusedBlock, kHidden);
  EXPECT_THROW(
      sparse_ffn_decode(ctx, l.view(true, true, false), l.h.data(), l.x.data(), small, out.data()),
      Error);
  SparseFfnWorkspace ws;
  ws.reserve(kEmbd, kFf, kHidden);
  l.cand.back() = kFf;  // one past the last neuron
  EXPECT_THROW(
      sparse_ffn_decode(ctx, l.view(true, true, false), l.h.data(), l.x.data(), ws, out.data()),
      Error);
  SparseFfnLayer wrong = l.view(true, true, false);
  wrong.gate.cols = kEmbd + 32;
  l.cand.back() = kFf - 1;
  EXPECT_THROW(sparse_ffn_decode(ctx, wrong, l.h.data(), l.x.data(), ws, out.data()), Error);
}

}  // namespace
}  // namespace hearth
