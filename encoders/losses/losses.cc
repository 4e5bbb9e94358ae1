#include "encoders/losses/losses.h"

#include <cmath>
#include <tuple>

#include "encoders/losses/incomplete_beta.h"

namespace hedgedb::encoders {
namespace {

constexpr double kLog2Pi = 1.8378770664093454835606594728112;
// Keeps sqrt differentiable at zero distance; negligible against any real distance.
constexpr double kDistanceEpsilon = 1e-12;
// Floor for probabilities inside log(); below float's smallest normal 1.2e-38
// would be denormal, and p log p is ~1e-28 here, far below anything visible.
constexpr double kTinyProbability = 1e-30;

double Item(const torch::Tensor& t) { return t.detach().to(torch::kDouble).item<double>(); }

torch::Tensor Euclidean(const torch::Tensor& diff) {
  return (diff.pow(2).sum(-1) + kDistanceEpsilon).sqrt();
}

// Labels as 0/1 in the dtype of `like`.
torch::Tensor MatchAsFloat(const torch::Tensor& is_match, const torch::Tensor& like) {
  return is_match.to(like.options());
}

// Sum over the last dimension of log N(x; mean, var), broadcasting.
torch::Tensor DiagonalGaussianLogDensity(const torch::Tensor& x, const torch::Tensor& mean,
                                         const torch::Tensor& var) {
  return -0.5 * ((x - mean).pow(2) / var + var.log() + kLog2Pi).sum(-1);
}

// Sorted distinct labels and, for every item, the index of its label.
std::pair<torch::Tensor, torch::Tensor> UniqueLabels(const torch::Tensor& labels) {
  TORCH_CHECK(labels.dim() == 1, "labels must be a 1-d tensor, got ", labels.sizes());
  auto [unique, inverse] = torch::_unique(labels.to(torch::kLong), /*sorted=*/true,
                                          /*return_inverse=*/true);
  return {unique, inverse};
}

// [Y, N] matrix with M[y, i] = 1 if item i has class index y.
torch::Tensor Membership(const torch::Tensor& inverse, int64_t classes,
                         const torch::TensorOptions& options) {
  return torch::one_hot(inverse, classes).t().to(options);
}

// Index into `class_labels` (sorted) of every query label; every query label
// must be one of them.
torch::Tensor TargetIndex(const torch::Tensor& class_labels, const torch::Tensor& query_labels) {
  TORCH_CHECK(query_labels.dim() == 1, "query labels must be a 1-d tensor");
  torch::Tensor q = query_labels.to(torch::kLong);
  torch::Tensor index = torch::searchsorted(class_labels, q).clamp_max(class_labels.size(0) - 1);
  TORCH_CHECK(class_labels.index_select(0, index).eq(q).all().item<bool>(),
              "every query label must occur in the support set");
  return index;
}

// Entropy -sum p log p over the last dimension.
torch::Tensor Entropy(const torch::Tensor& p) {
  return -(p * p.clamp_min(kTinyProbability).log()).sum(-1);
}

}  // namespace

// ---------------------------------------------------------------------------
// Soft contrastive
// ---------------------------------------------------------------------------

torch::Tensor MatchLogit(const torch::Tensor& z1, const torch::Tensor& z2, const torch::Tensor& a,
                         const torch::Tensor& b) {
  return -a * Euclidean(z1 - z2) + b;
}

LossOutput SoftContrastiveLoss(const torch::Tensor& z1, const torch::Tensor& z2,
                               const torch::Tensor& is_match, const torch::Tensor& a,
                               const torch::Tensor& b) {
  TORCH_CHECK(z1.dim() == 2 && z1.sizes() == z2.sizes(),
              "soft contrastive: z1 and z2 must both be [B, D], got ", z1.sizes(), " and ",
              z2.sizes());
  TORCH_CHECK(is_match.dim() == 1 && is_match.size(0) == z1.size(0),
              "soft contrastive: is_match must be [B]");
  torch::Tensor logit = MatchLogit(z1, z2, a, b);
  torch::Tensor m = MatchAsFloat(is_match, logit);
  // -log sigmoid(l) = softplus(-l); -log(1 - sigmoid(l)) = softplus(l).
  torch::Tensor nll = m * torch::softplus(-logit) + (1 - m) * torch::softplus(logit);
  LossOutput out;
  out.loss = nll.mean();
  out.terms["nll"] = Item(out.loss);
  out.terms["match_prob"] =
      Item((m * torch::sigmoid(logit) + (1 - m) * torch::sigmoid(-logit)).mean());
  return out;
}

LossOutput ContrastiveLoss(const torch::Tensor& z1, const torch::Tensor& z2,
                           const torch::Tensor& is_match, double margin) {
  TORCH_CHECK(z1.dim() == 2 && z1.sizes() == z2.sizes(),
              "contrastive: z1 and z2 must both be [B, D], got ", z1.sizes(), " and ", z2.sizes());
  TORCH_CHECK(is_match.dim() == 1 && is_match.size(0) == z1.size(0),
              "contrastive: is_match must be [B]");
  TORCH_CHECK(margin > 0 && std::isfinite(margin), "contrastive: the margin must be > 0");
  const torch::Tensor distance = Euclidean(z1 - z2);
  const torch::Tensor m = MatchAsFloat(is_match, distance);
  const torch::Tensor shortfall = (margin - distance).clamp_min(0);
  const torch::Tensor per_pair = m * distance.pow(2) + (1 - m) * shortfall.pow(2);
  LossOutput out;
  out.loss = per_pair.mean();
  out.terms["loss"] = Item(out.loss);
  const double negatives = Item((1 - m).sum());
  out.terms["active_negatives"] =
      negatives > 0 ? Item(((1 - m) * shortfall.gt(0).to(m.dtype())).sum()) / negatives : 0.0;
  return out;
}

// ---------------------------------------------------------------------------
// HIB
// ---------------------------------------------------------------------------

EmbeddingSamples SampleEmbeddings(const EncoderOutput& out, int64_t samples,
                                  const torch::Tensor& noise) {
  TORCH_CHECK(samples >= 1, "need at least one sample");
  EmbeddingSamples s;
  if (out.kind == Kind::kGaussian) {
    TORCH_CHECK(out.mean.dim() == 2 && out.var.sizes() == out.mean.sizes(),
                "gaussian output must have mean and var [B, D]");
    const int64_t batch = out.mean.size(0), dim = out.mean.size(1);
    torch::Tensor eps =
        noise.defined() ? noise : torch::randn({batch, samples, dim}, out.mean.options());
    TORCH_CHECK(eps.sizes() == c10::IntArrayRef({batch, samples, dim}), "noise must be [", batch,
                ", ", samples, ", ", dim, "], got ", eps.sizes());
    s.z = out.mean.unsqueeze(1) + out.var.sqrt().unsqueeze(1) * eps;
    s.weights = torch::full({batch, samples}, 1.0 / samples, out.mean.options());
    return s;
  }
  TORCH_CHECK(out.kind == Kind::kMog, "sampling needs a gaussian or mog output");
  TORCH_CHECK(out.mean.dim() == 3 && out.var.sizes() == out.mean.sizes(),
              "mog output must have mean and var [B, C, D]");
  const int64_t batch = out.mean.size(0), components = out.mean.size(1), dim = out.mean.size(2);
  TORCH_CHECK(samples % components == 0, "mixture sampling is stratified: K = ", samples,
              " must be a multiple of C = ", components);
  const int64_t per_component = samples / components;
  torch::Tensor eps =
      noise.defined() ? noise : torch::randn({batch, samples, dim}, out.mean.options());
  TORCH_CHECK(eps.sizes() == c10::IntArrayRef({batch, samples, dim}), "noise must be [", batch,
              ", ", samples, ", ", dim, "], got ", eps.sizes());
  // Sample k comes from component k / (K/C).
  torch::Tensor component =
      torch::arange(samples, torch::dtype(torch::kLong).device(out.mean.device()))
          .div(per_component, "floor");
  torch::Tensor mean = out.mean.index_select(1, component);
  torch::Tensor var = out.var.index_select(1, component);
  s.z = mean + var.sqrt() * eps;
  torch::Tensor weights = out.weights.defined() ? out.weights
                                                : torch::full({batch, components}, 1.0 / components,
                                                              out.mean.options());
  s.weights = weights.index_select(1, component) / static_cast<double>(per_component);
  return s;
}

torch::Tensor GaussianKlToStandardNormal(const torch::Tensor& mean, const torch::Tensor& var) {
  return 0.5 * (var + mean.pow(2) - 1 - var.log()).sum(-1);
}

torch::Tensor KlToStandardNormal(const EncoderOutput& out, MogKl mode,
                                 const EmbeddingSamples& samples) {
  if (out.kind == Kind::kGaussian) return GaussianKlToStandardNormal(out.mean, out.var);
  TORCH_CHECK(out.kind == Kind::kMog, "KL needs a gaussian or mog output");
  const int64_t components = out.mean.size(1);
  torch::Tensor weights = out.weights.defined() ? out.weights
                                                : torch::full({out.mean.size(0), components},
                                                              1.0 / components, out.mean.options());
  if (mode == MogKl::kComponentUpperBound) {
    return (weights * GaussianKlToStandardNormal(out.mean, out.var)).sum(-1);
  }
  // log p(z|x) = logsumexp_c [log pi_c + log N(z; mu_c, S_c)] at every sample.
  torch::Tensor z = samples.z;  // [B, K, D]
  torch::Tensor log_components =
      DiagonalGaussianLogDensity(z.unsqueeze(2), out.mean.unsqueeze(1), out.var.unsqueeze(1)) +
      weights.log().unsqueeze(1);  // [B, K, C]
  torch::Tensor log_q = torch::logsumexp(log_components, -1);
  torch::Tensor log_r = -0.5 * (z.pow(2) + kLog2Pi).sum(-1);
  return (samples.weights * (log_q - log_r)).sum(-1);
}

// The variances learn how far an input's mean strays from where its label's
// other inputs lie: the negative mutual likelihood score of PFE (Shi & Jain,
// "Probabilistic Face Embeddings", ICCV 2019, eq. 3, the loss of section 3.3)
// over the same-label pairs,
//   1/2 sum_d [ (mu1d - mu2d)^2 / (s1d + s2d) + log(s1d + s2d) ],
// with the means detached: the term never pulls two same-label means
// together or apart (that is the match term's work), it asks the variances to
// cover how far the means lie apart, and its optimum is s1d + s2d =
// (mu1d - mu2d)^2. Its gradient reaches the variance head and, through it,
// the shared body: the body must learn to see what displaces a mean (an
// occluding rectangle). PFE trains its uncertainty module on a fixed
// backbone; here a head on body features that no loss taught to see
// occlusion left eta flat (bench/RESULTS.md, "Teaching the variances").
// HIB's match term alone moves the variances little within a short training
// run (an occluded input's eta rose by under 5% until half of it was
// hidden); with this term eta follows occlusion. The constant D/2 log 2 pi is
// left out. Zero without a same-label pair.
torch::Tensor VarianceMlsLoss(const EncoderOutput& x1, const EncoderOutput& x2,
                              const torch::Tensor& is_match) {
  TORCH_CHECK(x1.kind == Kind::kGaussian && x2.kind == Kind::kGaussian,
              "the variance term needs gaussian embeddings (components 1)");
  torch::Tensor same = is_match.to(torch::kBool);
  if (same.sum().item<int64_t>() == 0) return torch::zeros({}, x1.mean.options());
  torch::Tensor diff2 = (x1.mean.detach() - x2.mean.detach()).pow(2).index({same});
  torch::Tensor v = (x1.var + x2.var).index({same});
  return 0.5 * (diff2 / v + v.log()).sum(-1).mean();
}

LossOutput HibLoss(const EncoderOutput& x1, const EncoderOutput& x2, const torch::Tensor& is_match,
                   const torch::Tensor& a, const torch::Tensor& b, const HibOptions& options,
                   const torch::Tensor& noise1, const torch::Tensor& noise2) {
  TORCH_CHECK(x1.kind == x2.kind, "HIB: both sides must be of the same kind");
  EmbeddingSamples s1 = SampleEmbeddings(x1, options.samples, noise1);
  EmbeddingSamples s2 = SampleEmbeddings(x2, options.samples, noise2);
  TORCH_CHECK(s1.z.sizes() == s2.z.sizes(), "HIB: the two sides differ in shape");
  const int64_t batch = s1.z.size(0);
  TORCH_CHECK(is_match.dim() == 1 && is_match.size(0) == batch, "HIB: is_match must be [B]");

  // All K x K sample pairs of every input pair.
  torch::Tensor logit = -a * Euclidean(s1.z.unsqueeze(2) - s2.z.unsqueeze(1)) + b;  // [B, K, K]
  torch::Tensor pair_weight = s1.weights.unsqueeze(2) * s2.weights.unsqueeze(1);    // [B, K, K]
  torch::Tensor m = MatchAsFloat(is_match, logit).view({batch, 1, 1});

  torch::Tensor nll;
  if (options.likelihood == HibLikelihood::kExpectedLogLikelihood) {
    torch::Tensor per_pair = m * torch::softplus(-logit) + (1 - m) * torch::softplus(logit);
    nll = (pair_weight * per_pair).sum({1, 2});
  } else {
    torch::Tensor log_w = pair_weight.log();
    torch::Tensor log_p_match = torch::logsumexp(log_w + torch::log_sigmoid(logit), {1, 2});
    torch::Tensor log_p_non = torch::logsumexp(log_w + torch::log_sigmoid(-logit), {1, 2});
    torch::Tensor mb = m.view({batch});
    nll = -(mb * log_p_match + (1 - mb) * log_p_non);
  }
  torch::Tensor kl =
      KlToStandardNormal(x1, options.mog_kl, s1) + KlToStandardNormal(x2, options.mog_kl, s2);

  LossOutput out;
  out.loss = nll.mean() + options.beta * kl.mean();
  if (options.variance_mls > 0) {
    torch::Tensor v = VarianceMlsLoss(x1, x2, is_match);
    out.loss = out.loss + options.variance_mls * v;
    out.terms["variance_mls"] = Item(v);
  }
  out.terms["nll"] = Item(nll.mean());
  out.terms["kl"] = Item(kl.mean());
  out.terms["match_prob"] =
      Item((pair_weight * (m * torch::sigmoid(logit) + (1 - m) * torch::sigmoid(-logit)))
               .sum({1, 2})
               .mean());
  return out;
}

// ---------------------------------------------------------------------------
// SPE and prototypical networks
// ---------------------------------------------------------------------------

SpePrototypes ComputeSpePrototypes(const torch::Tensor& support_mean,
                                   const torch::Tensor& support_var,
                                   const torch::Tensor& support_labels,
                                   const torch::Tensor& sigma_eps2) {
  TORCH_CHECK(support_mean.dim() == 2 && support_var.sizes() == support_mean.sizes(),
              "SPE: support mean and var must be [N, D]");
  TORCH_CHECK(support_labels.dim() == 1 && support_labels.size(0) == support_mean.size(0),
              "SPE: support labels must be [N]");
  auto [labels, inverse] = UniqueLabels(support_labels);
  torch::Tensor member = Membership(inverse, labels.size(0), support_mean.options());  // [Y, N]
  torch::Tensor precision = 1.0 / (support_var + sigma_eps2);                          // 1 / v_i
  torch::Tensor v_y = 1.0 / member.matmul(precision);
  SpePrototypes p;
  p.labels = labels;
  p.rho = v_y * member.matmul(support_mean * precision);
  p.w = v_y + sigma_eps2;
  return p;
}

torch::Tensor SpeLogPosterior(const SpePrototypes& prototypes, const torch::Tensor& query_mean,
                              const torch::Tensor& query_var, int64_t samples,
                              const torch::Tensor& noise) {
  TORCH_CHECK(samples >= 1, "SPE: need at least one sample");
  TORCH_CHECK(query_mean.dim() == 2 && query_var.sizes() == query_mean.sizes(),
              "SPE: query mean and var must be [Q, D]");
  const int64_t queries = query_mean.size(0), dim = query_mean.size(1);
  torch::Tensor eps =
      noise.defined() ? noise : torch::randn({queries, samples, dim}, query_mean.options());
  TORCH_CHECK(eps.sizes() == c10::IntArrayRef({queries, samples, dim}), "SPE: noise must be [",
              queries, ", ", samples, ", ", dim, "]");
  torch::Tensor z = query_mean.unsqueeze(1) + query_var.sqrt().unsqueeze(1) * eps;  // [Q, S, D]
  torch::Tensor log_density =
      DiagonalGaussianLogDensity(z.unsqueeze(2), prototypes.rho, prototypes.w);  // [Q, S, Y]
  torch::Tensor log_softmax = torch::log_softmax(log_density, -1);
  return torch::logsumexp(log_softmax, 1) - std::log(static_cast<double>(samples));
}

LossOutput SpeLoss(const torch::Tensor& support_mean, const torch::Tensor& support_var,
                   const torch::Tensor& support_labels, const torch::Tensor& query_mean,
                   const torch::Tensor& query_var, const torch::Tensor& query_labels,
                   const torch::Tensor& sigma_eps2, const SpeOptions& options,
                   const torch::Tensor& noise) {
  SpePrototypes proto = ComputeSpePrototypes(support_mean, support_var, support_labels, sigma_eps2);
  TORCH_CHECK(query_mean.dim() == 2 && query_var.sizes() == query_mean.sizes() &&
                  query_mean.size(1) == support_mean.size(1),
              "SPE: query mean and var must be [Q, D] with the support's D");
  TORCH_CHECK(query_labels.dim() == 1 && query_labels.size(0) == query_mean.size(0),
              "SPE: query labels must be [Q]");
  torch::Tensor target = TargetIndex(proto.labels, query_labels);
  const int64_t queries = query_mean.size(0), dim = query_mean.size(1);
  const int64_t samples = options.samples;
  TORCH_CHECK(samples >= 1, "SPE: need at least one sample");

  LossOutput out;
  torch::Tensor nll;
  if (options.sampler == SpeSampler::kNaive) {
    torch::Tensor log_post = SpeLogPosterior(proto, query_mean, query_var, samples, noise);
    nll = -log_post.gather(1, target.unsqueeze(1)).squeeze(1);
    out.terms["accuracy"] = Item(log_post.argmax(1).eq(target).to(torch::kDouble).mean());
  } else {
    torch::Tensor rho_t = proto.rho.index_select(0, target);  // [Q, D]
    torch::Tensor w_t = proto.w.index_select(0, target);
    torch::Tensor total = query_var + w_t;
    // N(z; mu_x, s2_x) N(z; rho_t, w_t) = N(mu_x; rho_t, s2_x + w_t) N(z; m~, s~2).
    torch::Tensor log_evidence = DiagonalGaussianLogDensity(query_mean, rho_t, total);  // [Q]
    torch::Tensor inter_var = query_var * w_t / total;
    torch::Tensor inter_mean = (w_t * query_mean + query_var * rho_t) / total;
    torch::Tensor eps =
        noise.defined() ? noise : torch::randn({queries, samples, dim}, query_mean.options());
    TORCH_CHECK(eps.sizes() == c10::IntArrayRef({queries, samples, dim}), "SPE: noise must be [",
                queries, ", ", samples, ", ", dim, "]");
    torch::Tensor z = inter_mean.unsqueeze(1) + inter_var.sqrt().unsqueeze(1) * eps;  // [Q, S, D]
    torch::Tensor log_norm = torch::logsumexp(
        DiagonalGaussianLogDensity(z.unsqueeze(2), proto.rho, proto.w), -1);  // [Q, S]
    // log p(t|x) = log N(mu_x; rho_t, s2_x + w_t) + log mean_s 1 / sum_y N(z_s; rho_y, w_y).
    torch::Tensor log_p =
        log_evidence + torch::logsumexp(-log_norm, 1) - std::log(static_cast<double>(samples));
    nll = -log_p;
    // Accuracy at the query mean: deterministic and draws no extra randomness.
    torch::Tensor at_mean = DiagonalGaussianLogDensity(query_mean.unsqueeze(1), proto.rho, proto.w);
    out.terms["accuracy"] = Item(at_mean.argmax(1).eq(target).to(torch::kDouble).mean());
  }
  out.loss = nll.mean();
  out.terms["nll"] = Item(out.loss);
  out.terms["sigma_eps2"] = Item(sigma_eps2);
  return out;
}

LossOutput ProtoNetLoss(const torch::Tensor& support, const torch::Tensor& support_labels,
                        const torch::Tensor& query, const torch::Tensor& query_labels) {
  TORCH_CHECK(support.dim() == 2 && query.dim() == 2 && support.size(1) == query.size(1),
              "ProtoNet: support [N, D] and query [Q, D] needed");
  TORCH_CHECK(support_labels.dim() == 1 && support_labels.size(0) == support.size(0),
              "ProtoNet: support labels must be [N]");
  TORCH_CHECK(query_labels.dim() == 1 && query_labels.size(0) == query.size(0),
              "ProtoNet: query labels must be [Q]");
  auto [labels, inverse] = UniqueLabels(support_labels);
  torch::Tensor member = Membership(inverse, labels.size(0), support.options());  // [Y, N]
  torch::Tensor prototypes = member.matmul(support) / member.sum(1, /*keepdim=*/true);
  torch::Tensor target = TargetIndex(labels, query_labels);
  torch::Tensor logits = -(query.unsqueeze(1) - prototypes.unsqueeze(0)).pow(2).sum(-1);
  torch::Tensor log_p = torch::log_softmax(logits, 1);
  LossOutput out;
  out.loss = -log_p.gather(1, target.unsqueeze(1)).mean();
  out.terms["nll"] = Item(out.loss);
  out.terms["accuracy"] = Item(logits.argmax(1).eq(target).to(torch::kDouble).mean());
  return out;
}

// ---------------------------------------------------------------------------
// DIMCO
// ---------------------------------------------------------------------------

LossOutput DimcoLoss(const torch::Tensor& log_probs, const torch::Tensor& labels,
                     const DimcoOptions& options, const torch::Tensor& pairs) {
  TORCH_CHECK(log_probs.dim() == 3, "DIMCO: log_probs must be [B, d, k], got ", log_probs.sizes());
  const int64_t batch = log_probs.size(0), dims = log_probs.size(1), k = log_probs.size(2);
  TORCH_CHECK(labels.dim() == 1 && labels.size(0) == batch, "DIMCO: labels must be [B]");
  torch::Tensor p = log_probs.exp();

  // H(X~): entropy of the batch-mean distribution, summed over dimensions.
  torch::Tensor p_bar = p.mean(0);  // [d, k]
  torch::Tensor h_codes = Entropy(p_bar).sum();

  // H(X~|Y): the same per class, weighted by the class's batch frequency.
  auto [classes, inverse] = UniqueLabels(labels);
  torch::Tensor member = Membership(inverse, classes.size(0), p.options());  // [Y, B]
  torch::Tensor counts = member.sum(1);                                      // [Y]
  torch::Tensor p_bar_y =
      (member.matmul(p.reshape({batch, dims * k})) / counts.unsqueeze(1)).view({-1, dims, k});
  torch::Tensor h_given_y = ((counts / batch) * Entropy(p_bar_y).sum(-1)).sum();

  // L_ind over random dimension pairs.
  torch::Tensor independence = torch::zeros({}, p.options());
  torch::Tensor pair_index = pairs;
  if (!pair_index.defined() && dims > 1) {
    const int64_t count = options.independence_pairs > 0 ? options.independence_pairs : dims;
    torch::Tensor first = torch::randint(dims, {count}, torch::kLong);
    torch::Tensor second = torch::randint(dims - 1, {count}, torch::kLong);
    second = second + second.ge(first).to(torch::kLong);  // uniform over the other d - 1
    pair_index = torch::stack({first, second}, 1);
  }
  if (pair_index.defined() && pair_index.numel() > 0) {
    TORCH_CHECK(pair_index.dim() == 2 && pair_index.size(1) == 2, "DIMCO: pairs must be [P, 2]");
    torch::Tensor i1 = pair_index.select(1, 0).to(torch::kLong).to(p.device());
    torch::Tensor i2 = pair_index.select(1, 1).to(torch::kLong).to(p.device());
    torch::Tensor p1 = p.index_select(1, i1);  // [B, P, k]
    torch::Tensor p2 = p.index_select(1, i2);
    // Batch estimate of the joint of (x~_i1, x~_i2): mean of per-item outer products.
    torch::Tensor joint = torch::einsum("bpi,bpj->pij", {p1, p2}) / static_cast<double>(batch);
    torch::Tensor product = p_bar.index_select(0, i1).unsqueeze(2) *
                            p_bar.index_select(0, i2).unsqueeze(1);  // [P, k, k]
    torch::Tensor kl = (product * (product.clamp_min(kTinyProbability).log() -
                                   joint.clamp_min(kTinyProbability).log()))
                           .sum({1, 2});
    independence = kl.mean();
  }

  LossOutput out;
  out.loss = -h_codes + h_given_y + options.lambda * independence;
  out.terms["h_codes"] = Item(h_codes);
  out.terms["h_codes_given_y"] = Item(h_given_y);
  out.terms["mutual_information"] = Item(h_codes - h_given_y);
  out.terms["independence"] = Item(independence);
  return out;
}

// ---------------------------------------------------------------------------
// F-statistic
// ---------------------------------------------------------------------------

LossOutput FStatisticLoss(const torch::Tensor& embeddings, const torch::Tensor& labels,
                          const FStatisticOptions& options) {
  TORCH_CHECK(embeddings.dim() == 2, "F-statistic: embeddings must be [B, D]");
  TORCH_CHECK(labels.dim() == 1 && labels.size(0) == embeddings.size(0),
              "F-statistic: labels must be [B]");
  TORCH_CHECK(options.top_dims >= 1, "F-statistic: top_dims must be >= 1");
  const int64_t dims = embeddings.size(1);
  auto [classes, inverse] = UniqueLabels(labels);
  const int64_t num_classes = classes.size(0);
  torch::Tensor member = Membership(inverse, num_classes, embeddings.options());  // [Y, B]
  torch::Tensor counts = member.sum(1);                                           // [Y]
  torch::Tensor means = member.matmul(embeddings) / counts.unsqueeze(1);          // [Y, D]
  torch::Tensor within_class =
      member.matmul((embeddings - means.index_select(0, inverse)).pow(2));  // [Y, D]

  LossOutput out;
  torch::Tensor pairs = torch::triu_indices(num_classes, num_classes, 1);  // [2, P]
  torch::Tensor a = pairs[0], b = pairs[1];
  torch::Tensor n_a = counts.index_select(0, a), n_b = counts.index_select(0, b);
  // n_a + n_b - 2 degrees of freedom; a pair of two singletons has none.
  torch::Tensor valid = (n_a + n_b - 2).ge(1);
  a = a.masked_select(valid);
  b = b.masked_select(valid);
  n_a = n_a.masked_select(valid).unsqueeze(1);
  n_b = n_b.masked_select(valid).unsqueeze(1);
  const int64_t num_pairs = a.size(0);
  out.terms["pairs"] = static_cast<double>(num_pairs);
  if (num_pairs == 0) {
    out.loss = (embeddings * 0).sum();  // keeps the graph; nothing to separate
    out.terms["mean_log_phi"] = 0.0;
    return out;
  }
  torch::Tensor m_a = means.index_select(0, a), m_b = means.index_select(0, b);  // [P, D]
  torch::Tensor pair_mean = (m_a + m_b) / 2;
  torch::Tensor between = n_a * (m_a - pair_mean).pow(2) + n_b * (m_b - pair_mean).pow(2);
  torch::Tensor within = within_class.index_select(0, a) + within_class.index_select(0, b);
  // x = s / (s + n~) = between / (between + within); clamped as in the
  // authors' code so that log Phi and the beta derivative stay finite. A
  // dimension constant over both classes (0 / 0) separates nothing: x = 0,
  // so top-d never picks it. The guard must not be a magic epsilon: 1e-300 is
  // 0 in float32, which made such a dimension NaN (and top-d chose the NaN).
  // The division runs on a denominator of 1 there so that no NaN reaches the
  // gradient either.
  torch::Tensor total = between + within;
  torch::Tensor separable = total.gt(0);
  torch::Tensor ratio = between / torch::where(separable, total, torch::ones_like(total));
  torch::Tensor x =
      torch::where(separable, ratio, torch::zeros_like(ratio)).clamp(1e-37, 1.0 - 1e-5);
  torch::Tensor half = torch::full({1, 1}, 0.5, torch::kDouble);
  torch::Tensor df = ((n_a + n_b - 2) / 2).to(torch::kDouble);  // [P, 1]
  torch::Tensor phi = RegularizedIncompleteBeta(x, half, df);   // [P, D]
  const int64_t top = std::min(options.top_dims, dims);
  torch::Tensor log_phi = std::get<0>(phi.topk(top, /*dim=*/1)).log();  // [P, top]
  out.loss = -log_phi.sum();
  out.terms["mean_log_phi"] = Item(log_phi.mean());
  return out;
}

}  // namespace hedgedb::encoders
