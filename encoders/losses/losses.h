// Training losses, each as its paper defines it. All are
// differentiable tensor functions of encoder outputs; they work in the dtype
// of their inputs (tests use double). Shape or label problems are programming
// errors inside a training step and are reported like any torch op, by
// throwing c10::Error (TORCH_CHECK); the trainer catches c10::Error at its
// boundary and turns it into a Status.
//
// Random draws (Monte Carlo samples, DIMCO's random dimension pairs) use
// torch's global generator unless the caller passes them in, which makes every
// loss reproducible with torch::manual_seed and exactly testable.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "encoders/models/models.h"

namespace hedgedb::encoders {

// The value to minimise plus its parts as plain numbers for logging (e.g.
// "nll", "kl" for HIB; "h_codes", "h_codes_given_y", "independence" for
// DIMCO).
struct LossOutput {
  torch::Tensor loss;  // 0-dim
  std::map<std::string, double> terms;
};

// ---------------------------------------------------------------------------
// Soft contrastive loss (HIB eq. 2-3) for point embeddings.
// ---------------------------------------------------------------------------

// Logit of the match probability, -a * ||z1 - z2||_2 + b, over the last
// dimension (broadcasting). The norm is sqrt(sum sq + 1e-12) so that identical
// points have a finite gradient; the change in value is below float epsilon.
torch::Tensor MatchLogit(const torch::Tensor& z1, const torch::Tensor& z2, const torch::Tensor& a,
                         const torch::Tensor& b);

// Mean over pairs of -log p(m = m^ | z1, z2) (eq. 3). z1, z2: [B, D];
// is_match: [B] bool or 0/1; a (> 0), b: 0-dim tensors (Encoder::match_a/b).
LossOutput SoftContrastiveLoss(const torch::Tensor& z1, const torch::Tensor& z2,
                               const torch::Tensor& is_match, const torch::Tensor& a,
                               const torch::Tensor& b);

// The margin ("hard") contrastive loss (Hadsell et al. 2006; HIB eq. 1), the
// baseline of HIB appendix B: mean over pairs of ||z1 - z2||^2 for a match and
// max(margin - ||z1 - z2||, 0)^2 for a non-match. z1, z2: [B, D]; is_match
// [B]; margin > 0. Terms: "loss", "active_negatives" (share of non-matching
// pairs closer than the margin, the ones that still push).
LossOutput ContrastiveLoss(const torch::Tensor& z1, const torch::Tensor& z2,
                           const torch::Tensor& is_match, double margin);

// ---------------------------------------------------------------------------
// HIB: variational information bottleneck for stochastic embeddings (eq. 8).
// ---------------------------------------------------------------------------

// HibLikelihood (how the pair likelihood term is estimated from the K x K
// sample pairs) is in encoders/models/methods.h, where TrainOptions reads it.

// KL(p(z|x) || N(0, I)) for a mixture, which has no closed form. HIB does not
// say how it computed it.
enum class MogKl {
  // Monte Carlo with the same stratified, reparameterised samples as the
  // match term: sum_i w_i [log p(z_i|x) - log N(z_i; 0, I)]. Unbiased. Default.
  kMonteCarlo,
  // sum_c pi_c KL(N(mu_c, S_c) || N(0, I)): the convexity upper bound, exact
  // for C = 1 and deterministic.
  kComponentUpperBound,
};

struct HibOptions {
  int64_t samples = 8;  // K per side; a multiple of C for mixtures
  double beta = 1e-4;   // HIB section 4.1
  HibLikelihood likelihood = HibLikelihood::kExpectedLogLikelihood;
  MogKl mog_kl = MogKl::kMonteCarlo;
  // Weight of the variance term (0: none, HIB as published). See HibLoss.
  double variance_mls = 0;
};

// Reparameterised samples of a gaussian or mog EncoderOutput.
struct EmbeddingSamples {
  torch::Tensor z;        // [B, K, D]
  torch::Tensor weights;  // [B, K], each row sums to 1
};

// Gaussian: z_k = mean + sqrt(var) * eps_k, weights 1/K. Mixture (HIB
// section 2.2): stratified, K/C samples from every component (component c
// gets samples c*K/C .. (c+1)*K/C - 1), each weighted pi_c / (K/C), so with
// unequal weights a component pair counts pi_c * pi'_c' (the
// stratified mixture sampling of docs/concepts.md, "Scores").
// `noise` is [B, K, D] standard normal; undefined: drawn with torch::randn.
EmbeddingSamples SampleEmbeddings(const EncoderOutput& out, int64_t samples,
                                  const torch::Tensor& noise = {});

// KL(N(mean, diag var) || N(0, I)) per item, summed over the last dimension.
torch::Tensor GaussianKlToStandardNormal(const torch::Tensor& mean, const torch::Tensor& var);

// Per-item KL of a gaussian (closed form) or mog output (per `mode`; the
// Monte Carlo estimate uses `samples` from SampleEmbeddings of that output).
torch::Tensor KlToStandardNormal(const EncoderOutput& out, MogKl mode,
                                 const EmbeddingSamples& samples);

// The negative mutual likelihood score (PFE eq. 3, without its constant) of
// the same-label pairs among x1, x2 (gaussian, B pairs, is_match [B]), mean
// over those pairs, with the means detached: a loss for the variances (and,
// through them, the body they are read from).
torch::Tensor VarianceMlsLoss(const EncoderOutput& x1, const EncoderOutput& x2,
                              const torch::Tensor& is_match);

// L = mean over pairs of [ -E log p(m = m^ | z1, z2) + beta (KL1 + KL2) ]
//     + variance_mls * VarianceMlsLoss (gaussian only).
// x1, x2: gaussian or mog outputs of the two sides (same kind, B pairs);
// is_match [B]; a, b: 0-dim (Encoder::match_a/b). noise1/noise2 as in
// SampleEmbeddings. Terms: "nll", "kl" (mean of KL1 + KL2), "match_prob"
// (mean Monte Carlo probability of the true label), "variance_mls" (when on).
LossOutput HibLoss(const EncoderOutput& x1, const EncoderOutput& x2, const torch::Tensor& is_match,
                   const torch::Tensor& a, const torch::Tensor& b, const HibOptions& options,
                   const torch::Tensor& noise1 = {}, const torch::Tensor& noise2 = {});

// ---------------------------------------------------------------------------
// Stochastic prototype embeddings (SPE) and prototypical networks.
// ---------------------------------------------------------------------------

// Class prototypes from support embeddings (SPE eq. 5):
// per class y, v_i = s2_i + sigma_eps^2, v_y = 1 / sum_i 1/v_i,
// rho_y = v_y * sum_i mu_i / v_i; a new instance of class y has density
// N(z; rho_y, w_y) with w_y = v_y + sigma_eps^2.
struct SpePrototypes {
  torch::Tensor labels;  // [Y] int64, sorted class labels
  torch::Tensor rho;     // [Y, D]
  torch::Tensor w;       // [Y, D]
};
SpePrototypes ComputeSpePrototypes(const torch::Tensor& support_mean,
                                   const torch::Tensor& support_var,
                                   const torch::Tensor& support_labels,
                                   const torch::Tensor& sigma_eps2);

enum class SpeSampler {
  // SPE section 3.2.2 / appendix: sample z from the intersection
  // N(m~, s~2) of the query and the target class, so that
  // p(t|x) = N(mu_x; rho_t, s2_x + w_t) * E_z[1 / sum_y N(z; rho_y, w_y)].
  // One sample trains well (the paper uses 1). Default for training.
  kIntersection,
  // SPE section 3.2.1: z ~ N(mu_x, s2_x), p(y|x) = E_z[softmax_y log N(z; rho_y, w_y)].
  // The paper evaluates with this sampler.
  kNaive,
};

struct SpeOptions {
  SpeSampler sampler = SpeSampler::kIntersection;
  int64_t samples = 1;  // per query
};

// Mean over queries of -log p(y_q | x_q), p estimated by averaging the
// sampler's samples inside the log. Every query label must occur in the
// support. sigma_eps2: 0-dim (Encoder::sigma_eps2). noise: [Q, S, D]
// standard normal, or undefined to draw it. Terms: "nll", "accuracy" (argmax
// over classes of the estimated posterior), "sigma_eps2".
LossOutput SpeLoss(const torch::Tensor& support_mean, const torch::Tensor& support_var,
                   const torch::Tensor& support_labels, const torch::Tensor& query_mean,
                   const torch::Tensor& query_var, const torch::Tensor& query_labels,
                   const torch::Tensor& sigma_eps2, const SpeOptions& options,
                   const torch::Tensor& noise = {});

// Log class posteriors log p(y|x) [Q, Y] for the prototypes' classes with the
// naive sampler and `samples` draws (evaluation, SPE appendix B).
torch::Tensor SpeLogPosterior(const SpePrototypes& prototypes, const torch::Tensor& query_mean,
                              const torch::Tensor& query_var, int64_t samples,
                              const torch::Tensor& noise = {});

// Prototypical network (Snell et al. 2017), the deterministic sibling of SPE:
// c_y = mean of the class's support points, p(y|q) = softmax_y(-||q - c_y||^2),
// loss = mean cross-entropy. Terms: "nll", "accuracy".
LossOutput ProtoNetLoss(const torch::Tensor& support, const torch::Tensor& support_labels,
                        const torch::Tensor& query, const torch::Tensor& query_labels);

// ---------------------------------------------------------------------------
// DIMCO (eq. 4-10).
// ---------------------------------------------------------------------------
struct DimcoOptions {
  double lambda = 1.0;  // weight of L_ind, fixed to 1 in the paper
  // Random dimension pairs (i1 != i2) drawn per batch for L_ind; 0 = d.
  // L_ind is the mean of eq. 9 over the pairs, so lambda does not depend on
  // how many are drawn.
  int64_t independence_pairs = 0;
};

// L = -H(X~) + H(X~|Y) + lambda * L_ind, with
//   H(X~)   = sum_i H(mean over the batch of p_i)                      (eq. 6)
//   H(X~|Y) = sum_y freq(y) sum_i H(mean over class y of p_i)          (eq. 7)
//   L_ind   = KL(p_i1 (x) p_i2 || p(i1, i2)) where the joint is the batch
//             mean of the per-item outer products                      (eq. 9)
// H is the entropy -sum p log p (eq. 5 prints it without the minus sign).
// log_probs: [B, d, k] (EncoderOutput::log_probs); labels [B].
// pairs: [P, 2] int64 dimension pairs, or undefined to draw them.
// Terms: "h_codes", "h_codes_given_y", "mutual_information", "independence".
LossOutput DimcoLoss(const torch::Tensor& log_probs, const torch::Tensor& labels,
                     const DimcoOptions& options, const torch::Tensor& pairs = {});

// ---------------------------------------------------------------------------
// F-statistic loss (Ridgeway & Mozer 2018).
// ---------------------------------------------------------------------------
struct FStatisticOptions {
  int64_t top_dims = 3;  // d, the number of dimensions to separate per pair (CUB: 3)
};

// For every class pair (alpha, beta) in the batch and every dimension k:
//   between = n_a (m_a - m)^2 + n_b (m_b - m)^2, m = (m_a + m_b) / 2
//   within  = sum over both classes of (z - m_class)^2
//   Phi     = I_x(1/2, (n_a + n_b - 2) / 2), x = between / (between + within)
// (the F(1, n_a + n_b - 2) CDF at the pair's F statistic, paper eq. 1), with x
// clamped to [1e-37, 1 - 1e-5] as in the authors' code. The loss is
// -sum over pairs of the sum of log Phi over the top_dims dimensions with the
// largest Phi. Pairs with n_a + n_b < 3 have no F statistic and are skipped.
// The pair mean m is the unweighted mean of the two class means, as in the
// paper ("z = <z_i>") and its code. Terms: "pairs", "mean_log_phi".
LossOutput FStatisticLoss(const torch::Tensor& embeddings, const torch::Tensor& labels,
                          const FStatisticOptions& options);

}  // namespace hedgedb::encoders
