#include "index/codes_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>
#include <faiss/impl/ProductQuantizer.h>
#include <faiss/invlists/InvertedLists.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "index/faiss_helpers.h"

namespace hedgedb {
namespace index {
namespace {

// A query table entry standing for log(0) or a padding symbol: finite so that
// FAISS's inner products with the 0/1 identity codebooks stay finite.
constexpr float kLogZero = -1e30f;

int NextPowerOfTwo(int k) {
  int p = 2;
  while (p < k) p *= 2;
  return p;
}

int Log2(int p) {
  int b = 0;
  while ((1 << b) < p) ++b;
  return b;
}

}  // namespace

CodesIndex::CodesIndex(const CollectionSpec& spec, const std::string& factory,
                       const FactoryShape& shape)
    : CoarseIndex(spec, factory, shape), padded_k_(NextPowerOfTwo(spec.code_k)) {}

Status CodesIndex::Build() {
  const int d = spec_.dim, kp = padded_k_;
  faiss::ProductQuantizer* pq = nullptr;
  if (shape_.ivf_lists > 0) {
    // Lists of symbol histograms, scored by inner product with the query
    // table. The IVF holds the user ids itself.
    auto* quantizer = new faiss::IndexFlatIP(coarse_dim_);
    // 8-bit codes whatever k: FAISS 1.7.3's IVFPQ scan decodes codes of
    // fewer bits wrongly (tests/index/coarse_index_test.cc); the centroids
    // beyond the padded k stay zero and no code uses them.
    auto* ivfpq = new faiss::IndexIVFPQ(quantizer, coarse_dim_, size_t(shape_.ivf_lists), d, 8,
                                        faiss::METRIC_INNER_PRODUCT);
    ivfpq->own_fields = true;
    ivfpq->by_residual = false;
    pq = &ivfpq->pq;
    index_.reset(ivfpq);
  } else {
    auto* flat_pq = new faiss::IndexPQ(coarse_dim_, d, Log2(kp), faiss::METRIC_INNER_PRODUCT);
    flat_pq->is_trained = true;
    pq = &flat_pq->pq;
    auto* idmap = new faiss::IndexIDMap(flat_pq);
    idmap->own_fields = true;
    index_.reset(idmap);
  }
  std::fill(pq->centroids.begin(), pq->centroids.end(), 0.0f);
  for (int mi = 0; mi < d; ++mi) {
    for (int j = 0; j < kp; ++j) pq->get_centroids(mi, j)[j] = 1.0f;
  }
  pq->sync_transposed_centroids();
  return Status::OK();
}

int64_t CodesIndex::train_rows_wanted() const {
  if (index_->is_trained) return 0;
  return 39 * shape_.ivf_lists;  // FAISS's rule of thumb for k-means
}

void CodesIndex::CoarseQueries(const float* queries, int64_t nq, std::vector<float>* out) const {
  const int d = spec_.dim, k = spec_.code_k, kp = padded_k_;
  out->assign(size_t(nq) * coarse_dim_, kLogZero);
  for (int64_t q = 0; q < nq; ++q) {
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < k; ++j) {
        float v = queries[(size_t(q) * d + i) * k + j];
        (*out)[size_t(q) * coarse_dim_ + size_t(i) * kp + j] = std::isfinite(v) ? v : kLogZero;
      }
    }
  }
}

// k-means on one-hot code vectors, done in code space: a centroid is, per
// dimension, the histogram of its members' symbols, and a code's inner product
// with it is a sum of d table lookups (no d*k-dimensional vectors needed).
Status CodesIndex::Train(const void* rows, int64_t n) {
  if (index_->is_trained) return Status::OK();
  const auto* codes = static_cast<const uint8_t*>(rows);
  auto* ivf = static_cast<faiss::IndexIVFPQ*>(index_.get());
  const int d = spec_.dim, kp = padded_k_;
  const int64_t nlist = int64_t(ivf->nlist);
  if (n < nlist) return Status::InvalidArgument("too few items to train the IVF lists");
  std::vector<float> centroids(size_t(nlist) * d * kp, 0.0f);
  std::mt19937_64 rng(12345);
  // Start from nlist distinct random items.
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t c = 0; c < nlist; ++c) {
    for (int i = 0; i < d; ++i) centroids[(size_t(c) * d + i) * kp + codes[order[c] * d + i]] = 1;
  }
  // Like FAISS, train on at most 256 points per centroid.
  const int64_t sample = std::min<int64_t>(n, 256 * nlist);
  std::vector<uint8_t> train(size_t(sample) * d);
  for (int64_t x = 0; x < sample; ++x) {
    std::copy(codes + order[x] * d, codes + (order[x] + 1) * d, train.begin() + x * d);
  }
  std::vector<int64_t> assign(static_cast<size_t>(sample));
  for (int iter = 0; iter < 10; ++iter) {
    AssignCodeLists(centroids.data(), train.data(), sample, assign.data());
    std::vector<float> sums(centroids.size(), 0.0f);
    std::vector<int64_t> counts(size_t(nlist), 0);
    for (int64_t x = 0; x < sample; ++x) {
      ++counts[assign[x]];
      for (int i = 0; i < d; ++i) sums[(size_t(assign[x]) * d + i) * kp + train[x * d + i]] += 1;
    }
    for (int64_t c = 0; c < nlist; ++c) {
      if (counts[c] == 0) continue;  // keep an empty list's centroid
      for (size_t j = 0; j < size_t(d) * kp; ++j) {
        centroids[size_t(c) * d * kp + j] = sums[size_t(c) * d * kp + j] / float(counts[c]);
      }
    }
  }
  try {
    ivf->quantizer->reset();
    ivf->quantizer->add(nlist, centroids.data());
    ivf->quantizer->is_trained = true;
    ivf->is_trained = true;
  } catch (const std::exception& e) {
    return FromFaiss(e, "training index '" + factory_ + "'");
  }
  return Status::OK();
}

void CodesIndex::AssignCodeLists(const float* centroids, const uint8_t* codes, int64_t n,
                                 int64_t* lists) const {
  const int d = spec_.dim, kp = padded_k_;
  const int64_t nlist = int64_t(static_cast<faiss::IndexIVF*>(index_.get())->nlist);
#pragma omp parallel for if (n > 1000)
  for (int64_t x = 0; x < n; ++x) {
    float best = -1;
    int64_t best_c = 0;
    for (int64_t c = 0; c < nlist; ++c) {
      const float* cen = centroids + size_t(c) * d * kp;
      float ip = 0;
      for (int i = 0; i < d; ++i) ip += cen[size_t(i) * kp + codes[x * d + i]];
      if (ip > best) {
        best = ip;
        best_c = c;
      }
    }
    lists[x] = best_c;
  }
}

Status CodesIndex::AddRows(const void* rows, int64_t n, const int64_t* ids) {
  const auto* codes = static_cast<const uint8_t*>(rows);
  if (auto* ivf = dynamic_cast<faiss::IndexIVFPQ*>(index_.get())) {
    auto* flat = static_cast<faiss::IndexFlat*>(ivf->quantizer);
    std::vector<int64_t> lists(static_cast<size_t>(n));
    AssignCodeLists(flat->get_xb(), codes, n, lists.data());
    std::vector<uint8_t> code(ivf->code_size);
    for (int64_t i = 0; i < n; ++i) {
      std::fill(code.begin(), code.end(), 0);
      faiss::PQEncoderGeneric enc(code.data(), int(ivf->pq.nbits));
      for (int m = 0; m < spec_.dim; ++m) enc.encode(codes[size_t(i) * spec_.dim + m]);
      ivf->invlists->add_entry(size_t(lists[i]), ids[i], code.data());
    }
    ivf->ntotal += n;
    return Status::OK();
  }
  auto* idmap = static_cast<faiss::IndexIDMap*>(index_.get());
  auto* pq = static_cast<faiss::IndexPQ*>(idmap->index);
  const int d = spec_.dim;
  const size_t code_size = pq->code_size;
  const size_t old = pq->codes.size();
  pq->codes.resize(old + size_t(n) * code_size, 0);
  // With identity codebooks the PQ code of a one-hot vector is its symbol:
  // write codes directly instead of encoding d*k-dimensional one-hot vectors.
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* dst = pq->codes.data() + old + size_t(i) * code_size;
    faiss::PQEncoderGeneric enc(dst, int(pq->pq.nbits));
    for (int m = 0; m < d; ++m) enc.encode(codes[size_t(i) * d + m]);
  }
  pq->ntotal += n;
  idmap->id_map.insert(idmap->id_map.end(), ids, ids + n);
  idmap->ntotal = pq->ntotal;
  return Status::OK();
}

}  // namespace index
}  // namespace hedgedb
