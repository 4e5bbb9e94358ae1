// Numerically stable logistic helpers shared by the calibration code.
#pragma once

#include <cmath>

namespace hedgedb {
namespace calibration {

// 1 / (1 + e^-z) without overflow; monotone, sigmoid(+-inf) = 1 / 0.
inline double Sigmoid(double z) {
  if (z >= 0) return 1 / (1 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1 + e);
}

// ln(p / (1 - p)) for p in (0, 1).
inline double Logit(double p) { return std::log(p) - std::log1p(-p); }

}  // namespace calibration
}  // namespace hedgedb
