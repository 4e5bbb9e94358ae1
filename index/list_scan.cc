#include "index/list_scan.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexScalarQuantizer.h>
#include <omp.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <typeinfo>
#include <utility>
#include <vector>

#include "common/half.h"
#include "index/list_scan_isa.h"
#include "index/nearest_centroid.h"
#include "index/select_k.h"

namespace hedgedb {
namespace index {

// The baseline version; list_scan_avx2.cc and list_scan_avx512.cc compile the
// same source with their level's flags.
namespace portable {
#include "index/list_scan_impl.h"
}  // namespace portable

namespace reference {
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float s = 0;
    for (int t = 0; t < d; ++t) {
      const float a = q[t] - rows[i * d + t];
      s += a * a;
    }
    out[i] = s;
  }
}
void L2SqrSq8Rows(const float* q, const float* vmin, const float* vdiff, const uint8_t* codes,
                  int64_t n, int d, float* out) {
  std::vector<float> x(static_cast<size_t>(d));
  for (int64_t i = 0; i < n; ++i) {
    for (int t = 0; t < d; ++t) {
      x[size_t(t)] = vmin[t] + ((float(codes[i * d + t]) + 0.5f) / 255.0f) * vdiff[t];
    }
    L2SqrRows(q, x.data(), 1, d, out + i);
  }
}
float HalfToFloat(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const float sign = (h & 0x8000) != 0 ? -1.0f : 1.0f;
  if (exponent == 31) {
    return mantissa == 0 ? sign * std::numeric_limits<float>::infinity()
                         : std::numeric_limits<float>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(float(mantissa), -24);  // zero or subnormal
  return sign * std::ldexp(float(1024 + mantissa), exponent - 25);
}
void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n, int d, float* out) {
  std::vector<float> x(static_cast<size_t>(d));
  for (int64_t i = 0; i < n; ++i) {
    for (int t = 0; t < d; ++t) x[size_t(t)] = HalfToFloat(codes[i * d + t]);
    L2SqrRows(q, x.data(), 1, d, out + i);
  }
}
}  // namespace reference

namespace {

L2SqrRowsFn ActiveL2SqrRows() {
  return ForActiveKernelIsa(&portable::L2SqrRows, HEDGEDB_SIMD_X86_ONLY(&avx2::L2SqrRows),
                            HEDGEDB_SIMD_X86_ONLY(&avx512::L2SqrRows));
}

L2SqrColumnsFn ActiveL2SqrColumns() {
  return ForActiveKernelIsa(&portable::L2SqrColumns, HEDGEDB_SIMD_X86_ONLY(&avx2::L2SqrColumns),
                            HEDGEDB_SIMD_X86_ONLY(&avx512::L2SqrColumns));
}

L2SqrSq8RowsFn ActiveL2SqrSq8Rows() {
  return ForActiveKernelIsa(&portable::L2SqrSq8Rows, HEDGEDB_SIMD_X86_ONLY(&avx2::L2SqrSq8Rows),
                            HEDGEDB_SIMD_X86_ONLY(&avx512::L2SqrSq8Rows));
}

// F16C is beyond the kAvx2 level (its check is AVX2 and FMA), so the fp16
// kernel checks it on top of the level: an AVX2 CPU without it (none is known)
// gets the portable kernel. The AVX-512 kernel's conversion is AVX-512F.
L2SqrFp16RowsFn ActiveL2SqrFp16Rows() {
#if HEDGEDB_SIMD_X86
  static const bool f16c = __builtin_cpu_supports("f16c");
#endif
  return ForActiveKernelIsa(&portable::L2SqrFp16Rows,
                            HEDGEDB_SIMD_X86_ONLY(f16c ? &avx2::L2SqrFp16Rows : nullptr),
                            HEDGEDB_SIMD_X86_ONLY(&avx512::L2SqrFp16Rows));
}

// A list's vectors are read in tiles of this many rows, scored against every
// query of the batch that probes the list while the tile is in L1 (32 x 65
// floats: 8 KB).
constexpr int64_t kTileRows = 32;
constexpr float kInf = std::numeric_limits<float>::infinity();

// The k smallest (distance, id) pairs offered: a total order, so the answer
// is the same whatever order the pairs come in. A tile of pairs at or below
// the bound is appended without a branch per pair (each pair is written, and
// the end moves past it only if it qualifies: the scan's per-row branch was a
// tenth of a batched search); a full buffer keeps its k smallest
// (SelectSmallest, select_k.h) and lowers the bound to the k-th distance. Amortised O(1) a
// pair, against O(log k) for a heap (a heap was 8% of a one-query search).
class TopK {
 public:
  explicit TopK(int64_t k) : k_(size_t(k)), limit_(std::max<size_t>(2 * k_, kMinBuffer)) {}
  TopK(const TopK&) = delete;
  TopK& operator=(const TopK&) = delete;
  TopK(TopK&&) = default;
  // Offers the pairs (dist[r], ids[r]), r < m, that `filter` allows (null:
  // all). m <= kTileRows.
  void PushTile(const float* dist, const int64_t* ids, int64_t m, const IdFilter* filter) {
    if (k_ == 0) return;
    if (size_ + size_t(m) > capacity_) Grow(size_ + size_t(m));
    Entry* out = buffer_.get() + size_;
    const float bound = bound_;
    size_t n = 0;
    if (filter == nullptr) {
      for (int64_t r = 0; r < m; ++r) {
        out[n] = Entry{dist[r], ids[r]};
        n += dist[r] <= bound ? 1 : 0;  // NaN never enters
      }
    } else {
      for (int64_t r = 0; r < m; ++r) {
        if (dist[r] <= bound && filter->Allows(ids[r])) out[n++] = Entry{dist[r], ids[r]};
      }
    }
    size_ += n;
    if (size_ >= limit_) Shrink();
  }
  // The k kept (nearest first if `sorted`), padded with (+inf, -1) to k.
  void Write(float* distances, int64_t* labels, bool sorted) {
    Shrink();
    if (sorted) SortSmall(buffer_.get(), size_, Less());
    for (size_t j = 0; j < k_; ++j) {
      distances[j] = j < size_ ? buffer_[j].distance : kInf;
      labels[j] = j < size_ ? buffer_[j].id : -1;
    }
  }

 private:
  struct Entry {
    float distance;
    int64_t id;
  };
  // Nearer first, then the smaller id: a total order (no NaN is kept),
  // written without && and || so that select_k.h's loops stay branch-free.
  struct Less {
    bool operator()(const Entry& a, const Entry& b) const {
      return (a.distance < b.distance) | ((a.distance == b.distance) & (a.id < b.id));
    }
  };
  struct Key {
    uint32_t operator()(const Entry& e) const { return FloatKey(e.distance); }
  };
  // Room for at least `need` pairs, up to the limit plus a tile (a short
  // scan never needs all of it). Left uninitialised: every pair is written
  // before it is read.
  void Grow(size_t need) {
    const size_t capacity =
        std::min(limit_ + size_t(kTileRows), std::max({need, 2 * capacity_, size_t(64)}));
    std::unique_ptr<Entry[]> bigger(new Entry[capacity]);
    std::copy(buffer_.get(), buffer_.get() + size_, bigger.get());
    buffer_ = std::move(bigger);
    capacity_ = capacity;
  }
  void Shrink() {
    if (k_ == 0 || size_ <= k_) return;  // k or fewer: all kept, nothing to cut
    SelectSmallestByKey(buffer_.get(), size_, k_, Key(), Less());
    size_ = k_;
    bound_ = buffer_[k_ - 1].distance;  // the k-th smallest: nothing farther enters
  }
  // A short scan (few probed rows, k near their count) that fits the buffer
  // is cut once, at the end: each cut was an nth_element whose branches
  // mispredict, and a 2k buffer cut several times was most of a small
  // scan's bookkeeping.
  static constexpr size_t kMinBuffer = 512;
  size_t k_;
  size_t limit_;
  float bound_ = kInf;
  size_t size_ = 0;  // pairs kept: buffer_[0, size_)
  size_t capacity_ = 0;
  std::unique_ptr<Entry[]> buffer_;
};

// What a list's rows are: float vectors, SQ8 codes or fp16 codes.
enum class Rows { kFloat, kSq8, kFp16 };

// Bytes of a row of d dimensions.
int64_t RowBytes(Rows rows, int d) {
  switch (rows) {
    case Rows::kSq8:
      return d;
    case Rows::kFp16:
      return 2 * int64_t(d);
    default:
      return int64_t(sizeof(float)) * d;
  }
}

// One list (or the whole flat index): n rows and their ids.
struct List {
  const float* vectors = nullptr;  // float rows
  const uint8_t* codes = nullptr;  // or SQ8 or fp16 rows (Codes::rows)
  const int64_t* ids = nullptr;
  int64_t n = 0;
};

// How a scan reads its lists' rows: the kind, an SQ8 quantizer's ranges
// (ScalarQuantizer::trained of QT_8bit), and the centroids SQ8 or fp16 codes
// are residuals of (null: not residuals).
struct Codes {
  Rows rows = Rows::kFloat;
  const float* vmin = nullptr;
  const float* vdiff = nullptr;
  const float* centroids = nullptr;
};

// Scores the list's rows against queries `which` (indices into x and heaps),
// tile by tile: the tile stays in L1 while every query is scored against it.
// Asks for the rows of the tile at row t0 of a list (none past its end), a
// cache line at a time: the next tile while one is scored, and a list's
// first tile while the list before it is scanned. A short list (a hundred
// rows) is over before the hardware's stream prefetch has ramped up on it.
__attribute__((always_inline)) inline void PrefetchTile(const List& list, int64_t row_bytes,
                                                        int64_t t0) {
  if (t0 >= list.n) return;
  const char* p = list.vectors != nullptr ? reinterpret_cast<const char*>(list.vectors)
                                          : reinterpret_cast<const char*>(list.codes);
  if (p == nullptr) return;
  p += t0 * row_bytes;
  const int64_t bytes = std::min(kTileRows, list.n - t0) * row_bytes;
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(p + i);
}

void ScanList(const List& list, int d, const float* x, const int32_t* which, size_t count,
              const IdFilter* filter, L2SqrRowsFn l2, const Codes& codes, int64_t list_no,
              TopK* heaps) {
  float dist[kTileRows];
  const int64_t row_bytes = RowBytes(codes.rows, d);
  const float* centroid = codes.centroids ? codes.centroids + list_no * d : nullptr;
  // SQ8: per query, the decoding folded into a and b (L2SqrSq8Rows), with
  // the list's centroid taken off the query where the codes are residuals.
  // fp16: a is the query less the list's centroid (residuals), else the
  // query itself is read.
  std::vector<float> a, b;
  const L2SqrSq8RowsFn sq8_rows = codes.rows == Rows::kSq8 ? ActiveL2SqrSq8Rows() : nullptr;
  const L2SqrFp16RowsFn fp16_rows = codes.rows == Rows::kFp16 ? ActiveL2SqrFp16Rows() : nullptr;
  if (codes.rows == Rows::kSq8) {
    a.resize(count * size_t(d));
    b.resize(size_t(d));
    for (int t = 0; t < d; ++t) b[size_t(t)] = codes.vdiff[t] / 255.0f;
    for (size_t j = 0; j < count; ++j) {
      const float* q = x + int64_t(which[j]) * d;
      for (int t = 0; t < d; ++t) {
        const float residual = centroid ? q[t] - centroid[t] : q[t];
        a[j * size_t(d) + size_t(t)] = residual - codes.vmin[t] - 0.5f * b[size_t(t)];
      }
    }
  } else if (codes.rows == Rows::kFp16 && centroid != nullptr) {
    a.resize(count * size_t(d));
    for (size_t j = 0; j < count; ++j) {
      const float* q = x + int64_t(which[j]) * d;
      for (int t = 0; t < d; ++t) a[j * size_t(d) + size_t(t)] = q[t] - centroid[t];
    }
  }
  for (int64_t t0 = 0; t0 < list.n; t0 += kTileRows) {
    const int64_t m = std::min(kTileRows, list.n - t0);
    PrefetchTile(list, row_bytes, t0 + kTileRows);
    for (size_t j = 0; j < count; ++j) {
      const int32_t q = which[j];
      TopK& heap = heaps[q];
      switch (codes.rows) {
        case Rows::kSq8:
          sq8_rows(a.data() + j * size_t(d), b.data(), list.codes + t0 * d, m, d, dist);
          break;
        case Rows::kFp16:
          // FAISS's fp16 codes are 2-byte halves from an allocator's
          // (16-byte aligned) buffer, rows 2d bytes apart.
          fp16_rows(a.empty() ? x + int64_t(q) * d : a.data() + j * size_t(d),
                    reinterpret_cast<const uint16_t*>(list.codes + t0 * row_bytes), m, d, dist);
          break;
        default:
          l2(x + int64_t(q) * d, list.vectors + t0 * d, m, d, dist);
          break;
      }
      heap.PushTile(dist, list.ids + t0, m, filter);
    }
  }
}

// The scalar quantizer of an index ListScanSearch reads, or null for float
// rows.
const faiss::ScalarQuantizer* SqOf(const faiss::Index* index) {
  if (auto* ivf = dynamic_cast<const faiss::IndexIVFScalarQuantizer*>(index)) return &ivf->sq;
  if (auto* flat = dynamic_cast<const faiss::IndexScalarQuantizer*>(index)) return &flat->sq;
  return nullptr;
}

// A QT_8bit quantizer with its per-dimension ranges for d dimensions.
bool IsSq8(const faiss::ScalarQuantizer& sq, int64_t d) {
  return sq.qtype == faiss::ScalarQuantizer::QT_8bit && int64_t(sq.d) == d &&
         sq.code_size == size_t(d) && sq.trained.size() == 2 * size_t(d);
}

// A QT_fp16 quantizer for d dimensions: one half per dimension, nothing
// trained.
bool IsFp16(const faiss::ScalarQuantizer& sq, int64_t d) {
  return sq.qtype == faiss::ScalarQuantizer::QT_fp16 && int64_t(sq.d) == d &&
         sq.code_size == 2 * size_t(d);
}

// How ListScanSearch reads the rows of `sq` (null: float rows); the
// centroids are left to the caller.
Codes CodesOf(const faiss::ScalarQuantizer* sq, int d) {
  Codes codes;
  if (sq == nullptr) return codes;
  if (sq->qtype == faiss::ScalarQuantizer::QT_fp16) {
    codes.rows = Rows::kFp16;
  } else {
    codes.rows = Rows::kSq8;
    codes.vmin = sq->trained.data();
    codes.vdiff = sq->trained.data() + d;
  }
  return codes;
}

// Queries [q0, q1) of an IVF: each query's nprobe nearest lists (ties: the
// smaller list number), then every probed list scanned once for all the
// queries that probe it.
void SearchIvfQueries(const faiss::IndexIVF& ivf, const CentroidColumns* centroids, const float* x,
                      int64_t q0, int64_t q1, int nprobe, const IdFilter* filter, L2SqrRowsFn l2,
                      TopK* heaps) {
  const L2SqrColumnsFn l2_columns = ActiveL2SqrColumns();
  const faiss::IndexFlat* quantizer = FlatL2Quantizer(&ivf);
  const int d = int(ivf.d);
  const int64_t nlist = int64_t(ivf.nlist);
  const int64_t probes = std::min<int64_t>(std::max(nprobe, 1), nlist);
  // The quantizer step a few queries at a time (they share the column
  // reads; list_scan_avx512.cc).
  constexpr int64_t kQuantizerBlock = 4;
  std::vector<float> centroid_dist(static_cast<size_t>(nlist * kQuantizerBlock));
  std::vector<int32_t> order(static_cast<size_t>(nlist));
  // probed[(q - q0) * probes + j]: query q's j-th list.
  std::vector<int32_t> probed(size_t((q1 - q0) * probes));
  // Counts as int64: a chunk's probes reach chunk x nprobe.
  std::vector<int64_t> per_list(size_t(nlist) + 1, 0);
  for (int64_t b0 = q0; b0 < q1; b0 += kQuantizerBlock) {
    const int64_t b1 = std::min(q1, b0 + kQuantizerBlock);
    if (centroids != nullptr) {
      l2_columns(x + b0 * d, int(b1 - b0), centroids->values.data(), centroids->stride, nlist, d,
                 centroid_dist.data());
    } else {
      for (int64_t q = b0; q < b1; ++q) {
        l2(x + q * d, quantizer->get_xb(), nlist, d, centroid_dist.data() + (q - b0) * nlist);
      }
    }
    for (int64_t q = b0; q < b1; ++q) {
      NearestLists(centroid_dist.data() + (q - b0) * nlist, nlist, probes, order.data());
      for (int64_t j = 0; j < probes; ++j) {
        probed[size_t((q - q0) * probes + j)] = order[size_t(j)];
        ++per_list[size_t(order[size_t(j)]) + 1];
      }
    }
  }
  // Group the queries by list (counting sort), then scan the lists in order.
  for (int64_t l = 0; l < nlist; ++l) per_list[size_t(l + 1)] += per_list[size_t(l)];
  std::vector<int32_t> queries_of(probed.size());
  std::vector<int64_t> fill(per_list.begin(), per_list.end() - 1);
  for (int64_t q = q0; q < q1; ++q) {
    for (int64_t j = 0; j < probes; ++j) {
      const int32_t l = probed[size_t((q - q0) * probes + j)];
      queries_of[size_t(fill[size_t(l)]++)] = int32_t(q);
    }
  }
  const faiss::InvertedLists* lists = ivf.invlists;
  const faiss::ScalarQuantizer* sq = SqOf(&ivf);
  Codes codes = CodesOf(sq, d);
  if (sq != nullptr && static_cast<const faiss::IndexIVFScalarQuantizer&>(ivf).by_residual) {
    codes.centroids = quantizer->get_xb();
  }
  const int64_t row_bytes = RowBytes(codes.rows, d);
  // The probed lists in order; each one's first tile is asked for while the
  // one before it is scanned.
  auto probed_after = [&](int64_t l) {
    for (++l; l < nlist; ++l) {
      if (per_list[size_t(l)] != per_list[size_t(l + 1)] && lists->list_size(size_t(l)) != 0) break;
    }
    return l;
  };
  // The list's rows as List holds them (float vectors, or codes).
  auto rows_of = [&](List* list, const uint8_t* bytes) {
    if (codes.rows == Rows::kFloat) {
      list->vectors = reinterpret_cast<const float*>(bytes);
    } else {
      list->codes = bytes;
    }
  };
  // Each probed list's successor is found once: it is the next list scanned.
  for (int64_t l = probed_after(-1), next; l < nlist; l = next) {
    next = probed_after(l);
    const size_t begin = size_t(per_list[size_t(l)]), end = size_t(per_list[size_t(l + 1)]);
    List list;
    list.n = int64_t(lists->list_size(size_t(l)));
    faiss::InvertedLists::ScopedCodes list_codes(lists, size_t(l));
    faiss::InvertedLists::ScopedIds ids(lists, size_t(l));
    rows_of(&list, list_codes.get());
    list.ids = ids.get();
    if (next < nlist) {
      faiss::InvertedLists::ScopedCodes next_codes(lists, size_t(next));
      List ahead;
      ahead.n = int64_t(lists->list_size(size_t(next)));
      rows_of(&ahead, next_codes.get());
      PrefetchTile(ahead, row_bytes, 0);
    }
    ScanList(list, d, x, queries_of.data() + begin, end - begin, filter, l2, codes, l, heaps);
  }
}

}  // namespace

// Few probes (the usual case) take one pass that inserts into a short sorted
// array; many take a partial sort.
void NearestLists(const float* dist, int64_t n, int64_t probes, int32_t* best) {
  assert(probes >= 1 && probes <= n);
  auto before = [dist](int32_t a, int32_t b) {
    const float x = dist[size_t(a)], y = dist[size_t(b)];
    if (x < y) return true;
    if (y < x) return false;
    const bool xnan = x != x, ynan = y != y;
    if (xnan != ynan) return ynan;  // a number before NaN
    return a < b;
  };
  if (probes <= 16) {
    int64_t have = 0;
    auto offer = [&](int32_t c) {
      if (have == probes && !before(c, best[have - 1])) return;
      int64_t at = have < probes ? have++ : probes - 1;
      while (at > 0 && before(c, best[at - 1])) {
        best[at] = best[at - 1];
        --at;
      }
      best[at] = c;
    };
    for (int64_t j = 0; j < n;) {
      // Full: a later index enters only below the last kept distance (a tie
      // goes to the smaller index, kept already). A block of 16 with none
      // below it is passed over without a branch per distance (that branch
      // was most of this step). With a NaN kept any number enters, and each
      // distance is offered.
      const float last = have == probes ? dist[size_t(best[have - 1])] : kInf;
      if (have == probes && last == last && j + 16 <= n) {
        int any = 0;  // an int, so the compiler makes it vector compares
        for (int64_t i = 0; i < 16; ++i) any |= dist[j + i] < last ? 1 : 0;
        if (any != 0) {
          for (int64_t i = 0; i < 16; ++i) offer(int32_t(j + i));
        }
        j += 16;
        continue;
      }
      offer(int32_t(j++));
    }
    return;
  }
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) order[size_t(j)] = int32_t(j);
  std::partial_sort(order.begin(), order.begin() + probes, order.end(), before);
  std::copy(order.begin(), order.begin() + probes, best);
}

void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out) {
  ActiveL2SqrRows()(q, rows, n, d, out);
}

void L2SqrColumns(const float* q, const float* columns, int64_t stride, int64_t n, int d,
                  float* out) {
  ActiveL2SqrColumns()(q, 1, columns, stride, n, d, out);
}

void L2SqrColumnsBatch(const float* q, int nq, const float* columns, int64_t stride, int64_t n,
                       int d, float* out) {
  ActiveL2SqrColumns()(q, nq, columns, stride, n, d, out);
}

void L2SqrSq8Rows(const float* q, const float* vmin, const float* vdiff, const uint8_t* codes,
                  int64_t n, int d, float* out) {
  std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
  for (int t = 0; t < d; ++t) {
    b[size_t(t)] = vdiff[t] / 255.0f;
    a[size_t(t)] = q[t] - vmin[t] - 0.5f * b[size_t(t)];
  }
  ActiveL2SqrSq8Rows()(a.data(), b.data(), codes, n, d, out);
}

void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n, int d, float* out) {
  ActiveL2SqrFp16Rows()(q, codes, n, d, out);
}

std::shared_ptr<const CentroidColumns> CentroidCache::For(const faiss::IndexFlat& quantizer) {
  std::lock_guard<std::mutex> lock(mutex_);
  const float* xb = quantizer.get_xb();
  if (columns_ && columns_->source == xb && columns_->n == quantizer.ntotal &&
      columns_->d == int(quantizer.d)) {
    return columns_;
  }
  auto c = std::make_shared<CentroidColumns>();
  c->source = xb;
  c->n = quantizer.ntotal;
  c->d = int(quantizer.d);
  // Rows start on 64-byte multiples, an odd number of lines apart: a stride
  // of a multiple of 4 KB (1,024 centroids) put the same column of every row
  // in one L1 set, and the blocked kernel (list_scan_avx512.cc) missed L1 on
  // every load.
  c->stride = (c->n + 15) / 16 * 16;
  if ((c->stride / 16) % 2 == 0) c->stride += 16;
  c->values.assign(size_t(c->stride) * size_t(c->d), 0.0f);
  for (int64_t j = 0; j < c->n; ++j) {
    for (int t = 0; t < c->d; ++t) c->values[size_t(t * c->stride + j)] = xb[j * c->d + t];
  }
  columns_ = c;
  return columns_;
}

void CentroidCache::Invalidate() {
  std::lock_guard<std::mutex> lock(mutex_);
  columns_.reset();
}

const faiss::IndexIVF* ScannableIvf(const faiss::Index* index) {
  const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(index);
  if (ivf == nullptr || ivf->metric_type != faiss::METRIC_L2 || FlatL2Quantizer(ivf) == nullptr) {
    return nullptr;
  }
  if (typeid(*index) == typeid(faiss::IndexIVFFlat)) {
    return ivf->code_size == sizeof(float) * size_t(ivf->d) ? ivf : nullptr;
  }
  if (typeid(*index) == typeid(faiss::IndexIVFScalarQuantizer)) {
    const auto* sq = static_cast<const faiss::IndexIVFScalarQuantizer*>(index);
    const bool sq8 = IsSq8(sq->sq, ivf->d) && ivf->code_size == size_t(ivf->d);
    const bool fp16 = IsFp16(sq->sq, ivf->d) && ivf->code_size == 2 * size_t(ivf->d);
    return sq8 || fp16 ? ivf : nullptr;
  }
  return nullptr;
}

const faiss::IndexIDMap* ScannableFlat(const faiss::Index* index) {
  if (typeid(*index) != typeid(faiss::IndexIDMap)) return nullptr;
  auto* idmap = static_cast<const faiss::IndexIDMap*>(index);
  const faiss::Index* inner = idmap->index;
  const bool flat =
      typeid(*inner) == typeid(faiss::IndexFlatL2) || typeid(*inner) == typeid(faiss::IndexFlat);
  const bool sq = typeid(*inner) == typeid(faiss::IndexScalarQuantizer) && inner->is_trained;
  const faiss::ScalarQuantizer* q =
      sq ? &static_cast<const faiss::IndexScalarQuantizer*>(inner)->sq : nullptr;
  const bool sq8 = q != nullptr && IsSq8(*q, inner->d);
  const bool fp16 = q != nullptr && IsFp16(*q, inner->d);
  if (!flat && !sq8 && !fp16) return nullptr;
  if (inner->metric_type != faiss::METRIC_L2 || idmap->id_map.size() != size_t(inner->ntotal)) {
    return nullptr;
  }
  return idmap;
}

void ListScanSearch(const faiss::IndexIVF* ivf, const faiss::IndexIDMap* flat, const float* x,
                    int64_t nq, int64_t k, int nprobe, const IdFilter* filter, float* distances,
                    int64_t* labels, const CentroidColumns* centroids, bool sorted) {
  const L2SqrRowsFn l2 = ActiveL2SqrRows();
  const int threads = omp_get_max_threads();
  for (int64_t c0 = 0; c0 < nq; c0 += kListScanChunk) {
    const int64_t c1 = std::min(nq, c0 + kListScanChunk), n = c1 - c0;
    const float* xc = x + c0 * (ivf != nullptr ? int64_t(ivf->d) : int64_t(flat->d));
    std::vector<TopK> heaps;
    heaps.reserve(size_t(n));
    for (int64_t q = 0; q < n; ++q) heaps.emplace_back(k);
    // Contiguous groups of queries, one per thread: a group shares its list
    // scans. Small batches stay on the calling thread. An exception must not
    // leave the parallel region (that terminates): the first is kept and
    // thrown after it.
    const int64_t groups = n >= 2 * int64_t(threads) ? int64_t(threads) : 1;
    std::exception_ptr error;
    std::mutex error_mutex;
#pragma omp parallel for schedule(static) num_threads(int(groups)) if (groups > 1)
    for (int64_t g = 0; g < groups; ++g) {
      try {
        const int64_t q0 = n * g / groups, q1 = n * (g + 1) / groups;
        if (ivf != nullptr) {
          SearchIvfQueries(*ivf, centroids, xc, q0, q1, nprobe, filter, l2, heaps.data());
        } else {
          const faiss::Index* inner = flat->index;
          const faiss::ScalarQuantizer* sq = SqOf(inner);
          List all;
          const Codes codes = CodesOf(sq, int(inner->d));
          if (sq != nullptr) {
            all.codes = static_cast<const faiss::IndexScalarQuantizer*>(inner)->codes.data();
          } else {
            all.vectors = static_cast<const faiss::IndexFlat*>(inner)->get_xb();
          }
          all.ids = flat->id_map.data();
          all.n = inner->ntotal;
          std::vector<int32_t> which;
          for (int64_t q = q0; q < q1; ++q) which.push_back(int32_t(q));
          ScanList(all, int(inner->d), xc, which.data(), which.size(), filter, l2, codes, 0,
                   heaps.data());
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    for (int64_t q = 0; q < n; ++q) {
      heaps[size_t(q)].Write(distances + (c0 + q) * k, labels + (c0 + q) * k, sorted);
    }
  }
}

}  // namespace index
}  // namespace hedgedb
