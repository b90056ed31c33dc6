#include "core/quantize_gptq.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quantize.h"

namespace hearth {
namespace {

constexpr double kDamp = 0.01;  // GPTQ's default: 1% of the mean diagonal

// In place: the lower Cholesky factor L of the symmetric positive definite a[n * n] (a = L L^T).
// Returns false when a is not positive definite.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (int64_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0.0)) return false;
    d = std::sqrt(d);
    a[j * n + j] = d;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (int64_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / d;
    }
    for (int64_t k = j + 1; k < n; ++k) a[j * n + k] = 0.0;
  }
  return true;
}

// H^-1 from H's lower Cholesky factor L: H^-1 = L^-T L^-1.
std::vector<double> inverse_from_cholesky(const std::vector<double>& l, int64_t n) {
  std::vector<double> linv(static_cast<size_t>(n * n), 0.0);  // L^-1, lower
  for (int64_t i = 0; i < n; ++i) {
    linv[i * n + i] = 1.0 / l[i * n + i];
    for (int64_t j = 0; j < i; ++j) {
      double s = 0.0;
      for (int64_t k = j; k < i; ++k) s += l[i * n + k] * linv[k * n + j];
      linv[i * n + j] = -s / l[i * n + i];
    }
  }
  std::vector<double> inv(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0.0;
      for (int64_t k = i; k < n; ++k) s += linv[k * n + i] * linv[k * n + j];
      inv[i * n + j] = inv[j * n + i] = s;
    }
  }
  return inv;
}

}  // namespace

GptqQ4_0::GptqQ4_0(const float* gram, int64_t cols, double count) : cols_(cols) {
  if (cols <= 0 || cols % kQK != 0) fail("GPTQ needs rows of whole Q4_0 blocks (got ", cols, ")");
  if (!(count > 0)) fail("GPTQ needs statistics of at least one row");
  const int64_t n = cols;
  std::vector<double> h(static_cast<size_t>(n * n));
  double mean_diag = 0.0;
  for (int64_t i = 0; i < n * n; ++i) h[i] = gram[i] / count;
  for (int64_t i = 0; i < n; ++i) mean_diag += h[i * n + i];
  mean_diag /= static_cast<double>(n);
  if (!(mean_diag > 0.0) || !std::isfinite(mean_diag)) {
    fail("GPTQ statistics have no energy (mean square ", mean_diag, ")");
  }
  for (int64_t i = 0; i < n; ++i) {
    // A column no calibration row used: its weights do not matter there, but must still quantize.
    if (h[i * n + i] == 0.0) h[i * n + i] = mean_diag;
    h[i * n + i] += kDamp * mean_diag;
  }
  // More damping until H is positive definite (a Gram matrix is semi-definite; rounding of the
  // float sums can push it just below).
  for (double extra = kDamp;; extra *= 10.0) {
    std::vector<double> l = h;
    if (cholesky_lower(l, n)) {
      h_ = h;
      u_ = inverse_from_cholesky(l, n);
      // The upper factor U of H^-1 = U^T U: the transpose of the lower factor of H^-1.
      if (!cholesky_lower(u_, n)) fail("GPTQ: H^-1 is not positive definite");
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = i + 1; j < n; ++j) std::swap(u_[i * n + j], u_[j * n + i]);
      }
      return;
    }
    if (extra > 1.0) fail("GPTQ statistics are not positive definite even with damping");
    for (int64_t i = 0; i < n; ++i) h[i * n + i] += extra * mean_diag;
  }
}

void GptqQ4_0::quantize_row(const float* x, BlockQ4_0* y) const {
  const int64_t n = cols_;
  std::vector<double> w(x, x + n);
  float block[kQK];
  for (int64_t b = 0; b < n / kQK; ++b) {
    const int64_t j0 = b * kQK;
    for (int j = 0; j < kQK; ++j) block[j] = static_cast<float>(w[j0 + j]);
    // The scale from the row as the earlier blocks' errors left it; the codes one by one, each
    // element's error spread over the columns after it.
    quantize_block_q4_0_search(block, nullptr, &y[b]);
    const double d = fp16_to_fp32(y[b].d);
    const double id = d != 0.0 ? 1.0 / d : 0.0;
    uint8_t codes[kQK];
    for (int j = 0; j < kQK; ++j) {
      const int64_t c = j0 + j;
      const double q = std::clamp(std::nearbyint(w[c] * id), -8.0, 7.0);
      codes[j] = static_cast<uint8_t>(static_cast<int>(q) + 8);
      const double err = (w[c] - d * q) / u_[c * n + c];
      const double* urow = &u_[c * n];
      for (int64_t k = c + 1; k < n; ++k) w[k] -= err * urow[k];
    }
    for (int j = 0; j < kQK / 2; ++j) {
      y[b].qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + kQK / 2] << 4));
    }
  }
  refit_scales(std::vector<double>(x, x + n), y);
}

double GptqQ4_0::row_error(const float* x, const BlockQ4_0* y) const {
  const int64_t n = cols_;
  std::vector<float> yq(static_cast<size_t>(n));
  dequantize_row(DType::Q4_0, y, yq.data(), n);
  std::vector<double> e(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) e[i] = static_cast<double>(x[i]) - yq[i];
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double hi = 0.0;
    for (int64_t j = 0; j < n; ++j) hi += h_[i * n + j] * e[j];
    s += e[i] * hi;
  }
  return s;
}

// The codes fixed, the output error is a quadratic in the row's block scales d: with Q the
// [cols, blocks] matrix of codes, (x - Q d)^T H (x - Q d) is least at (Q^T H Q) d = Q^T H x.
void GptqQ4_0::refit_scales(const std::vector<double>& x, BlockQ4_0* y) const {
  const int64_t n = cols_, nb = cols_ / kQK;
  std::vector<double> q(static_cast<size_t>(n));
  for (int64_t b = 0; b < nb; ++b) {
    for (int j = 0; j < kQK / 2; ++j) {
      q[b * kQK + j] = (y[b].qs[j] & 0x0f) - 8;
      q[b * kQK + j + kQK / 2] = (y[b].qs[j] >> 4) - 8;
    }
  }
  // hq[b][i] = (H q^(b))_i, q^(b) the codes of block b alone.
  std::vector<double> hq(static_cast<size_t>(nb * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const double* hrow = &h_[i * n];
    for (int64_t b = 0; b < nb; ++b) {
      double s = 0.0;
      for (int64_t j = b * kQK; j < (b + 1) * kQK; ++j) s += hrow[j] * q[j];
      hq[b * n + i] = s;
    }
  }
  std::vector<double> a(static_cast<size_t>(nb * nb)), rhs(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) {
    double r = 0.0;
    for (int64_t i = 0; i < n; ++i) r += hq[b * n + i] * x[i];
    rhs[b] = r;
    for (int64_t c = 0; c < nb; ++c) {
      double s = 0.0;
      for (int64_t j = c * kQK; j < (c + 1) * kQK; ++j) s += hq[b * n + j] * q[j];
      a[b * nb + c] = s;
    }
  }
  if (!cholesky_lower(a, nb)) return;  // a block of all-zero codes: keep GPTQ's scales
  // Solve L L^T d = rhs.
  std::vector<double> d(rhs);
  for (int64_t i = 0; i < nb; ++i) {
    for (int64_t k = 0; k < i; ++k) d[i] -= a[i * nb + k] * d[k];
    d[i] /= a[i * nb + i];
  }
  for (int64_t i = nb - 1; i >= 0; --i) {
    for (int64_t k = i + 1; k < nb; ++k) d[i] -= a[k * nb + i] * d[k];
    d[i] /= a[i * nb + i];
  }
  std::vector<float> xf(x.begin(), x.end());
  std::vector<BlockQ4_0> refit(y, y + nb);
  for (int64_t b = 0; b < nb; ++b) refit[b].d = fp32_to_fp16(static_cast<float>(d[b]));
  if (row_error(xf.data(), refit.data()) < row_error(xf.data(), y)) {
    std::copy(refit.begin(), refit.end(), y);
  }
}

}  // namespace hearth
