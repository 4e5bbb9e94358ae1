// Regularised incomplete beta function I_x(a, b) with a gradient in x, for
// the F-statistic loss (the F(1, n) CDF is I_{s/(s+n)}(1/2, n/2)).
#pragma once

#include <ATen/core/Tensor.h>

namespace hedgedb::encoders {

// I_x(a, b) = B(x; a, b) / B(a, b) for x in [0, 1], a > 0, b > 0, evaluated in
// double with the Numerical Recipes continued fraction (modified Lentz,
// relative tolerance 1e-15) and the symmetry I_x(a, b) = 1 - I_{1-x}(b, a)
// where it converges faster. Returns NaN for arguments outside the domain.
double RegularizedIncompleteBeta(double x, double a, double b);

// Elementwise I_x(a, b) as an autograd function. x must be floating point;
// a and b broadcast to x's shape and get no gradient. The result has x's
// dtype; it is computed in double whatever the dtype. The gradient is
// dI/dx = x^(a-1) (1-x)^(b-1) / B(a, b) (0 outside (0, 1)).
at::Tensor RegularizedIncompleteBeta(const at::Tensor& x, const at::Tensor& a, const at::Tensor& b);

}  // namespace hedgedb::encoders
