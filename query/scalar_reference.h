// Straightforward scalar loops for the Monte Carlo and DIMCO scores: the
// baseline of bench/bench_scoring.cc and the reference of tests/query. Not
// part of the library's code paths; header-only so both can include it.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "query/kernels.h"
#include "query/scorer.h"

namespace hedgedb {
namespace query {

// HIB eq. 5 with the scorer's sample banks and stratification, one plain loop
// per pair of samples and dimension, std::sqrt and std::exp.
class ScalarMcReference {
 public:
  ScalarMcReference(const RowShape& shape, const ScoreParams& params, const float* query_row,
                    uint64_t query_stream = kQuerySampleStream,
                    uint64_t item_stream = kItemSampleStream)
      : mog_(shape.kind == Kind::kMog),
        dim_(shape.dim),
        components_(shape.kind == Kind::kMog ? shape.components : 1),
        samples_(params.samples),
        a_(params.match_a),
        b_(params.match_b),
        query_eps_(
            GenerateNormalBank(params.seed, query_stream, static_cast<size_t>(samples_) * dim_)),
        item_eps_(
            GenerateNormalBank(params.seed, item_stream, static_cast<size_t>(samples_) * dim_)),
        query_samples_(query_eps_.size()),
        query_weights_(samples_),
        item_samples_(item_eps_.size()),
        item_weights_(samples_) {
    Sample(query_row, query_eps_, &query_samples_, &query_weights_);
  }

  float Score(const float* item_row) const {
    Sample(item_row, item_eps_, &item_samples_, &item_weights_);
    float sum = 0.0f;
    for (int i = 0; i < samples_; ++i) {
      for (int j = 0; j < samples_; ++j) {
        float d2 = 0.0f;
        for (int d = 0; d < dim_; ++d) {
          const float delta = query_samples_[i * dim_ + d] - item_samples_[j * dim_ + d];
          d2 += delta * delta;
        }
        const float p = 1.0f / (1.0f + std::exp(a_ * std::sqrt(d2) - b_));
        sum += query_weights_[i] * item_weights_[j] * p;
      }
    }
    return sum;
  }

 private:
  // Row layout: gaussian [mu, var]; mog [w (C), mu (C*D), var (C*D)].
  void Sample(const float* row, const std::vector<float>& eps, std::vector<float>* samples,
              std::vector<float>* weights) const {
    const int per_component = samples_ / components_;
    const float* means = mog_ ? row + components_ : row;
    const float* vars = means + components_ * dim_;
    for (int i = 0; i < samples_; ++i) {
      const int c = i / per_component;
      for (int d = 0; d < dim_; ++d) {
        (*samples)[i * dim_ + d] =
            means[c * dim_ + d] + std::sqrt(vars[c * dim_ + d]) * eps[i * dim_ + d];
      }
      (*weights)[i] = (mog_ ? row[c] : 1.0f) / static_cast<float>(per_component);
    }
  }

 private:
  bool mog_;
  int dim_;
  int components_;
  int samples_;
  float a_;
  float b_;
  std::vector<float> query_eps_;
  std::vector<float> item_eps_;
  std::vector<float> query_samples_;
  std::vector<float> query_weights_;
  mutable std::vector<float> item_samples_;
  mutable std::vector<float> item_weights_;
};

// DIMCO score of one code row: sum_i table[i, code_i].
inline float ScalarCodeScore(const float* table, int d, int k, const uint8_t* code) {
  float sum = 0.0f;
  for (int i = 0; i < d; ++i) sum += table[i * k + code[i]];
  return sum;
}

}  // namespace query
}  // namespace hedgedb
