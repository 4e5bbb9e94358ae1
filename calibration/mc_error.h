// Standard error of a Monte Carlo match probability whose K x K pair terms
// share samples (docs/calibration.md, "Standard error"). Internal to the core
// library.
#pragma once

#include "hedgedb/status.h"

namespace hedgedb {
namespace calibration {

struct McEstimate {
  double p_hat = 0;      // mean of the pair terms
  double std_error = 0;  // estimated standard deviation of p_hat
};

// terms is the rows x cols matrix (row-major) of f(x_i, y_j) for samples x_i
// of one side and y_j of the other, both independent draws. The pair terms
// share samples, so they are not independent: p_hat is a two-sample
// U-statistic and
//   Var(p_hat) ~ Var_i(g_i) / rows + Var_j(h_j) / cols,
// g_i = mean_j f(x_i, y_j), h_j = mean_i f(x_i, y_j), with sample variances
// (divisor n - 1). Slightly conservative: Var_i(g_i) also carries the noise of
// averaging over only cols samples. Errors: fewer than 2 rows or columns, a
// null matrix, or a non-finite term.
Status EstimateMcError(const double* terms, int rows, int cols, McEstimate* estimate);
Status EstimateMcError(const float* terms, int rows, int cols, McEstimate* estimate);

}  // namespace calibration
}  // namespace hedgedb
