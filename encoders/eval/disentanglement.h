// Disentanglement of an embedding with respect to known discrete factors, as
// the F-statistic paper measures it (Ridgeway & Mozer 2018, section 4):
//
//   modularity:   per dimension i, the mutual information m_if between the
//                 dimension (a 20-bin equal-width histogram of its values)
//                 and every factor f; with theta_i = max_f m_if and the
//                 template t_i holding theta_i at the argmax and 0 elsewhere,
//                 delta_i = sum_f (m_if - t_if)^2 / (theta_i^2 (N - 1)) for N
//                 factors; modularity = mean over i of 1 - delta_i. 1: every
//                 dimension informs about one factor at most.
//   explicitness: per factor value, a one-versus-rest logistic regression
//                 from the whole embedding, fitted on training items; its
//                 ROC AUC on the evaluated items; explicitness = mean AUC
//                 over all factor values. 1: every value is linearly readable.
//
// For composites, the factors are the items at each position (the leftmost
// item is factor 0). Torch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "hedgedb/status.h"

namespace hedgedb {
namespace encoders {

// Row-major embeddings: n rows of dim floats.
struct EmbeddingMatrix {
  const float* values = nullptr;
  int64_t n = 0;
  int64_t dim = 0;
};

// The factors of composite labels: label = sum_p f_p * prod_{q > p} sizes[q]
// (mixed radix, leftmost position most significant). factors gets n x F
// values, row-major. InvalidArgument for a label outside the radix.
Status FactorsOfLabels(const std::vector<int64_t>& labels, const std::vector<int64_t>& sizes,
                       std::vector<int64_t>* factors);

struct ModularityResult {
  double modularity = 0;
  // Dimensions scored: a dimension with no information about any factor
  // (theta_i = 0, e.g. constant) has no template and is left out.
  int64_t dimensions_scored = 0;
};
// Needs at least 2 factors (delta divides by N - 1) and bins >= 2.
Status Modularity(const EmbeddingMatrix& embeddings, const std::vector<int64_t>& factors,
                  const std::vector<int64_t>& sizes, int bins, ModularityResult* result);

struct ExplicitnessOptions {
  int iterations = 300;  // full-batch gradient steps (Nesterov) per classifier
  // L2 penalty: the loss is the mean log loss + l2 / (2 n) ||w||^2, i.e.
  // scikit-learn's default C = 1 for l2 = 1 (the paper used scikit-learn).
  double l2 = 1.0;
};
struct ExplicitnessResult {
  double explicitness = 0;         // mean AUC over every factor value scored
  std::vector<double> per_factor;  // mean AUC of each factor's values
  int64_t values_scored = 0;       // values present in both sets with both classes
};
// Features are standardised with the training set's mean and sd.
Status Explicitness(const EmbeddingMatrix& train, const std::vector<int64_t>& train_factors,
                    const EmbeddingMatrix& test, const std::vector<int64_t>& test_factors,
                    const std::vector<int64_t>& sizes, const ExplicitnessOptions& options,
                    ExplicitnessResult* result);

// Area under the ROC curve of `scores` for the positives (ties count 1/2).
// InvalidArgument without both classes.
Status RocAuc(const std::vector<double>& scores, const std::vector<uint8_t>& positive, double* auc);

}  // namespace encoders
}  // namespace hedgedb
