// Eigen-decomposition of a real symmetric matrix, for the principal axes of activations
// (calib/residual_rotation.h). Householder reduction to tridiagonal form, then the implicit QL
// method with Wilkinson shifts: O(n^3), about a minute for n = 4096 on one core, where cyclic
// Jacobi sweeps would take tens of minutes.
#pragma once

#include <cstdint>
#include <vector>

namespace hearth::calib {

struct SymmetricEigen {
  std::vector<double> values;   // [n] in descending order
  std::vector<double> vectors;  // [n, n] row-major: column i (vectors[k * n + i]) is values[i]'s
};

// a[n, n] row-major and symmetric (only its lower triangle is read). Throws hearth::Error when
// the iteration does not converge (non-finite input).
SymmetricEigen symmetric_eigen(std::vector<double> a, int64_t n);

}  // namespace hearth::calib
