// Generated batches and collection specs, without GoogleTest: the engine
// tests and the crash harness (bench/crash_harness.cc) share them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "hedgedb/db.h"

namespace hedgedb {
namespace testing {

// Owning buffers for an EmbeddingView of any kind.
struct Batch {
  int64_t n = 0;
  std::vector<float> vec, mean, var, weights, logp;
  std::vector<int32_t> codes;
  std::vector<int64_t> ids, labels;

  EmbeddingView view() const {
    EmbeddingView v;
    v.n = n;
    if (!vec.empty()) v.vec = vec.data();
    if (!mean.empty()) v.mean = mean.data();
    if (!var.empty()) v.var = var.data();
    if (!weights.empty()) v.weights = weights.data();
    if (!codes.empty()) v.codes = codes.data();
    if (!logp.empty()) v.logp = logp.data();
    return v;
  }
  IngestBatch ingest() const {
    IngestBatch b;
    b.data = view();
    if (!ids.empty()) b.ids = ids.data();
    if (!labels.empty()) b.labels = labels.data();
    return b;
  }
};

// n random items of the spec's kind with ids first_id.., labels id % 10, and
// variances spread over two orders of magnitude. Codes batches also get query
// tables (logp) peaked at their codes.
inline Batch RandomBatch(const CollectionSpec& spec, int64_t n, int64_t first_id, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  Batch b;
  b.n = n;
  const int D = spec.dim, C = spec.components;
  for (int64_t i = 0; i < n; ++i) {
    b.ids.push_back(first_id + i);
    b.labels.push_back((first_id + i) % 10);
  }
  switch (spec.kind) {
    case Kind::kPoint:
      for (int64_t j = 0; j < n * D; ++j) b.vec.push_back(normal(rng));
      break;
    case Kind::kGaussian:
      for (int64_t j = 0; j < n * D; ++j) b.mean.push_back(normal(rng));
      for (int64_t i = 0; i < n; ++i) {
        float scale = 0.01f * std::pow(100.0f, uni(rng));
        for (int d = 0; d < D; ++d) b.var.push_back(scale * (0.5f + uni(rng)));
      }
      break;
    case Kind::kMog:
      for (int64_t j = 0; j < n * C * D; ++j) b.mean.push_back(normal(rng));
      for (int64_t j = 0; j < n * C * D; ++j) b.var.push_back(0.01f + 0.5f * uni(rng));
      for (int64_t i = 0; i < n; ++i) {
        float sum = 0;
        std::vector<float> w(C);
        for (int c = 0; c < C; ++c) sum += (w[c] = 0.2f + uni(rng));
        for (int c = 0; c < C; ++c) b.weights.push_back(w[c] / sum);
      }
      break;
    case Kind::kCodes: {
      const int k = spec.code_k;
      for (int64_t j = 0; j < n * D; ++j) b.codes.push_back(int32_t(rng() % uint64_t(k)));
      for (int64_t i = 0; i < n; ++i) {
        for (int d = 0; d < D; ++d) {
          // log-softmax of logits peaked at this item's code
          std::vector<float> logits(k);
          for (int s = 0; s < k; ++s) logits[s] = normal(rng);
          logits[b.codes[i * D + d]] += 3.0f;
          float mx = *std::max_element(logits.begin(), logits.end());
          double z = 0;
          for (float l : logits) z += std::exp(double(l - mx));
          for (float l : logits) b.logp.push_back(float(l - mx - std::log(z)));
        }
      }
      break;
    }
  }
  return b;
}

// A query batch for the spec (codes: log-prob tables).
inline Batch QueryBatch(const CollectionSpec& spec, int64_t n, uint64_t seed) {
  Batch b = RandomBatch(spec, n, 0, seed);
  b.ids.clear();
  b.labels.clear();
  b.codes.clear();
  return b;
}

inline CollectionSpec MakeSpec(const std::string& name, Kind kind, int dim,
                               const std::string& factory = "") {
  CollectionSpec s;
  s.name = name;
  s.kind = kind;
  s.dim = dim;
  if (kind == Kind::kMog) s.components = 2;
  if (kind == Kind::kCodes) s.code_k = 16;
  s.index_factory = factory;
  s.samples = 8;
  s.seed = 7;
  return s;
}

}  // namespace testing
}  // namespace hedgedb
