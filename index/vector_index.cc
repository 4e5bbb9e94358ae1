#include "index/vector_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>
#include <faiss/IndexScalarQuantizer.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/index_factory.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <unordered_set>
#include <utility>

#include "common/half.h"
#include "common/row_layout.h"
#include "index/faiss_helpers.h"
#include "index/nearest_centroid.h"

namespace hedgedb {
namespace index {
namespace {

// An IVF whose add_with_ids is the quantizer's assignment then add_core
// (FAISS 1.7.3; not the fast-scan or dedup kinds, which lay their lists out
// otherwise), over a flat L2 quantizer: its lists can be assigned by
// NearestCentroids.
faiss::IndexIVF* PlainIvfOverFlatL2(faiss::Index* index) {
  if (!FlatL2Quantizer(index)) return nullptr;
  const std::type_info& type = typeid(*index);
  if (type != typeid(faiss::IndexIVFFlat) && type != typeid(faiss::IndexIVFPQ) &&
      type != typeid(faiss::IndexIVFScalarQuantizer)) {
    return nullptr;
  }
  return static_cast<faiss::IndexIVF*>(index);
}

}  // namespace

Status VectorIndex::Build() {
  std::unique_ptr<faiss::Index> inner(
      faiss::index_factory(coarse_dim_, factory_.c_str(), faiss::METRIC_L2));
  if (dynamic_cast<faiss::IndexIVF*>(inner.get())) {
    // An IVF stores the user ids in its lists and removes them correctly;
    // FAISS's IndexIDMap around it would not (its remove_ids assumes a flat
    // index and scrambles the mapping of an IVF).
    index_ = std::move(inner);
  } else {
    auto* idmap = new faiss::IndexIDMap(inner.release());
    idmap->own_fields = true;
    index_.reset(idmap);
  }
  return Status::OK();
}

Status VectorIndex::Exercise() {
  // Exercise this throwaway index on a tiny random sample of the collection's
  // shape: train (where that takes a few thousand rows at most), add, search,
  // remove. Anything FAISS throws here would otherwise surface at the first
  // ingest, after the collection exists.
  const int64_t lists = shape_.ivf_lists;
  const int64_t pq_centroids = shape_.pq_m > 0 ? (int64_t(1) << shape_.pq_bits) : 0;
  const int64_t n = std::max<int64_t>({64, lists, pq_centroids});
  if (n > 4096) return Status::OK();
  faiss::Index* inner = Innermost(index_.get());
  if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(inner)) ivf->cp.min_points_per_centroid = 1;
  if (auto* ivfpq = dynamic_cast<faiss::IndexIVFPQ*>(inner)) {
    ivfpq->pq.cp.min_points_per_centroid = 1;
  }
  if (auto* pq = dynamic_cast<faiss::IndexPQ*>(inner)) pq->pq.cp.min_points_per_centroid = 1;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> x(size_t(n) * coarse_dim_);
  for (float& v : x) v = normal(rng);
  std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = 1000 + i;
  std::vector<float> distances(8);
  std::vector<faiss::Index::idx_t> labels(8);
  if (!index_->is_trained) index_->train(n, x.data());
  index_->add_with_ids(n, x.data(), ids.data());
  index_->search(2, x.data(), 4, distances.data(), labels.data());
  if (physical_removal_) {
    faiss::IDSelectorBatch selector(2, ids.data());
    index_->remove_ids(selector);
  }
  return Status::OK();
}

int64_t VectorIndex::train_rows_wanted() const {
  if (index_->is_trained) return 0;
  // FAISS's k-means wants ~39 points per centroid before it stops warning:
  // the IVF's lists and the PQ's 2^bits centroids per sub-quantizer.
  int64_t wanted = 39 * shape_.ivf_lists;
  if (shape_.pq_m > 0) wanted = std::max<int64_t>(wanted, 39 * (int64_t(1) << shape_.pq_bits));
  return wanted > 0 ? wanted : 1000;  // scalar quantizers: ranges per dimension
}

void CoarseVectorsOf(const CollectionSpec& spec, const RowShape& shape, const void* rows, int64_t n,
                     std::vector<float>* out) {
  const size_t D = size_t(spec.dim), stride = shape.item_row_bytes();
  const size_t coarse_dim = size_t(CoarseDimension(spec));
  out->resize(size_t(n) * coarse_dim);
  std::vector<double> mean(D), var(D);
  std::vector<float> widened(shape.compact() ? shape.item_row_size() : 0);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* stored = static_cast<const uint8_t*>(rows) + size_t(i) * stride;
    const float* r = reinterpret_cast<const float*>(stored);
    if (shape.compact()) {  // the rounded values, as the scorers read them
      WidenItemRow(shape, stored, widened.data());
      r = widened.data();
    }
    float* v = out->data() + size_t(i) * coarse_dim;
    if (spec.kind == Kind::kPoint) {
      std::memcpy(v, r, sizeof(float) * D);
      continue;
    }
    // [mu, sqrt(tr S)] of the row (a mixture's first two moments).
    RowMoments(shape, r, mean.data(), var.data());
    double trace = 0;
    for (size_t d = 0; d < D; ++d) {
      v[d] = float(mean[d]);
      trace += var[d];
    }
    v[D] = float(std::sqrt(trace));
  }
}

void VectorIndex::CoarseQueries(const float* queries, int64_t nq, std::vector<float>* out) const {
  CoarseVectors(FloatRowShape(RowShapeOf(spec_)), queries, nq, out);
  if (spec_.kind != Kind::kPoint) {
    for (int64_t q = 0; q < nq; ++q) (*out)[size_t(q) * coarse_dim_ + spec_.dim] = 0.0f;
  }
}

Status VectorIndex::Train(const void* rows, int64_t n) {
  std::vector<float> x;
  CoarseVectors(RowShapeOf(spec_), rows, n, &x);
  // k-means over a flat L2 quantizer assigns its points as an add does.
  auto* ivf = dynamic_cast<faiss::IndexIVF*>(index_.get());
  NearestCentroidIndex assigner(coarse_dim_);
  const bool fast_kmeans = ivf && ivf->quantizer_trains_alone == 0 && !ivf->clustering_index &&
                           dynamic_cast<const faiss::IndexFlat*>(ivf->quantizer) &&
                           ivf->quantizer->metric_type == faiss::METRIC_L2;
  if (fast_kmeans) ivf->clustering_index = &assigner;
  Status s;
  try {
    index_->train(n, x.data());
  } catch (const std::exception& e) {
    s = FromFaiss(e, "training index '" + factory_ + "'");
  }
  if (fast_kmeans) ivf->clustering_index = nullptr;
  CentroidsChanged();
  return s;
}

Status VectorIndex::AddRows(const void* rows, int64_t n, const int64_t* ids) {
  std::vector<float> x;
  CoarseVectors(RowShapeOf(spec_), rows, n, &x);
  // An IVF add is a BLAS product (OpenBLAS runs it on its own threads) plus
  // light per-vector work; letting OpenMP's team spin beside OpenBLAS's
  // threads halves throughput on small machines (bench/RESULTS.md, Ingest).
  // Other indexes (HNSW) do their real work in OpenMP loops: keep them.
  const int saved_threads = omp_get_max_threads();
  if (dynamic_cast<faiss::IndexIVF*>(Innermost(index_.get()))) omp_set_num_threads(1);
  Status s;
  try {
    if (faiss::IndexIVF* ivf = PlainIvfOverFlatL2(index_.get())) {
      const faiss::IndexFlat* quantizer = FlatL2Quantizer(ivf);
      std::vector<faiss::Index::idx_t> lists(static_cast<size_t>(n));
      NearestCentroids(x.data(), n, quantizer->get_xb(), quantizer->ntotal, coarse_dim_,
                       lists.data(), nullptr);
      s = CheckEncodable(x.data(), n, ids, lists.data());
      if (s.ok()) ivf->add_core(n, x.data(), ids, lists.data());
    } else if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(index_.get()); ivf && shape_.half_codes) {
      // IndexIVF::add_with_ids as FAISS 1.7.3 has it (assign, then
      // add_core), with the residuals checked in between.
      std::vector<faiss::Index::idx_t> lists(static_cast<size_t>(n));
      ivf->quantizer->assign(n, x.data(), lists.data());
      s = CheckEncodable(x.data(), n, ids, lists.data());
      if (s.ok()) ivf->add_core(n, x.data(), ids, lists.data());
    } else {
      s = CheckEncodable(x.data(), n, ids, nullptr);
      if (s.ok()) index_->add_with_ids(n, x.data(), ids);
    }
    omp_set_num_threads(saved_threads);
  } catch (const std::exception& e) {
    omp_set_num_threads(saved_threads);
    return FromFaiss(e, "adding to index '" + factory_ + "'");
  }
  return s;
}

Status VectorIndex::CheckEncodable(const float* x, int64_t n, const int64_t* ids,
                                   const int64_t* lists) const {
  if (!shape_.half_codes) return Status::OK();
  const auto* ivf = dynamic_cast<const faiss::IndexIVFScalarQuantizer*>(index_.get());
  if (!ivf || !ivf->by_residual || !lists) {
    return CheckCoarseValues(spec_, factory_, x, n, kFloat16Max, ids, /*residual=*/false);
  }
  // What the lists store: each vector less its list's centroid.
  const size_t d = size_t(coarse_dim_);
  const faiss::IndexFlat* flat = FlatL2Quantizer(ivf);
  std::vector<float> residuals(size_t(n) * d);
  for (int64_t i = 0; i < n; ++i) {
    if (lists[i] < 0) continue;  // FAISS adds nothing for it
    const float* xi = x + size_t(i) * d;
    float* r = residuals.data() + size_t(i) * d;
    if (flat) {
      const float* c = flat->get_xb() + size_t(lists[i]) * d;
      for (size_t k = 0; k < d; ++k) r[k] = xi[k] - c[k];
    } else {
      ivf->quantizer->compute_residual(xi, r, lists[i]);
    }
  }
  return CheckCoarseValues(spec_, factory_, residuals.data(), n, kFloat16Max, ids,
                           /*residual=*/true);
}

bool VectorIndex::tunable() const {
  faiss::Index* inner = Innermost(index_.get());
  return dynamic_cast<faiss::IndexIVF*>(inner) != nullptr ||
         dynamic_cast<faiss::IndexHNSW*>(inner) != nullptr;
}

bool VectorIndex::fits_default_search() const { return tunable() || shape_.flat(); }

void VectorIndex::ExactCoarseTop(const void* rows, const int64_t* ids, int64_t n,
                                 int64_t candidates, int64_t query_first, ExactTop* out) const {
  const size_t stride = ItemRowBytes(spec_);
  const auto* bytes = static_cast<const uint8_t*>(rows);
  const int64_t k = std::min<int64_t>(candidates, n);
  // Up to 100 items evenly spread over [query_first, n) as queries.
  query_first = std::min(std::max<int64_t>(0, query_first), n - 1);
  const int64_t span = n - query_first;
  const int64_t nq = std::min<int64_t>(100, span);
  out->nq = nq;
  out->k = k;
  // The sampled items as queries: their float rows (widened from a compact
  // row format), then as coarse vectors.
  const RowShape shape = RowShapeOf(spec_);
  std::vector<int64_t> picked(static_cast<size_t>(nq));
  for (int64_t q = 0; q < nq; ++q) picked[size_t(q)] = query_first + q * span / nq;
  out->sample.assign(size_t(nq) * shape.item_row_size(), 0.0f);
  WidenRows(shape, bytes, stride, picked.data(), size_t(nq), out->sample.data());
  CoarseQueries(out->sample.data(), nq, &out->queries);
  // The exact coarse top-k over all rows, a chunk at a time.
  std::vector<std::vector<std::pair<float, int64_t>>> exact(static_cast<size_t>(nq));
  std::vector<float> distances(size_t(nq * k));
  std::vector<faiss::Index::idx_t> labels(size_t(nq * k));
  constexpr int64_t kChunk = 65536;
  for (int64_t first = 0; first < n; first += kChunk) {
    const int64_t m = std::min(kChunk, n - first);
    std::vector<float> x;
    CoarseVectors(shape, bytes + first * stride, m, &x);
    faiss::IndexFlatL2 flat(coarse_dim_);
    flat.add(m, x.data());
    const int64_t kk = std::min(k, m);
    flat.search(nq, out->queries.data(), kk, distances.data(), labels.data());
    for (int64_t q = 0; q < nq; ++q) {
      auto& best = exact[q];
      for (int64_t j = 0; j < kk; ++j) {
        const faiss::Index::idx_t l = labels[q * kk + j];
        if (l >= 0) best.emplace_back(distances[q * kk + j], ids[first + l]);
      }
      std::sort(best.begin(), best.end());
      if (int64_t(best.size()) > k) best.resize(size_t(k));
    }
  }
  out->truth.assign(static_cast<size_t>(nq), {});
  out->total = 0;
  for (int64_t q = 0; q < nq; ++q) {
    for (const auto& p : exact[q]) out->truth[q].insert(p.second);
    out->total += int64_t(exact[q].size());
  }
}

double VectorIndex::ExactTop::Recall(const std::vector<int64_t>& labels) const {
  int64_t hits = 0;
  for (int64_t q = 0; q < nq; ++q) {
    for (int64_t j = 0; j < k; ++j) hits += truth[q].count(labels[q * k + j]);
  }
  return total > 0 ? double(hits) / double(total) : 1.0;
}

Status VectorIndex::MeasureRecall(const void* rows, const int64_t* ids, int64_t n,
                                  int64_t candidates, int64_t query_first,
                                  const std::vector<CoarseSearchKnobs>& knobs,
                                  std::vector<double>* recalls) const {
  recalls->clear();
  if (!tunable() || !index_->is_trained) {
    return Status::NotSupported("index '" + factory_ + "' has no trained search knobs");
  }
  if (n == 0) {
    recalls->assign(knobs.size(), 1.0);
    return Status::OK();
  }
  ExactTop top;
  try {
    ExactCoarseTop(rows, ids, n, candidates, query_first, &top);
  } catch (const std::exception& e) {
    return FromFaiss(e, "measuring index '" + factory_ + "'");
  }
  std::vector<int64_t> labels;
  for (const CoarseSearchKnobs& knob : knobs) {
    // Search: the same path (and knob handling) as the collection's stage 1.
    HEDGEDB_RETURN_IF_ERROR(Search(top.sample.data(), top.nq, top.k, knob, &labels));
    recalls->push_back(top.Recall(labels));
  }
  return Status::OK();
}

Status VectorIndex::TuneKnobs(const void* rows, const int64_t* ids, int64_t n, int64_t candidates,
                              double target) {
  faiss::Index* inner = Innermost(index_.get());
  auto* ivf = dynamic_cast<faiss::IndexIVF*>(inner);
  auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(inner);
  if ((!ivf && !hnsw) || n == 0 || !index_->is_trained) {
    return Status::OK();
  }
  ExactTop top;
  try {
    ExactCoarseTop(rows, ids, n, candidates, /*query_first=*/0, &top);
    const int64_t nq = top.nq, k = top.k;
    std::vector<float> distances(size_t(nq * k));
    std::vector<faiss::Index::idx_t> labels(size_t(nq * k));
    const std::vector<float>& queries = top.queries;
    auto recall_at = [&]() {
      // The stage 1 searches will run: hedgedb's list scan where it applies.
      CoarseSearchKnobs knobs;
      if (ivf) knobs.nprobe = int(ivf->nprobe);
      if (!ListScan(queries.data(), nq, k, knobs, nullptr, distances.data(), labels.data())) {
        index_->search(nq, queries.data(), k, distances.data(), labels.data());
      }
      return top.Recall(labels);
    };
    // The smallest knob on a doubling ladder from the static default.
    // Stop early where doubling gains almost nothing: then the encoding (PQ,
    // SQ), not the search breadth, limits stage 1, and rescoring makes up.
    auto set_knob = [&](int value) {
      if (ivf) ivf->nprobe = size_t(value);
      if (hnsw) hnsw->hnsw.efSearch = value;
    };
    int knob = ivf ? int(ivf->nprobe) : std::max<int>(hnsw->hnsw.efSearch, int(k));
    const int last = ivf ? int(ivf->nlist) : 4096;
    set_knob(knob);
    double recall = recall_at();
    while (recall < target && knob < last) {
      const int next = std::min(2 * knob, last);
      set_knob(next);
      const double next_recall = recall_at();
      if (next_recall - recall < 0.005) {
        set_knob(knob);
        break;
      }
      knob = next;
      recall = next_recall;
    }
    coarse_recall_ = recall;
  } catch (const std::exception& e) {
    return FromFaiss(e, "tuning index '" + factory_ + "'");
  }
  ReadDefaultKnobs();
  return Status::OK();
}

}  // namespace index
}  // namespace hedgedb
