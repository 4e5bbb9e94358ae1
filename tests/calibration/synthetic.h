// Synthetic labelled scores with known true match probabilities.
#pragma once

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "calibration/metrics.h"

namespace hedgedb {
namespace calibration {
namespace testing {

inline double TrueSigmoid(double z) { return 1 / (1 + std::exp(-z)); }

// A population of scores: Draw() returns a raw score, TrueProb() is
// P(match | score).
struct Population {
  std::function<double(std::mt19937_64&)> draw;
  std::function<double(double)> true_prob;
  bool probability_score = true;
};

// mc-like scores s = sigmoid(u), u ~ N(-1.5, 1.5^2); logit P = 1.3 logit s - 3.5
// (logistic in logit s: what Platt and beta can represent exactly). Base rate ~2%.
inline Population LogisticPopulation() {
  Population p;
  p.draw = [](std::mt19937_64& rng) {
    std::normal_distribution<double> u(-1.5, 1.5);
    return TrueSigmoid(u(rng));
  };
  p.true_prob = [](double s) { return TrueSigmoid(1.3 * std::log(s / (1 - s)) - 3.5); };
  return p;
}

// Uniform scores with a staircase P: 0.005 below 0.5, 0.04 up to 0.85, 0.2
// above (no logistic curve fits it). Base rate ~4.7%.
inline Population StepPopulation() {
  Population p;
  p.draw = [](std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0, 1)(rng); };
  p.true_prob = [](double s) { return s < 0.5 ? 0.005 : s < 0.85 ? 0.04 : 0.2; };
  return p;
}

// Unbounded l2-like scores s ~ N(-3, 1), P = sigmoid(2 s + 1). Base rate ~3%.
inline Population UnboundedPopulation() {
  Population p;
  p.draw = [](std::mt19937_64& rng) { return std::normal_distribution<double>(-3, 1)(rng); };
  p.true_prob = [](double s) { return TrueSigmoid(2 * s + 1); };
  p.probability_score = false;
  return p;
}

inline std::vector<ScoredPair> Sample(const Population& pop, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<ScoredPair> pairs(n);
  for (ScoredPair& pair : pairs) {
    pair.score = pop.draw(rng);
    pair.is_match = unit(rng) < pop.true_prob(pair.score);
  }
  return pairs;
}

// Equal numbers of matches and non-matches from the population (each class
// keeps its score distribution), as a balanced training set would be.
inline std::vector<ScoredPair> SampleBalanced(const Population& pop, size_t per_class,
                                              uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<ScoredPair> pairs;
  size_t pos = 0, neg = 0;
  while (pos < per_class || neg < per_class) {
    ScoredPair pair;
    pair.score = pop.draw(rng);
    pair.is_match = unit(rng) < pop.true_prob(pair.score);
    size_t& count = pair.is_match ? pos : neg;
    if (count < per_class) {
      ++count;
      pairs.push_back(pair);
    }
  }
  return pairs;
}

inline double BaseRate(const Population& pop, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += pop.true_prob(pop.draw(rng));
  return sum / n;
}

}  // namespace testing
}  // namespace calibration
}  // namespace hedgedb
