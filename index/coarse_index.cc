#include "index/coarse_index.h"

#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexPQ.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "common/float_text.h"
#include "common/half.h"
#include "common/row_layout.h"
#include "index/codes_index.h"
#include "index/faiss_helpers.h"
#include "index/index_file.h"
#include "index/list_scan.h"
#include "index/nearest_centroid.h"
#include "index/vector_index.h"

namespace hedgedb {
namespace index {
namespace {

std::atomic<int> g_failing_adds{0};

// What coarse dimension d of an item is (VectorIndex's coarse vectors).
std::string CoarseValueName(const CollectionSpec& spec, int d) {
  if (spec.kind == Kind::kPoint) return "vector value";
  const bool mog = spec.kind == Kind::kMog;
  if (d < spec.dim) return mog ? "mixture mean" : "mean";
  return mog ? "square root of the mixture's summed variances"
             : "square root of the summed variances";
}

}  // namespace

Status CheckCoarseValues(const CollectionSpec& spec, const std::string& factory,
                         const float* values, int64_t n, float limit, const int64_t* ids,
                         bool residual) {
  const int d = CoarseDimension(spec);
  const size_t total = size_t(n) * size_t(d);
  size_t j = 0;
  while (j < total && !(std::fabs(values[j]) > limit)) ++j;
  if (j == total) return Status::OK();
  const int64_t item = int64_t(j / size_t(d));
  const int dim = int(j % size_t(d));
  std::string text =
      CoarseValueName(spec, dim) + (residual ? " less its list's centroid" : "") + " " +
      FloatText(values[j]) + " of item " +
      (ids ? "id " + std::to_string(ids[item]) : std::to_string(item) + " of the batch") +
      " (coarse dimension " + std::to_string(dim) + ") is outside what index '" + factory +
      "' holds: it stores ";
  if (residual || limit == kFloat16Max) {
    text += "half floats (largest magnitude " + FloatText(kFloat16Max) + ")";
  } else {
    text += "each value less its list's centroid as a half float (largest magnitude " +
            FloatText(kFloat16Max) + "), so values must lie within +-" + FloatText(limit);
  }
  std::string float_index = factory;
  const size_t at = float_index.find("SQfp16");
  if (at != std::string::npos) float_index.replace(at, 6, "Flat");
  return Status::InvalidArgument(text + "; create the collection with float vectors (index '" +
                                 float_index + "') to store such items");
}

CoarseIndex::CoarseIndex(const CollectionSpec& spec, const std::string& factory,
                         const FactoryShape& shape)
    : spec_(spec),
      factory_(factory),
      shape_(shape),
      coarse_dim_(CoarseDimension(spec)),
      centroid_cache_(std::make_unique<CentroidCache>()) {}

CoarseIndex::~CoarseIndex() = default;

std::string CoarseIndex::FactoryFor(const CollectionSpec& spec) {
  if (!spec.index_factory.empty()) return spec.index_factory;
  // Measured in bench/RESULTS.md (driver_engine search/ingest): IVF1024,Flat
  // reaches recall@10 1.0 at ~1 ms on 100k Gaussians with ingest >50k/s;
  // HNSW32 is as fast to search but ingests ~10x slower; Flat is 5-10x slower.
  return spec.kind == Kind::kCodes ? "PQ" : "IVF1024,Flat";
}

Status CoarseIndex::CheckCoarseRange(const CollectionSpec& spec, const void* rows, int64_t n,
                                     const int64_t* ids) {
  if (spec.kind == Kind::kCodes || n <= 0) return Status::OK();
  const std::string factory = FactoryFor(spec);
  // Most indexes hold any finite value: no parse of the string per batch.
  if (factory.find("SQfp16") == std::string::npos) return Status::OK();
  FactoryShape shape;
  HEDGEDB_RETURN_IF_ERROR(CheckFactoryString(spec, factory, &shape));
  const float limit = CoarseValueLimit(shape);
  if (std::isinf(limit)) return Status::OK();
  std::vector<float> x;
  CoarseVectorsOf(spec, RowShapeOf(spec), rows, n, &x);
  return CheckCoarseValues(spec, factory, x.data(), n, limit, ids, /*residual=*/false);
}

Status CoarseIndex::Create(const CollectionSpec& spec, std::unique_ptr<CoarseIndex>* out) {
  const std::string factory = FactoryFor(spec);
  FactoryShape shape;
  // Never hand FAISS a string outside the grammar: some abort the process.
  HEDGEDB_RETURN_IF_ERROR(CheckFactoryString(spec, factory, &shape));
  std::unique_ptr<CoarseIndex> ci;
  if (spec.kind == Kind::kCodes) {
    ci.reset(new CodesIndex(spec, factory, shape));
  } else {
    ci.reset(new VectorIndex(spec, factory, shape));
  }
  try {
    HEDGEDB_RETURN_IF_ERROR(ci->Build());
  } catch (const std::exception& e) {
    return FromFaiss(e, "bad index factory '" + factory + "'");
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
  try {
    return ci->Exercise();
  } catch (const std::exception& e) {
    return FromFaiss(e, "index factory '" + ci->factory_ + "' fails on a sample");
  }
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

void CoarseIndex::FailNextAddsForTest(int n) { g_failing_adds = n; }

Status CoarseIndex::Add(const void* rows, int64_t n, const int64_t* ids) {
  if (n == 0) return Status::OK();
  if (g_failing_adds > 0 && g_failing_adds-- > 0) {
    return Status::Internal("adding to index '" + factory_ + "': injected failure (test)");
  }
  if (!index_->is_trained) return Status::Internal("adding to an untrained index");
  try {
    return AddRows(rows, n, ids);
  } catch (const std::exception& e) {
    return FromFaiss(e, "adding to index '" + factory_ + "'");
  }
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

Status CoarseIndex::Ids(std::vector<int64_t>* ids) const {
  ids->clear();
  if (auto* idmap = dynamic_cast<const faiss::IndexIDMap*>(index_.get())) {
    ids->assign(idmap->id_map.begin(), idmap->id_map.end());
    return Status::OK();
  }
  if (auto* ivf = dynamic_cast<const faiss::IndexIVF*>(index_.get())) {
    try {
      for (size_t list = 0; list < ivf->nlist; ++list) {
        const size_t n = ivf->invlists->list_size(list);
        if (n == 0) continue;
        faiss::InvertedLists::ScopedIds list_ids(ivf->invlists, list);
        ids->insert(ids->end(), list_ids.get(), list_ids.get() + n);
      }
    } catch (const std::exception& e) {
      return FromFaiss(e, "reading the ids of index '" + factory_ + "'");
    }
    return Status::OK();
  }
  return Status::NotSupported("index '" + factory_ + "' does not list its ids");
}

Status CoarseIndex::ListSizes(std::vector<int64_t>* sizes) const {
  sizes->clear();
  auto* ivf = dynamic_cast<const faiss::IndexIVF*>(index_.get());
  if (!ivf) return Status::NotSupported("index '" + factory_ + "' has no inverted lists");
  sizes->reserve(ivf->nlist);
  for (size_t list = 0; list < ivf->nlist; ++list) {
    sizes->push_back(int64_t(ivf->invlists->list_size(list)));
  }
  return Status::OK();
}

double CoarseIndex::ListImbalance() const {
  std::vector<int64_t> sizes;
  if (!ListSizes(&sizes).ok()) return std::numeric_limits<double>::quiet_NaN();
  return ImbalanceFactor(sizes);
}

double ImbalanceFactor(const std::vector<int64_t>& sizes) {
  // In doubles: the squares of 10^7-vector lists overflow nothing there, and
  // the ratio needs no more than double precision.
  double sum = 0, squares = 0;
  for (int64_t n : sizes) {
    sum += double(n);
    squares += double(n) * double(n);
  }
  if (sizes.empty() || !(sum > 0)) return std::numeric_limits<double>::quiet_NaN();
  return double(sizes.size()) * squares / (sum * sum);
}

CoarseSearchKnobs CoarseIndex::KnobsFor(const CoarseSearchKnobs& asked) const {
  CoarseSearchKnobs knobs = default_knobs_;
  if (asked.nprobe > 0) knobs.nprobe = asked.nprobe;
  if (asked.ef_search > 0) knobs.ef_search = asked.ef_search;
  knobs.any_order = asked.any_order;
  return knobs;
}

void CoarseIndex::CentroidsChanged() { centroid_cache_->Invalidate(); }

bool CoarseIndex::ListScan(const float* x, int64_t nq, int64_t k, const CoarseSearchKnobs& knobs,
                           const IdFilter* filter, float* distances, int64_t* labels) const {
  const faiss::IndexIVF* ivf = ScannableIvf(index_.get());
  const faiss::IndexIDMap* flat = ivf ? nullptr : ScannableFlat(index_.get());
  if (!ivf && !flat) return false;
  std::shared_ptr<const CentroidColumns> centroids;
  if (ivf) centroids = centroid_cache_->For(*FlatL2Quantizer(ivf));
  ListScanSearch(ivf, flat, x, nq, k, knobs.nprobe, filter, distances, labels, centroids.get(),
                 /*sorted=*/!knobs.any_order);
  return true;
}

Status CoarseIndex::Search(const float* queries, int64_t nq, int64_t k,
                           const CoarseSearchKnobs& knobs, std::vector<int64_t>* labels) const {
  std::vector<float> x;
  CoarseQueries(queries, nq, &x);
  labels->assign(size_t(nq * k), -1);
  std::vector<float> distances(size_t(nq * k));
  const CoarseSearchKnobs wanted = KnobsFor(knobs);
  try {
    if (ListScan(x.data(), nq, k, wanted, nullptr, distances.data(), labels->data())) {
      return Status::OK();
    }
  } catch (const std::exception& e) {
    return FromFaiss(e, "searching index '" + factory_ + "'");
  }
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

namespace {

// FAISS's reader over bytes in memory (a mapped file), read in place: FAISS's
// VectorIOReader needs them copied into its vector first.
class SpanIOReader : public faiss::IOReader {
 public:
  explicit SpanIOReader(std::string_view bytes) : bytes_(bytes) {}
  // As fread: whole items only, 0 at the end.
  size_t operator()(void* ptr, size_t size, size_t nitems) override {
    if (size == 0 || pos_ >= bytes_.size()) return 0;
    nitems = std::min(nitems, (bytes_.size() - pos_) / size);
    if (nitems == 0) return 0;  // FAISS reads empty arrays into a null pointer
    std::memcpy(ptr, bytes_.data() + pos_, size * nitems);
    pos_ += size * nitems;
    return nitems;
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// FAISS's view of an IdFilter; `id_map` (not null) first turns the inner
// index's positions into user ids, as IndexIDMap would.
class FilterSelector : public faiss::IDSelector {
 public:
  FilterSelector(const IdFilter& filter, const int64_t* id_map)
      : filter_(filter), id_map_(id_map) {}
  bool is_member(faiss::Index::idx_t id) const override {
    return filter_.Allows(id_map_ ? id_map_[id] : id);
  }

 private:
  const IdFilter& filter_;
  const int64_t* id_map_;
};

}  // namespace

bool CoarseIndex::supports_filter() const {
  if (dynamic_cast<const faiss::IndexIVF*>(index_.get())) return true;
  auto* idmap = dynamic_cast<const faiss::IndexIDMap*>(index_.get());
  return idmap && !dynamic_cast<const faiss::IndexPQ*>(idmap->index);
}

Status CoarseIndex::SearchFiltered(const float* queries, int64_t nq, int64_t k,
                                   const CoarseSearchKnobs& knobs, const IdFilter& filter,
                                   std::vector<int64_t>* labels) const {
  if (!supports_filter()) {
    return Status::NotSupported("index '" + factory_ + "' cannot filter inside its search");
  }
  std::vector<float> x;
  CoarseQueries(queries, nq, &x);
  labels->assign(size_t(nq * k), -1);
  std::vector<float> distances(size_t(nq * k));
  // The knobs travel in the search parameters: no shared state changes, so
  // filtered searches never wait for each other.
  const CoarseSearchKnobs wanted = KnobsFor(knobs);
  try {
    if (ListScan(x.data(), nq, k, wanted, &filter, distances.data(), labels->data())) {
      return Status::OK();
    }
    if (auto* ivf = dynamic_cast<const faiss::IndexIVF*>(index_.get())) {
      FilterSelector selector(filter, nullptr);
      faiss::SearchParametersIVF params;
      params.nprobe = size_t(std::max(wanted.nprobe, 1));
      params.sel = &selector;
      ivf->search(nq, x.data(), k, distances.data(), labels->data(), &params);
      return Status::OK();
    }
    auto* idmap = static_cast<const faiss::IndexIDMap*>(index_.get());
    FilterSelector selector(filter, idmap->id_map.data());
    faiss::SearchParametersHNSW hnsw_params;
    faiss::SearchParameters plain_params;
    faiss::SearchParameters* params = &plain_params;
    if (dynamic_cast<const faiss::IndexHNSW*>(idmap->index)) {
      hnsw_params.efSearch = std::max(wanted.ef_search, 1);
      params = &hnsw_params;
    }
    params->sel = &selector;
    idmap->index->search(nq, x.data(), k, distances.data(), labels->data(), params);
    for (int64_t& label : *labels) {
      if (label >= 0) label = idmap->id_map[size_t(label)];
    }
  } catch (const std::exception& e) {
    return FromFaiss(e, "searching index '" + factory_ + "' with a filter");
  }
  return Status::OK();
}

int64_t CoarseIndex::ntotal() const { return index_->ntotal; }

Status CoarseIndex::TuneKnobs(const void*, const int64_t*, int64_t, int64_t, double) {
  return Status::OK();
}

Status CoarseIndex::MeasureRecall(const void*, const int64_t*, int64_t, int64_t, int64_t,
                                  const std::vector<CoarseSearchKnobs>&,
                                  std::vector<double>*) const {
  return Status::NotSupported("index '" + factory_ + "' has no search knobs to measure");
}

CoarseSearchKnobs CoarseIndex::StaticKnobs() const {
  // As SetDefaultKnobs sets them on a new index.
  CoarseSearchKnobs knobs;
  if (shape_.ivf_lists > 0) {
    knobs.nprobe =
        int(std::min<int64_t>(shape_.ivf_lists, std::max<int64_t>(8, shape_.ivf_lists / 64)));
  } else if (shape_.hnsw_m > 0) {
    knobs.ef_search = 64;
  }
  return knobs;
}

void CoarseIndex::AdoptFit(const CoarseSearchKnobs& knobs, int oversampling, double recall,
                           double coarse_recall) {
  AdoptKnobs(knobs, coarse_recall);
  default_oversampling_ = std::max(0, oversampling);
  recall_estimate_ = recall;
}

void CoarseIndex::RestoreFit(int oversampling, double recall, double coarse_recall) {
  default_oversampling_ = std::max(0, oversampling);
  recall_estimate_ = recall;
  coarse_recall_ = coarse_recall;
}

void CoarseIndex::AdoptKnobs(const CoarseSearchKnobs& knobs, double coarse_recall) {
  std::unique_lock<RwMutex> lock(knob_mutex_);
  faiss::Index* inner = Innermost(index_.get());
  if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(inner); ivf && knobs.nprobe > 0) {
    ivf->nprobe = std::min<size_t>(ivf->nlist, size_t(knobs.nprobe));
  }
  if (auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(inner); hnsw && knobs.ef_search > 0) {
    hnsw->hnsw.efSearch = knobs.ef_search;
  }
  ReadDefaultKnobs();
  coarse_recall_ = coarse_recall;
}

Status CoarseIndex::Save(const std::string& path, uint64_t sequence, uint64_t binding,
                         std::string_view upkeep) const {
  faiss::VectorIOWriter writer;
  try {
    faiss::write_index(index_.get(), &writer);
  } catch (const std::exception& e) {
    return Status::IOError(std::string("serializing index: ") + e.what());
  }
  // The header holds the fitted final recall; the coarse recall and the
  // fitted oversampling ride in the upkeep record (IndexKeeper).
  const uint32_t recall_bp = std::isnan(recall_estimate_)
                                 ? kUnknownRecall
                                 : uint32_t(std::lround(recall_estimate_ * 10000));
  const std::string_view blob(reinterpret_cast<const char*>(writer.data.data()),
                              writer.data.size());
  const std::string prefix = EncodeUpkeepPrefix(upkeep);
  const std::string header = EncodeIndexFileHeader(recall_bp, sequence, binding, {prefix, blob});
  return WriteFileAtomically(path, {header, prefix, blob});
}

Status CoarseIndex::Load(const CollectionSpec& spec, const std::string& path, uint64_t binding,
                         std::unique_ptr<CoarseIndex>* out, uint64_t* sequence,
                         std::string* upkeep) {
  // Mapped, not read: FAISS copies what it keeps straight from the page cache.
  MappedFile file;
  Status opened = file.Open(path);
  if (opened.IsNotFound()) return Status::NotFound("no index file " + path);
  HEDGEDB_RETURN_IF_ERROR(opened);
  const std::string_view bytes = file.bytes();
  const std::string_view header = bytes.substr(0, std::min(bytes.size(), kIndexHeaderBytes));
  IndexFileHeader parsed;
  HEDGEDB_RETURN_IF_ERROR(ParseIndexFileHeader(header, bytes.size(), path, &parsed));
  const std::string_view payload = bytes.substr(kIndexHeaderBytes, parsed.blob_bytes);
  HEDGEDB_RETURN_IF_ERROR(CheckIndexFileBlob(header, parsed, payload, binding, path));
  std::string_view record, blob;
  HEDGEDB_RETURN_IF_ERROR(SplitIndexPayload(parsed, payload, path, &record, &blob));
  SpanIOReader reader(blob);

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
  // A version 2 file's one recall is the coarse one, and it has no fitted
  // candidates: the estimate stays NaN, so that the next save fits them
  // (IndexKeeper::Save); meanwhile searches use 10 x k. Version 3's is the
  // fitted final recall; its coarse recall and oversampling come with the
  // upkeep record (IndexKeeper::LoadUpkeep, RestoreFit).
  if (parsed.recall_bp != kUnknownRecall) {
    (parsed.version >= 3 ? ci->recall_estimate_ : ci->coarse_recall_) = parsed.recall_bp / 10000.0;
  }
  *sequence = parsed.sequence;
  if (upkeep) upkeep->assign(record.data(), record.size());
  *out = std::move(ci);
  return Status::OK();
}

}  // namespace index
}  // namespace hedgedb
