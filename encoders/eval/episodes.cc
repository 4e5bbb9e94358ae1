#include "encoders/eval/episodes.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "encoders/data/batch_samplers.h"
#include "encoders/losses/losses.h"

namespace hedgedb {
namespace encoders {
namespace {

// Rows `index` of a row-major float matrix with `cols` columns, as [n, cols].
torch::Tensor Rows(const std::vector<float>& values, int64_t cols,
                   const std::vector<int64_t>& index) {
  torch::Tensor out = torch::empty({static_cast<int64_t>(index.size()), cols}, torch::kFloat);
  float* p = out.data_ptr<float>();
  for (size_t i = 0; i < index.size(); ++i) {
    std::copy_n(values.data() + index[i] * cols, cols, p + i * size_t(cols));
  }
  return out;
}

// Predicted class index (into the sorted episode classes) of every query.
torch::Tensor Predict(const ModelSpec& spec, const Embeddings& support_set,
                      const std::vector<int64_t>& support, const torch::Tensor& support_class,
                      const Embeddings& query_set, const std::vector<int64_t>& queries,
                      const EpisodicOptions& options, torch::Generator& generator) {
  const int64_t d = support_set.dim;
  if (spec.kind == Kind::kPoint) {
    const torch::Tensor s = Rows(support_set.vec, d, support), q = Rows(query_set.vec, d, queries);
    const int64_t classes = support_class.max().item<int64_t>() + 1;
    const torch::Tensor member = torch::one_hot(support_class, classes).t().to(torch::kFloat);
    const torch::Tensor centres = member.matmul(s) / member.sum(1, true);
    return torch::cdist(q, centres).argmin(1);
  }
  // SPE: the stored variance is s^2 + sigma_eps^2 (embedder.cc); the
  // prototypes and the query's own spread take s^2.
  const double eps2 = spec.sigma_eps2;
  const torch::Tensor sigma = torch::tensor(eps2, torch::kFloat);
  const torch::Tensor s2_support = (Rows(support_set.var, d, support) - eps2).clamp_min(0);
  const SpePrototypes prototypes =
      ComputeSpePrototypes(Rows(support_set.mean, d, support), s2_support, support_class, sigma);
  const torch::Tensor q_mean = Rows(query_set.mean, d, queries);
  const torch::Tensor q_s2 = (Rows(query_set.var, d, queries) - eps2).clamp_min(0);
  const torch::Tensor noise =
      at::randn({q_mean.size(0), int64_t(options.samples), d}, generator).to(torch::kFloat);
  return SpeLogPosterior(prototypes, q_mean, q_s2, options.samples, noise).argmax(1);
}

EpisodeAccuracy Summarise(const std::vector<double>& accuracies) {
  EpisodeAccuracy a;
  for (double x : accuracies) a.mean += x;
  a.mean /= double(accuracies.size());
  for (double x : accuracies) a.sd += (x - a.mean) * (x - a.mean);
  a.sd = accuracies.size() > 1 ? std::sqrt(a.sd / double(accuracies.size() - 1)) : 0.0;
  return a;
}

}  // namespace

bool HasEpisodeRule(const ModelSpec& spec) {
  return spec.kind == Kind::kPoint || (spec.method == Method::kSpe && spec.kind == Kind::kGaussian);
}

Status RequireEpisodeRule(const ModelSpec& spec) {
  if (HasEpisodeRule(spec)) return Status::OK();
  return Status::InvalidArgument(std::string("episodic accuracy needs an SPE or a point model; "
                                             "this one is ") +
                                 MethodName(spec.method));
}

Status EvaluateEpisodes(const ModelSpec& spec, const Embeddings& clean, const Embeddings& corrupt,
                        const std::vector<int64_t>& labels, const EpisodicOptions& options,
                        EpisodeResult* result) {
  HEDGEDB_RETURN_IF_ERROR(RequireEpisodeRule(spec));
  if (options.episodes < 1 || options.shots < 1 || options.queries < 1 || options.samples < 1) {
    return Status::InvalidArgument("episodes, shots, queries and samples must be >= 1");
  }
  if (static_cast<int64_t>(labels.size()) != clean.n ||
      (corrupt.n != 0 && (corrupt.n != clean.n || corrupt.dim != clean.dim))) {
    return Status::InvalidArgument("episodes: embeddings and labels differ in count");
  }
  // The training episodes' sampler: every class with shots + queries items.
  EpisodeOptions sampling;
  sampling.n_support = static_cast<int>(options.shots);
  sampling.n_query = static_cast<int>(options.queries);
  sampling.seed = SeededRng::DeriveSeed(options.seed, 0xE915u);
  std::unique_ptr<EpisodeSampler> sampler;
  HEDGEDB_RETURN_IF_ERROR(EpisodeSampler::Create(labels, sampling, &sampler));
  if (sampler->n_way() < 2) {
    return Status::InvalidArgument("episodes: fewer than 2 classes have " +
                                   std::to_string(options.shots + options.queries) +
                                   " items (shots + queries)");
  }
  const bool has_corrupt = corrupt.n > 0;
  std::vector<double> by_condition[3];
  try {
    torch::NoGradGuard no_grad;
    for (int64_t e = 0; e < options.episodes; ++e) {
      const Episode episode = sampler->Next();
      const std::vector<int64_t> support_class(episode.support_slot.begin(),
                                               episode.support_slot.end());
      const std::vector<int64_t> query_class(episode.query_slot.begin(), episode.query_slot.end());
      const torch::Tensor s_class = torch::tensor(support_class, torch::kLong);
      const torch::Tensor q_class = torch::tensor(query_class, torch::kLong);
      // The same sampler noise for every condition of an episode.
      const uint64_t noise_seed = SeededRng::DeriveSeed(options.seed, 0x5A3Fu + uint64_t(e));
      const auto accuracy = [&](const Embeddings& s, const Embeddings& q) {
        torch::Generator generator = at::detail::createCPUGenerator(noise_seed);
        return Predict(spec, s, episode.support, s_class, q, episode.query, options, generator)
            .eq(q_class)
            .to(torch::kDouble)
            .mean()
            .item<double>();
      };
      by_condition[0].push_back(accuracy(clean, clean));
      if (has_corrupt) {
        by_condition[1].push_back(accuracy(corrupt, clean));
        by_condition[2].push_back(accuracy(clean, corrupt));
      }
    }
  } catch (const c10::Error& err) {
    return Status::Internal(std::string("episodic evaluation failed: ") +
                            err.what_without_backtrace());
  }
  const LabelIndex index(labels);
  result->classes = sampler->n_way();
  result->skipped_classes = index.num_classes() - sampler->n_way();
  result->clean = Summarise(by_condition[0]);
  if (has_corrupt) {
    result->corrupt_support = Summarise(by_condition[1]);
    result->corrupt_query = Summarise(by_condition[2]);
  }
  return Status::OK();
}

}  // namespace encoders
}  // namespace hedgedb
