// Random item/query rows in the scorer's layouts for the query tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "query/scorer.h"

namespace hedgedb {
namespace query {
namespace testing_rows {

// One row of `shape` (point/gaussian/mog). Means ~ N(0, mean_scale^2),
// variances ~ var_scale * U(0.2, 1.2); mog weights random positive, sum 1,
// deliberately unequal.
inline std::vector<float> RandomRow(const RowShape& shape, std::mt19937_64* rng,
                                    float mean_scale = 1.0f, float var_scale = 0.3f) {
  std::normal_distribution<float> normal(0.0f, mean_scale);
  std::uniform_real_distribution<float> uniform(0.2f, 1.2f);
  std::vector<float> row(shape.item_row_size());
  const int dim = shape.dim;
  switch (shape.kind) {
    case Kind::kPoint:
      for (auto& v : row) v = normal(*rng);
      break;
    case Kind::kGaussian:
      for (int d = 0; d < dim; ++d) {
        row[d] = normal(*rng);
        row[dim + d] = var_scale * uniform(*rng);
      }
      break;
    case Kind::kMog: {
      const int c_count = shape.components;
      float total = 0.0f;
      for (int c = 0; c < c_count; ++c) {
        row[c] = uniform(*rng) * static_cast<float>(c + 1);
        total += row[c];
      }
      for (int c = 0; c < c_count; ++c) row[c] /= total;
      for (int i = 0; i < c_count * dim; ++i) {
        row[c_count + i] = normal(*rng);
        row[c_count + c_count * dim + i] = var_scale * uniform(*rng);
      }
      break;
    }
    case Kind::kCodes:
      break;
  }
  return row;
}

// n rows back to back with `pad` spare floats after each (row stride).
inline std::vector<float> RandomRows(const RowShape& shape, size_t n, size_t pad,
                                     std::mt19937_64* rng, float mean_scale = 1.0f,
                                     float var_scale = 0.3f) {
  const size_t stride = shape.item_row_size() + pad;
  std::vector<float> rows(n * stride, -7.0f);
  for (size_t r = 0; r < n; ++r) {
    const std::vector<float> row = RandomRow(shape, rng, mean_scale, var_scale);
    std::copy(row.begin(), row.end(), rows.begin() + r * stride);
  }
  return rows;
}

inline std::vector<int64_t> Iota(size_t n) {
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(i);
  return ids;
}

// n DIMCO code rows of d symbols uniform in [0, k), `stride` bytes apart; the
// padding after each row holds 255 (never a valid symbol for k <= 255).
inline std::vector<uint8_t> RandomCodes(size_t n, int d, int k, size_t stride,
                                        std::mt19937_64* rng) {
  std::vector<uint8_t> codes(n * stride, 255);
  std::uniform_int_distribution<int> symbol(0, k - 1);
  for (size_t r = 0; r < n; ++r) {
    for (int i = 0; i < d; ++i) codes[r * stride + i] = static_cast<uint8_t>(symbol(*rng));
  }
  return codes;
}

}  // namespace testing_rows
}  // namespace query
}  // namespace hedgedb
