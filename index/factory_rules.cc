#include "index/factory_rules.h"

#include <algorithm>
#include <limits>
#include <regex>

#include "common/half.h"

namespace hedgedb {
namespace index {
namespace {

constexpr int64_t kMaxIvfLists = 262144;  // 2^18: FAISS's largest billion-scale setting
constexpr int64_t kMaxCodeIvfLists = 65536;
constexpr int kMinHnswM = 4, kMaxHnswM = 256;
constexpr int kMaxPqBits = 12;

// Coarse values of an IVF with half-float lists: |x| <= 32736 keeps every
// residual |x - c| <= 65504. A centroid is the mean of training vectors
// that passed this bound (|c| <= 32736), except that FAISS's k-means splits
// an empty cluster by scaling a centroid by 1 +- 1/1024; so |x - c| <=
// 32736 x (2 + 1/1024) = 65503.97. (Float rounding of the mean moves c by
// far less, in practice, than the 16 between 65504 and 65520, where halves
// overflow.) Half of 65504, 32752, would not do: x (2 + 1/1024) reaches
// 65536. This is a bound for one split per centroid, not a proof: FAISS
// may split the same centroid again in one pass (the factors compound) and
// sums the means in float. So VectorIndex's add checks the residuals
// themselves: an item past them is refused there, and the index is left
// stale (searches exact) rather than holding an infinity.
constexpr float kFloat16ResidualLimit = 32736.0f;

int NextPowerOfTwo(int k) {
  int p = 2;
  while (p < k) p *= 2;
  return p;
}

// Parses a decimal that must lie in [lo, hi]; digits only (the regexes below
// guarantee that), but possibly too long for any integer type.
Status Bounded(const std::string& digits, int64_t lo, int64_t hi, const std::string& what,
               const std::string& factory, int64_t* out) {
  if (digits.size() > 12 || std::stoll(digits) < lo || std::stoll(digits) > hi) {
    return Status::InvalidArgument("index factory '" + factory + "': " + what + " must be in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                   digits);
  }
  *out = std::stoll(digits);
  return Status::OK();
}

// <encoding> of an IVF, or a whole string without coarse quantizer.
Status CheckEncoding(const std::string& enc, int coarse_dim, bool under_ivf,
                     const std::string& factory, FactoryShape* shape) {
  static const std::regex kPq("PQ([0-9]+)(x([0-9]+))?");
  static const std::regex kSq("SQ(4|6|8|fp16)");
  std::smatch m;
  if (enc == "Flat" || std::regex_match(enc, kSq)) {
    shape->half_codes = enc == "SQfp16";
    return Status::OK();
  }
  if (std::regex_match(enc, m, kPq)) {
    int64_t pq_m = 0, bits = 8;
    HEDGEDB_RETURN_IF_ERROR(
        Bounded(m[1].str(), 1, coarse_dim, "PQ sub-quantizers", factory, &pq_m));
    if (m[3].matched) {
      HEDGEDB_RETURN_IF_ERROR(Bounded(m[3].str(), 1, kMaxPqBits, "PQ bits", factory, &bits));
    }
    if (under_ivf && bits != 8) {
      // FAISS 1.7.3's IVFPQ scan misreads codes of other widths (the codes
      // index hit it: tests/index/coarse_index_test.cc).
      return Status::InvalidArgument("index factory '" + factory +
                                     "': a PQ under IVF takes 8 bits per code (PQ<m> or PQ<m>x8)");
    }
    if (coarse_dim % pq_m != 0) {
      return Status::InvalidArgument("index factory '" + factory + "': PQ" + m[1].str() +
                                     " needs the coarse dimension (" + std::to_string(coarse_dim) +
                                     "; dim + 1 for gaussian and mog) to be a multiple of " +
                                     m[1].str());
    }
    shape->pq_m = int(pq_m);
    shape->pq_bits = int(bits);
    return Status::OK();
  }
  return Status::InvalidArgument("index factory '" + factory + "': unsupported encoding '" + enc +
                                 "' (use Flat, SQ4, SQ6, SQ8, SQfp16 or PQ<m>[x<bits>])");
}

}  // namespace

float CoarseValueLimit(const FactoryShape& shape) {
  if (!shape.half_codes) return std::numeric_limits<float>::infinity();
  // FAISS builds IVF<n>,SQfp16 (IndexIVFScalarQuantizer) by residual.
  return shape.ivf_lists > 0 ? kFloat16ResidualLimit : kFloat16Max;
}

int CoarseDimension(const CollectionSpec& spec) {
  switch (spec.kind) {
    case Kind::kPoint:
      return spec.dim;
    case Kind::kGaussian:
    case Kind::kMog:
      return spec.dim + 1;
    case Kind::kCodes:
      return spec.dim * NextPowerOfTwo(spec.code_k);
  }
  return spec.dim;
}

Status CheckFactoryString(const CollectionSpec& spec, const std::string& factory,
                          FactoryShape* shape_out) {
  FactoryShape shape;
  std::smatch m;
  if (spec.kind == Kind::kCodes) {
    static const std::regex kIvfPq("IVF([0-9]+),PQ");
    if (factory == "PQ") {
      shape.pq_m = spec.dim;
    } else if (std::regex_match(factory, m, kIvfPq)) {
      HEDGEDB_RETURN_IF_ERROR(
          Bounded(m[1].str(), 1, kMaxCodeIvfLists, "IVF lists", factory, &shape.ivf_lists));
      shape.pq_m = spec.dim;
    } else {
      return Status::InvalidArgument(
          "codes collections take the index 'PQ' or 'IVF<n>,PQ' (identity codebooks), not '" +
          factory + "'");
    }
    // The identity codebooks hold d * k' * max(k', 256) floats (k' = k padded
    // to a power of two; IVF codes are 8-bit) and the IVF centroids
    // lists * d * k': keep each below 2^28 floats (1 GiB).
    const int64_t kp = NextPowerOfTwo(spec.code_k);
    const int64_t codebook =
        int64_t(spec.dim) * kp * (shape.ivf_lists > 0 ? std::max<int64_t>(kp, 256) : kp);
    const int64_t centroids = shape.ivf_lists * int64_t(spec.dim) * kp;
    constexpr int64_t kMaxFloats = int64_t(1) << 28;
    if (codebook > kMaxFloats || centroids > kMaxFloats) {
      return Status::InvalidArgument(
          "index factory '" + factory + "' for d = " + std::to_string(spec.dim) +
          ", k = " + std::to_string(spec.code_k) + " needs " +
          std::to_string(std::max(codebook, centroids) * 4 >> 20) +
          " MiB of codebooks or centroids; use fewer lists or a shorter code");
    }
    if (shape_out) *shape_out = shape;
    return Status::OK();
  }
  const int coarse_dim = CoarseDimension(spec);
  static const std::regex kHnsw("HNSW([0-9]+)(,(.+))?");
  static const std::regex kIvf("IVF([0-9]+)(_HNSW([0-9]+))?,(.+)");
  int64_t value = 0;
  if (factory == "Flat") {
    // exact
  } else if (std::regex_match(factory, m, kHnsw)) {
    HEDGEDB_RETURN_IF_ERROR(
        Bounded(m[1].str(), kMinHnswM, kMaxHnswM, "HNSW neighbours (M)", factory, &value));
    shape.hnsw_m = int(value);
    if (m[3].matched) {
      static const std::regex kStorage("Flat|SQ(4|6|8|fp16)");
      if (!std::regex_match(m[3].str(), kStorage)) {
        return Status::InvalidArgument("index factory '" + factory +
                                       "': HNSW stores vectors as Flat, SQ4, SQ6, SQ8 or SQfp16");
      }
      shape.half_codes = m[3].str() == "SQfp16";
    }
  } else if (std::regex_match(factory, m, kIvf)) {
    HEDGEDB_RETURN_IF_ERROR(
        Bounded(m[1].str(), 1, kMaxIvfLists, "IVF lists", factory, &shape.ivf_lists));
    if (m[2].matched) {
      HEDGEDB_RETURN_IF_ERROR(Bounded(m[3].str(), kMinHnswM, kMaxHnswM,
                                      "HNSW neighbours (M) of the IVF quantizer", factory, &value));
      shape.hnsw_m = int(value);
    }
    HEDGEDB_RETURN_IF_ERROR(CheckEncoding(m[4].str(), coarse_dim, true, factory, &shape));
  } else if (factory.rfind("PQ", 0) == 0 || factory.rfind("SQ", 0) == 0) {
    HEDGEDB_RETURN_IF_ERROR(CheckEncoding(factory, coarse_dim, false, factory, &shape));
  } else {
    return Status::InvalidArgument(
        "index factory '" + factory +
        "' is not supported; use Flat, HNSW<M>, IVF<n>,Flat, IVF<n>,SQ8, IVF<n>,PQ<m>, "
        "IVF<n>_HNSW<M>,Flat, PQ<m> or SQ8 (docs/concepts.md lists the grammar)");
  }
  if (shape_out) *shape_out = shape;
  return Status::OK();
}

}  // namespace index
}  // namespace hedgedb
