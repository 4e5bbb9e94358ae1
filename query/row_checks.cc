#include "query/row_checks.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "common/float_text.h"

namespace hedgedb {
namespace query {
namespace {

// Finite, and > 0 where positive is set.
Status CheckFloats(const float* p, size_t n, size_t per_row, const char* what, bool positive,
                   const char* row_word) {
  for (size_t j = 0; j < n; ++j) {
    if (!std::isfinite(p[j])) {
      return Status::InvalidArgument(std::string(what) + " of " + row_word + " " +
                                     std::to_string(j / per_row) + " is not finite (" +
                                     FloatText(p[j]) + ")");
    }
    if (positive && !(p[j] > 0.0f)) {
      return Status::InvalidArgument(std::string(what) + " of " + row_word + " " +
                                     std::to_string(j / per_row) + " must be > 0, got " +
                                     FloatText(p[j]));
    }
  }
  return Status::OK();
}

Status CheckWeights(const float* w, int64_t n, int C, const char* row_word) {
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int c = 0; c < C; ++c) {
      float v = w[i * C + c];
      if (!std::isfinite(v) || v < 0) {
        return Status::InvalidArgument(std::string("weights of ") + row_word + " " +
                                       std::to_string(i) + " must be finite and >= 0");
      }
      sum += v;
    }
    if (std::fabs(sum - 1.0) > 1e-3) {
      return Status::InvalidArgument(std::string("weights of ") + row_word + " " +
                                     std::to_string(i) + " sum to " + std::to_string(sum) +
                                     ", expected 1");
    }
  }
  return Status::OK();
}

// Values of a compact row format (RowFormat): what the format can hold.
// Means and vectors must stay finite once rounded (float16: |x| <= 65504).
// Variances must stay positive: below the format's smallest normal (float16
// 2^-14) they are stored as subnormals, with an absolute error of at most
// half the smallest subnormal (float16 2^-25, 3e-8) instead of a relative
// one, and at or below that they would round to 0, which no score can use. The
// subnormals are taken, not refused: a trained encoder gives a few of them
// (42 of 10 million values on the real-embedding collection of
// bench/RESULTS.md, "Compact rows", which float16 otherwise could not hold
// at all), and every score adds the other side's variance (the query's, or
// another item's) before it divides or takes a logarithm, beside which 3e-8
// is lost (recall and ECE as measured there).
Status CheckFormatRange(RowFormat format, const float* p, size_t n, size_t per_row,
                        const char* what, bool variance) {
  if (format == RowFormat::kFloat32) return Status::OK();
  const bool half = format == RowFormat::kFloat16;
  const float max = half ? kFloat16Max : FloatFromBits(0x7f7f0000u);  // largest bfloat16
  const float min_positive = half ? kFloat16MinPositive : FloatFromBits(0x00010000u);
  for (size_t j = 0; j < n; ++j) {
    const float rounded =
        half ? HalfToFloat(FloatToHalf(p[j])) : Bfloat16ToFloat(FloatToBfloat16(p[j]));
    const bool too_large = std::fabs(p[j]) > max || std::isinf(rounded);
    const bool too_small = variance && !(rounded > 0.0f);
    if (!too_large && !too_small) continue;
    std::string text = std::string(what) + " " + FloatText(p[j]) + " of item " +
                       std::to_string(j / per_row) + " (element " + std::to_string(j % per_row) +
                       ") ";
    if (too_large) {
      text += std::string("is outside the range of the collection's row format ") +
              RowFormatName(format) + " (largest magnitude " + FloatText(max) + ")";
    } else {
      text += std::string("rounds to 0 in the collection's row format ") + RowFormatName(format) +
              " (smallest positive value " + FloatText(min_positive) + ")";
    }
    return Status::InvalidArgument(text + "; create the collection with row format " +
                                   (half ? "bfloat16 or float32" : "float32") +
                                   " to store such values");
  }
  return Status::OK();
}

}  // namespace

Status CheckRowShape(const RowShape& shape) {
  if (shape.dim < 1) {
    return Status::InvalidArgument("dimension must be >= 1, got " + std::to_string(shape.dim));
  }
  if (shape.kind == Kind::kMog && shape.components < 1) {
    return Status::InvalidArgument("mog needs >= 1 components, got " +
                                   std::to_string(shape.components));
  }
  if (shape.kind == Kind::kCodes && (shape.code_k < 2 || shape.code_k > 256)) {
    return Status::InvalidArgument("code alphabet size k must be in [2, 256], got " +
                                   std::to_string(shape.code_k));
  }
  return Status::OK();
}

Status CheckItemRows(const RowShape& s, const EmbeddingView& v) {
  if (v.n <= 0) return Status::InvalidArgument("the batch is empty");
  const size_t n = size_t(v.n), D = size_t(s.dim), C = size_t(s.components);
  switch (s.kind) {
    case Kind::kPoint:
      if (!v.vec) return Status::InvalidArgument("point collections take vectors (vec)");
      HEDGEDB_RETURN_IF_ERROR(CheckFloats(v.vec, n * D, D, "vector", false, "item"));
      return CheckFormatRange(s.format, v.vec, n * D, D, "vector value", false);
    case Kind::kGaussian:
    case Kind::kMog: {
      if (!v.mean || !v.var) {
        return Status::InvalidArgument(std::string(KindName(s.kind)) +
                                       " collections take means and variances");
      }
      const size_t per = (s.kind == Kind::kMog ? C : 1) * D;
      HEDGEDB_RETURN_IF_ERROR(CheckFloats(v.mean, n * per, per, "mean", false, "item"));
      HEDGEDB_RETURN_IF_ERROR(CheckFloats(v.var, n * per, per, "variance", true, "item"));
      HEDGEDB_RETURN_IF_ERROR(CheckFormatRange(s.format, v.mean, n * per, per, "mean", false));
      HEDGEDB_RETURN_IF_ERROR(CheckFormatRange(s.format, v.var, n * per, per, "variance", true));
      if (s.kind == Kind::kMog && v.weights) {
        HEDGEDB_RETURN_IF_ERROR(CheckWeights(v.weights, v.n, int(C), "item"));
      }
      if (s.kind == Kind::kGaussian && v.weights) {
        return Status::InvalidArgument("weights apply to mog collections only");
      }
      return Status::OK();
    }
    case Kind::kCodes:
      if (!v.codes) return Status::InvalidArgument("codes collections take codes");
      for (size_t j = 0; j < n * D; ++j) {
        if (v.codes[j] < 0 || v.codes[j] >= s.code_k) {
          return Status::InvalidArgument("code symbol " + std::to_string(v.codes[j]) + " of item " +
                                         std::to_string(j / D) + " is outside [0, " +
                                         std::to_string(s.code_k) + ")");
        }
      }
      return Status::OK();
  }
  return Status::OK();
}

Status CheckQueryRows(const RowShape& s, const EmbeddingView& v) {
  if (v.n <= 0) return Status::InvalidArgument("no queries");
  const size_t n = size_t(v.n), D = size_t(s.dim), C = size_t(s.components);
  switch (s.kind) {
    case Kind::kPoint:
      if (!v.vec) return Status::InvalidArgument("point collections are queried with vectors");
      return CheckFloats(v.vec, n * D, D, "vector", false, "query");
    case Kind::kGaussian:
    case Kind::kMog: {
      if (!v.mean || !v.var) {
        return Status::InvalidArgument(std::string(KindName(s.kind)) +
                                       " collections are queried with means and variances");
      }
      const size_t per = (s.kind == Kind::kMog ? C : 1) * D;
      HEDGEDB_RETURN_IF_ERROR(CheckFloats(v.mean, n * per, per, "mean", false, "query"));
      HEDGEDB_RETURN_IF_ERROR(CheckFloats(v.var, n * per, per, "variance", true, "query"));
      if (s.kind == Kind::kMog && v.weights) return CheckWeights(v.weights, v.n, int(C), "query");
      return Status::OK();
    }
    case Kind::kCodes: {
      if (!v.logp) {
        return Status::InvalidArgument("codes collections are queried with log-prob tables (logp)");
      }
      const size_t per = D * size_t(s.code_k);
      for (size_t j = 0; j < n * per; ++j) {
        // log(0) = -inf is a valid log-probability; NaN and +inf are not.
        if (std::isnan(v.logp[j]) || v.logp[j] > 1e-3f) {
          return Status::InvalidArgument("log-probability table of query " +
                                         std::to_string(j / per) + " has an invalid entry (" +
                                         std::to_string(v.logp[j]) + "); entries must be <= 0");
        }
      }
      return Status::OK();
    }
  }
  return Status::OK();
}

}  // namespace query
}  // namespace hedgedb
