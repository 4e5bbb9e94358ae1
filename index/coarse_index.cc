#include "index/coarse_index.h"

#include <faiss/IVFlib.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/ProductQuantizer.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <typeinfo>
#include <unordered_set>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "common/row_layout.h"
#include "index/factory_rules.h"

namespace hedgedb {
namespace index {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'D', 'G', 'E', 'I', 'D', 'X'};
// Version 2: FAISS IVF indexes hold the user ids themselves (version 1 wrapped
// them in an IndexIDMap whose removal corrupts them) and the header binds the
// file to its collection. Files of version 1 are rebuilt from the records.
constexpr uint32_t kFileFormatVersion = 2;
// magic, version u32, tuned recall u32 (basis points; kUnknownRecall: not
// measured), sequence u64, binding u64, blob bytes u64,
// crc u32 (over version .. blob bytes, then the blob)
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8 + 4;
constexpr size_t kCrcOffset = kHeaderBytes - 4;
constexpr uint32_t kUnknownRecall = 0xFFFFFFFFu;
// A query table entry standing for log(0) or a padding symbol: finite so that
// FAISS's inner products with the 0/1 identity codebooks stay finite.
constexpr float kLogZero = -1e30f;

Status FromFaiss(const std::exception& e, const std::string& what) {
  return Status::InvalidArgument(what + ": " + e.what());
}

int NextPowerOfTwo(int k) {
  int p = 2;
  while (p < k) p *= 2;
  return p;
}

// The class chain of an index (and its list count), to check that a loaded
// file holds the structure the collection's factory string builds.
std::string StructureOf(faiss::Index* index) {
  std::string out;
  while (index) {
    out += typeid(*index).name();
    faiss::Index* next = nullptr;
    if (auto* idmap = dynamic_cast<faiss::IndexIDMap*>(index)) next = idmap->index;
    if (auto* pre = dynamic_cast<faiss::IndexPreTransform*>(index)) next = pre->index;
    if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(index)) {
      out += "/" + std::to_string(ivf->nlist);
    }
    if (next) out += ">";
    index = next;
  }
  return out;
}

int Log2(int p) {
  int b = 0;
  while ((1 << b) < p) ++b;
  return b;
}

// The index below the id map and any pre-transform.
faiss::Index* Innermost(faiss::Index* index) {
  if (auto* idmap = dynamic_cast<faiss::IndexIDMap*>(index)) index = idmap->index;
  if (auto* pre = dynamic_cast<faiss::IndexPreTransform*>(index)) index = pre->index;
  return index;
}

}  // namespace

CoarseIndex::~CoarseIndex() = default;

std::string CoarseIndex::FactoryFor(const CollectionSpec& spec) {
  if (!spec.index_factory.empty()) return spec.index_factory;
  // Measured in bench/RESULTS.md (driver_engine search/ingest): IVF1024,Flat
  // reaches recall@10 1.0 at ~1 ms on 100k Gaussians with ingest >50k/s;
  // HNSW32 is as fast to search but ingests ~10x slower; Flat is 5-10x slower.
  return spec.kind == Kind::kCodes ? "PQ" : "IVF1024,Flat";
}

Status CoarseIndex::Create(const CollectionSpec& spec, std::unique_ptr<CoarseIndex>* out) {
  std::unique_ptr<CoarseIndex> ci(new CoarseIndex());
  ci->spec_ = spec;
  ci->factory_ = FactoryFor(spec);
  // Never hand FAISS a string outside the grammar: some abort the process.
  HEDGEDB_RETURN_IF_ERROR(CheckFactoryString(spec, ci->factory_, &ci->shape_));
  ci->coarse_dim_ = CoarseDimension(spec);
  try {
    if (spec.kind == Kind::kCodes) {
      ci->padded_k_ = NextPowerOfTwo(spec.code_k);
      const int d = spec.dim, kp = ci->padded_k_;
      faiss::ProductQuantizer* pq = nullptr;
      if (ci->shape_.ivf_lists > 0) {
        // Lists of symbol histograms, scored by inner product with the query
        // table; by_residual = false keeps the PQ codes equal to the symbols.
        // The IVF holds the user ids itself.
        auto* quantizer = new faiss::IndexFlatIP(ci->coarse_dim_);
        auto* ivfpq =
            new faiss::IndexIVFPQ(quantizer, ci->coarse_dim_, size_t(ci->shape_.ivf_lists), d,
                                  Log2(kp), faiss::METRIC_INNER_PRODUCT);
        ivfpq->own_fields = true;
        ivfpq->by_residual = false;
        pq = &ivfpq->pq;
        ci->index_.reset(ivfpq);
      } else {
        auto* flat_pq =
            new faiss::IndexPQ(ci->coarse_dim_, d, Log2(kp), faiss::METRIC_INNER_PRODUCT);
        flat_pq->is_trained = true;
        pq = &flat_pq->pq;
        auto* idmap = new faiss::IndexIDMap(flat_pq);
        idmap->own_fields = true;
        ci->index_.reset(idmap);
      }
      std::fill(pq->centroids.begin(), pq->centroids.end(), 0.0f);
      for (int mi = 0; mi < d; ++mi) {
        for (int j = 0; j < kp; ++j) pq->get_centroids(mi, j)[j] = 1.0f;
      }
      pq->sync_transposed_centroids();
    } else {
      std::unique_ptr<faiss::Index> inner(
          faiss::index_factory(ci->coarse_dim_, ci->factory_.c_str(), faiss::METRIC_L2));
      if (dynamic_cast<faiss::IndexIVF*>(inner.get())) {
        // An IVF stores the user ids in its lists and removes them correctly;
        // FAISS's IndexIDMap around it would not (its remove_ids assumes a
        // flat index and scrambles the mapping of an IVF).
        ci->index_ = std::move(inner);
      } else {
        auto* idmap = new faiss::IndexIDMap(inner.release());
        idmap->own_fields = true;
        ci->index_.reset(idmap);
      }
    }
  } catch (const std::exception& e) {
    return FromFaiss(e, "bad index factory '" + ci->factory_ + "'");
  }
  faiss::Index* inner = Innermost(ci->index_.get());
  // Physical removal where FAISS's is right: IVF lists (ids stored in the
  // lists) and flat code arrays under the id map (removal keeps their order,
  // which the id map relies on). Everything else (HNSW) keeps tombstones.
  ci->physical_removal_ = dynamic_cast<faiss::IndexIVF*>(inner) != nullptr ||
                          dynamic_cast<faiss::IndexFlatCodes*>(inner) != nullptr;
  ci->SetDefaultKnobs();
  ci->ReadDefaultKnobs();
  *out = std::move(ci);
  return Status::OK();
}

Status CoarseIndex::Validate(const CollectionSpec& spec) {
  std::unique_ptr<CoarseIndex> ci;
  HEDGEDB_RETURN_IF_ERROR(Create(spec, &ci));
  if (spec.kind == Kind::kCodes) return Status::OK();  // our own fixed structures
  // Exercise a throwaway copy on a tiny random sample of the collection's
  // shape: train (where that takes a few thousand rows at most), add, search,
  // remove. Anything FAISS throws here would otherwise surface at the first
  // ingest, after the collection exists.
  const int64_t lists = ci->shape_.ivf_lists;
  const int64_t pq_centroids = ci->shape_.pq_m > 0 ? (int64_t(1) << ci->shape_.pq_bits) : 0;
  const int64_t n = std::max<int64_t>({64, lists, pq_centroids});
  if (n > 4096) return Status::OK();
  faiss::Index* inner = Innermost(ci->index_.get());
  if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(inner)) ivf->cp.min_points_per_centroid = 1;
  if (auto* ivfpq = dynamic_cast<faiss::IndexIVFPQ*>(inner)) {
    ivfpq->pq.cp.min_points_per_centroid = 1;
  }
  if (auto* pq = dynamic_cast<faiss::IndexPQ*>(inner)) pq->pq.cp.min_points_per_centroid = 1;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> x(size_t(n) * ci->coarse_dim_);
  for (float& v : x) v = normal(rng);
  std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = 1000 + i;
  std::vector<float> distances(8);
  std::vector<faiss::Index::idx_t> labels(8);
  try {
    if (!ci->index_->is_trained) ci->index_->train(n, x.data());
    ci->index_->add_with_ids(n, x.data(), ids.data());
    ci->index_->search(2, x.data(), 4, distances.data(), labels.data());
    if (ci->physical_removal_) {
      faiss::IDSelectorBatch selector(2, ids.data());
      ci->index_->remove_ids(selector);
    }
  } catch (const std::exception& e) {
    return FromFaiss(e, "index factory '" + ci->factory_ + "' fails on a sample");
  }
  return Status::OK();
}

void CoarseIndex::SetDefaultKnobs() {
  faiss::Index* inner = Innermost(index_.get());
  // FAISS starts IVF at nprobe = 1, far too few lists for useful recall.
  if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(inner)) {
    ivf->nprobe = std::min<size_t>(ivf->nlist, std::max<size_t>(8, ivf->nlist / 64));
  }
  if (auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(inner)) {
    hnsw->hnsw.efSearch = std::max(hnsw->hnsw.efSearch, 64);
  }
}

void CoarseIndex::ReadDefaultKnobs() {
  faiss::Index* inner = Innermost(index_.get());
  if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(inner)) default_knobs_.nprobe = int(ivf->nprobe);
  if (auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(inner)) {
    default_knobs_.ef_search = hnsw->hnsw.efSearch;
  }
  current_knobs_ = default_knobs_;
}

bool CoarseIndex::is_trained() const { return index_->is_trained; }

int64_t CoarseIndex::train_rows_wanted() const {
  if (index_->is_trained) return 0;
  // FAISS's k-means wants ~39 points per centroid before it stops warning:
  // the IVF's lists and the PQ's 2^bits centroids per sub-quantizer.
  int64_t wanted = 39 * shape_.ivf_lists;
  if (spec_.kind != Kind::kCodes && shape_.pq_m > 0) {
    wanted = std::max<int64_t>(wanted, 39 * (int64_t(1) << shape_.pq_bits));
  }
  return wanted > 0 ? wanted : 1000;  // scalar quantizers: ranges per dimension
}

void CoarseIndex::CoarseVectors(const void* rows, int64_t n, std::vector<float>* out) const {
  const int D = spec_.dim;
  const size_t stride = ItemRowSize(spec_);
  const float* r = static_cast<const float*>(rows);
  out->resize(size_t(n) * coarse_dim_);
  for (int64_t i = 0; i < n; ++i, r += stride) {
    float* v = out->data() + size_t(i) * coarse_dim_;
    if (spec_.kind == Kind::kPoint) {
      std::memcpy(v, r, sizeof(float) * D);
    } else if (spec_.kind == Kind::kGaussian) {
      double trace = 0;
      for (int d = 0; d < D; ++d) {
        v[d] = r[d];
        trace += r[D + d];
      }
      v[D] = float(std::sqrt(trace));
    } else {  // mog: mixture moments
      const int C = spec_.components;
      const float* w = r;
      const float* mu = r + C;
      const float* var = mu + size_t(C) * D;
      double trace = 0;
      for (int d = 0; d < D; ++d) {
        double m = 0;
        for (int c = 0; c < C; ++c) m += double(w[c]) * mu[c * D + d];
        double t = 0;
        for (int c = 0; c < C; ++c) {
          double dev = mu[c * D + d] - m;
          t += double(w[c]) * (var[c * D + d] + dev * dev);
        }
        v[d] = float(m);
        trace += t;
      }
      v[D] = float(std::sqrt(trace));
    }
  }
}

void CoarseIndex::CoarseQueries(const float* queries, int64_t nq, std::vector<float>* out) const {
  if (spec_.kind == Kind::kCodes) {
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
    return;
  }
  CoarseVectors(queries, nq, out);
  if (spec_.kind != Kind::kPoint) {
    for (int64_t q = 0; q < nq; ++q) (*out)[size_t(q) * coarse_dim_ + spec_.dim] = 0.0f;
  }
}

Status CoarseIndex::Train(const void* rows, int64_t n) {
  if (spec_.kind == Kind::kCodes) {
    if (index_->is_trained) return Status::OK();
    return TrainCodeLists(static_cast<const uint8_t*>(rows), n);
  }
  std::vector<float> x;
  CoarseVectors(rows, n, &x);
  try {
    index_->train(n, x.data());
  } catch (const std::exception& e) {
    return FromFaiss(e, "training index '" + factory_ + "'");
  }
  return Status::OK();
}

// k-means on one-hot code vectors, done in code space: a centroid is, per
// dimension, the histogram of its members' symbols, and a code's inner product
// with it is a sum of d table lookups (no d*k-dimensional vectors needed).
Status CoarseIndex::TrainCodeLists(const uint8_t* codes, int64_t n) {
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

void CoarseIndex::AssignCodeLists(const float* centroids, const uint8_t* codes, int64_t n,
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

Status CoarseIndex::AddCodes(const uint8_t* codes, int64_t n, const int64_t* ids) {
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

namespace {
std::atomic<int> g_failing_adds{0};
}  // namespace

void CoarseIndex::FailNextAddsForTest(int n) { g_failing_adds = n; }

Status CoarseIndex::Add(const void* rows, int64_t n, const int64_t* ids) {
  if (n == 0) return Status::OK();
  if (g_failing_adds > 0 && g_failing_adds-- > 0) {
    return Status::Internal("adding to index '" + factory_ + "': injected failure (test)");
  }
  if (!index_->is_trained) return Status::Internal("adding to an untrained index");
  if (spec_.kind == Kind::kCodes) return AddCodes(static_cast<const uint8_t*>(rows), n, ids);
  std::vector<float> x;
  CoarseVectors(rows, n, &x);
  // An IVF add is a BLAS product (OpenBLAS runs it on its own threads) plus
  // light per-vector work; letting OpenMP's team spin beside OpenBLAS's
  // threads halves throughput on small machines (bench/RESULTS.md, Ingest).
  // Other indexes (HNSW) do their real work in OpenMP loops: keep them.
  const int saved_threads = omp_get_max_threads();
  if (dynamic_cast<faiss::IndexIVF*>(Innermost(index_.get()))) omp_set_num_threads(1);
  try {
    index_->add_with_ids(n, x.data(), ids);
    omp_set_num_threads(saved_threads);
  } catch (const std::exception& e) {
    omp_set_num_threads(saved_threads);
    return FromFaiss(e, "adding to index '" + factory_ + "'");
  }
  return Status::OK();
}

Status CoarseIndex::Remove(const int64_t* ids, int64_t n, bool* physical) {
  *physical = false;
  if (!physical_removal_ || n == 0) return Status::OK();  // tombstones
  try {
    faiss::IDSelectorBatch selector(n, ids);
    index_->remove_ids(selector);
  } catch (const std::exception& e) {
    return FromFaiss(e, "removing from index '" + factory_ + "'");
  }
  *physical = true;
  return Status::OK();
}

Status CoarseIndex::Search(const float* queries, int64_t nq, int64_t k,
                           const CoarseSearchKnobs& knobs, std::vector<int64_t>* labels) const {
  std::vector<float> x;
  CoarseQueries(queries, nq, &x);
  labels->assign(size_t(nq * k), -1);
  std::vector<float> distances(size_t(nq * k));
  CoarseSearchKnobs wanted = default_knobs_;
  if (knobs.nprobe > 0) wanted.nprobe = knobs.nprobe;
  if (knobs.ef_search > 0) wanted.ef_search = knobs.ef_search;
  auto run = [&]() -> Status {
    try {
      index_->search(nq, x.data(), k, distances.data(), labels->data());
    } catch (const std::exception& e) {
      return FromFaiss(e, "searching index '" + factory_ + "'");
    }
    return Status::OK();
  };
  {
    std::shared_lock<RwMutex> lock(knob_mutex_);
    if (wanted.nprobe == current_knobs_.nprobe && wanted.ef_search == current_knobs_.ef_search) {
      return run();
    }
  }
  std::unique_lock<RwMutex> lock(knob_mutex_);
  faiss::Index* inner = Innermost(index_.get());
  if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(inner)) ivf->nprobe = size_t(wanted.nprobe);
  if (auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(inner)) hnsw->hnsw.efSearch = wanted.ef_search;
  current_knobs_ = wanted;
  return run();
}

int64_t CoarseIndex::ntotal() const { return index_->ntotal; }

bool CoarseIndex::tunable() const {
  faiss::Index* inner = Innermost(index_.get());
  return spec_.kind != Kind::kCodes && (dynamic_cast<faiss::IndexIVF*>(inner) != nullptr ||
                                        dynamic_cast<faiss::IndexHNSW*>(inner) != nullptr);
}

Status CoarseIndex::TuneKnobs(const void* rows, const int64_t* ids, int64_t n, int64_t candidates,
                              double target) {
  faiss::Index* inner = Innermost(index_.get());
  auto* ivf = dynamic_cast<faiss::IndexIVF*>(inner);
  auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(inner);
  if (spec_.kind == Kind::kCodes || (!ivf && !hnsw) || n == 0 || !index_->is_trained) {
    return Status::OK();
  }
  const size_t stride = ItemRowBytes(spec_);
  const auto* bytes = static_cast<const uint8_t*>(rows);
  const int64_t k = std::min<int64_t>(candidates, n);
  // Up to 100 evenly spread items as queries.
  const int64_t nq = std::min<int64_t>(100, n);
  std::vector<uint8_t> sample(size_t(nq) * stride);
  for (int64_t q = 0; q < nq; ++q) {
    std::memcpy(sample.data() + q * stride, bytes + (q * n / nq) * stride, stride);
  }
  std::vector<float> queries;
  CoarseQueries(reinterpret_cast<const float*>(sample.data()), nq, &queries);
  // The exact coarse top-k over all rows, a chunk at a time.
  std::vector<std::vector<std::pair<float, int64_t>>> exact(static_cast<size_t>(nq));
  std::vector<float> distances(size_t(nq * k));
  std::vector<faiss::Index::idx_t> labels(size_t(nq * k));
  constexpr int64_t kChunk = 65536;
  try {
    for (int64_t first = 0; first < n; first += kChunk) {
      const int64_t m = std::min(kChunk, n - first);
      std::vector<float> x;
      CoarseVectors(bytes + first * stride, m, &x);
      faiss::IndexFlatL2 flat(coarse_dim_);
      flat.add(m, x.data());
      const int64_t kk = std::min(k, m);
      flat.search(nq, queries.data(), kk, distances.data(), labels.data());
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
    std::vector<std::unordered_set<int64_t>> truth(static_cast<size_t>(nq));
    int64_t total = 0;
    for (int64_t q = 0; q < nq; ++q) {
      for (const auto& p : exact[q]) truth[q].insert(p.second);
      total += int64_t(exact[q].size());
    }
    auto recall_at = [&]() {
      index_->search(nq, queries.data(), k, distances.data(), labels.data());
      int64_t hits = 0;
      for (int64_t q = 0; q < nq; ++q) {
        for (int64_t j = 0; j < k; ++j) hits += truth[q].count(labels[q * k + j]);
      }
      return total > 0 ? double(hits) / double(total) : 1.0;
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
    recall_estimate_ = recall;
  } catch (const std::exception& e) {
    return FromFaiss(e, "tuning index '" + factory_ + "'");
  }
  ReadDefaultKnobs();
  return Status::OK();
}

Status CoarseIndex::Save(const std::string& path, uint64_t sequence, uint64_t binding) const {
  faiss::VectorIOWriter writer;
  try {
    faiss::write_index(index_.get(), &writer);
  } catch (const std::exception& e) {
    return Status::IOError(std::string("serializing index: ") + e.what());
  }
  const uint32_t recall_bp = std::isnan(recall_estimate_)
                                 ? kUnknownRecall
                                 : uint32_t(std::lround(recall_estimate_ * 10000));
  std::string header(kMagic, 8);
  PutFixed<uint32_t>(&header, kFileFormatVersion);
  PutFixed<uint32_t>(&header, recall_bp);
  PutFixed<uint64_t>(&header, sequence);
  PutFixed<uint64_t>(&header, binding);
  PutFixed<uint64_t>(&header, writer.data.size());
  uint32_t crc = Crc32c(header.data() + 8, kCrcOffset - 8);
  crc = Crc32c(writer.data.data(), writer.data.size(), crc);
  PutFixed<uint32_t>(&header, crc);
  return WriteFileAtomically(
      path, {header, std::string_view(reinterpret_cast<const char*>(writer.data.data()),
                                      writer.data.size())});
}

Status CoarseIndex::Load(const CollectionSpec& spec, const std::string& path, uint64_t binding,
                         std::unique_ptr<CoarseIndex>* out, uint64_t* sequence) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::NotFound("no index file " + path);
  const uint64_t file_size = uint64_t(in.tellg());
  in.seekg(0);
  std::string header(kHeaderBytes, '\0');
  if (file_size < kHeaderBytes || !in.read(&header[0], kHeaderBytes) ||
      std::memcmp(header.data(), kMagic, 8) != 0) {
    return Status::Corruption("index file " + path + " has a bad header");
  }
  const uint32_t version = GetFixed<uint32_t>(header.data() + 8);
  const uint32_t recall_bp = GetFixed<uint32_t>(header.data() + 12);
  const uint64_t seq = GetFixed<uint64_t>(header.data() + 16);
  const uint64_t file_binding = GetFixed<uint64_t>(header.data() + 24);
  const uint64_t blob_bytes = GetFixed<uint64_t>(header.data() + 32);
  const uint32_t crc = GetFixed<uint32_t>(header.data() + kCrcOffset);
  if (version != kFileFormatVersion) {
    return Status::Corruption("index file " + path + " has format version " +
                              std::to_string(version) + ", this build writes " +
                              std::to_string(kFileFormatVersion));
  }
  // Check the length against the file before allocating what it says.
  if (blob_bytes != file_size - kHeaderBytes) {
    return Status::Corruption("index file " + path + " is truncated or has trailing bytes (" +
                              std::to_string(file_size) + " bytes, header says " +
                              std::to_string(kHeaderBytes) + " + " + std::to_string(blob_bytes) +
                              ")");
  }
  faiss::VectorIOReader reader;
  reader.data.resize(blob_bytes);
  if (!in.read(reinterpret_cast<char*>(reader.data.data()), std::streamsize(blob_bytes))) {
    return Status::Corruption("index file " + path + " cannot be read in full");
  }
  uint32_t actual = Crc32c(header.data() + 8, kCrcOffset - 8);
  actual = Crc32c(reader.data.data(), reader.data.size(), actual);
  if (actual != crc) return Status::Corruption("index file " + path + " fails its checksum");
  if (file_binding != binding) {
    return Status::Corruption("index file " + path +
                              " belongs to another collection or database (binding mismatch)");
  }

  std::unique_ptr<CoarseIndex> ci;
  HEDGEDB_RETURN_IF_ERROR(Create(spec, &ci));  // for dimensions and defaults
  try {
    std::unique_ptr<faiss::Index> loaded(faiss::read_index(&reader));
    if (StructureOf(loaded.get()) != StructureOf(ci->index_.get()) ||
        loaded->d != ci->coarse_dim_) {
      return Status::Corruption("index file " + path + " does not match the collection");
    }
    ci->index_ = std::move(loaded);
  } catch (const std::exception& e) {
    return Status::Corruption("index file " + path + " cannot be read: " + e.what());
  }
  ci->ReadDefaultKnobs();
  if (recall_bp != kUnknownRecall) ci->recall_estimate_ = recall_bp / 10000.0;
  *sequence = seq;
  *out = std::move(ci);
  return Status::OK();
}

}  // namespace index
}  // namespace hedgedb
