#include "encoders/losses/incomplete_beta.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>

namespace hedgedb::encoders {
namespace {

// Continued fraction for the incomplete beta function by the modified Lentz
// method (Numerical Recipes, betacf). Converges rapidly for
// x < (a + 1) / (a + b + 2); the caller uses the symmetry otherwise.
double BetaContinuedFraction(double a, double b, double x) {
  constexpr int kMaxIterations = 100000;
  constexpr double kEpsilon = 1e-15;
  constexpr double kTiny = 1e-300;
  const double qab = a + b;
  const double qap = a + 1.0;
  const double qam = a - 1.0;
  double c = 1.0;
  double d = 1.0 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const int m2 = 2 * m;
    // Even step.
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    // Odd step.
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < kEpsilon) return h;
  }
  return h;  // not converged to 1e-15 after 1e5 terms: best estimate
}

double LogBeta(double a, double b) { return std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b); }

// dI/dx = x^(a-1) (1-x)^(b-1) / B(a, b), in log space to avoid overflow.
double IncompleteBetaDerivative(double x, double a, double b) {
  if (!(x > 0.0 && x < 1.0)) return 0.0;
  return std::exp((a - 1.0) * std::log(x) + (b - 1.0) * std::log1p(-x) - LogBeta(a, b));
}

class IncompleteBetaFunction : public torch::autograd::Function<IncompleteBetaFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& a, const at::Tensor& b) {
    // The continued fraction runs on the CPU in double whatever x is.
    auto x64 = x.to(at::kCPU, at::kDouble).contiguous();
    auto a64 = a.to(at::kCPU, at::kDouble).expand(x.sizes()).contiguous();
    auto b64 = b.to(at::kCPU, at::kDouble).expand(x.sizes()).contiguous();
    auto out = at::empty_like(x64);
    const double* xp = x64.data_ptr<double>();
    const double* ap = a64.data_ptr<double>();
    const double* bp = b64.data_ptr<double>();
    double* op = out.data_ptr<double>();
    for (int64_t i = 0, n = x64.numel(); i < n; ++i) {
      op[i] = RegularizedIncompleteBeta(xp[i], ap[i], bp[i]);
    }
    ctx->save_for_backward({x64, a64, b64});
    ctx->saved_data["dtype"] = static_cast<int64_t>(x.scalar_type());
    return out.to(x.device(), x.scalar_type());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const auto& x64 = saved[0];
    const auto& a64 = saved[1];
    const auto& b64 = saved[2];
    auto derivative = at::empty_like(x64);
    const double* xp = x64.data_ptr<double>();
    const double* ap = a64.data_ptr<double>();
    const double* bp = b64.data_ptr<double>();
    double* dp = derivative.data_ptr<double>();
    for (int64_t i = 0, n = x64.numel(); i < n; ++i) {
      dp[i] = IncompleteBetaDerivative(xp[i], ap[i], bp[i]);
    }
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    const auto& grad = grad_outputs[0];
    at::Tensor grad_x = (grad.to(at::kCPU, at::kDouble) * derivative).to(grad.device(), dtype);
    return {grad_x, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

double RegularizedIncompleteBeta(double x, double a, double b) {
  if (std::isnan(x) || !(a > 0.0) || !(b > 0.0) || x < 0.0 || x > 1.0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (x == 0.0) return 0.0;
  if (x == 1.0) return 1.0;
  const double log_front = a * std::log(x) + b * std::log1p(-x) - LogBeta(a, b);
  const double front = std::exp(log_front);
  if (x < (a + 1.0) / (a + b + 2.0)) {
    return front * BetaContinuedFraction(a, b, x) / a;
  }
  return 1.0 - front * BetaContinuedFraction(b, a, 1.0 - x) / b;
}

at::Tensor RegularizedIncompleteBeta(const at::Tensor& x, const at::Tensor& a,
                                     const at::Tensor& b) {
  TORCH_CHECK(at::isFloatingType(x.scalar_type()),
              "RegularizedIncompleteBeta: x must be floating point");
  // a and b are shape parameters (degrees of freedom); they carry no gradient.
  return IncompleteBetaFunction::apply(x, a.detach(), b.detach());
}

}  // namespace hedgedb::encoders
