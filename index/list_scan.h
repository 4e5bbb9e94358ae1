// Stage 1 with hedgedb's own kernels: the exact k nearest coarse vectors (L2)
// in the probed lists of an IVF of float vectors, of 8-bit scalar-quantized
// vectors (SQ8) or of half floats (SQfp16), or in a flat index of any of
// them. Codes are decoded as FAISS decodes them (SQ8: folded into the query;
// fp16: widened in the kernel, exactly); residual codes (IVF<n>,SQ8 and
// IVF<n>,SQfp16 as the factory builds them) have the list's centroid taken
// off the query once per list.
//
// Debian's FAISS 1.7.3 is built without its SIMD paths: its list scan and its
// one-query quantizer search are fvec_L2sqr_ref, one dependent add per
// dimension, and they were most of a search's time (bench/RESULTS.md,
// "Stage 1 at the memory floor"); its fp16 scan also decodes each half in
// scalar bit operations (IVF1024,SQfp16 ran at a quarter of IVF1024,Flat or
// less).
// Here the distances come from L2SqrRows, L2SqrSq8Rows and L2SqrFp16Rows,
// dispatched on the process's SIMD level (common/simd_level.h);
// FAISS still trains, adds, removes, saves and loads the index, and searches
// every other kind of index. Batches share their list scans: a list's
// rows are read in tiles that stay in L1 while every query probing the
// list is scored against them, and the next tile (and the next list's first)
// is prefetched while one is scored.
//
// Which k: the k smallest (distance, id) pairs, so the answer does not depend
// on the scan's order, the threads or the tiles (FAISS's heap keeps an
// arbitrary one of equal distances). The distances differ from FAISS's by
// float rounding only (another summation order). Internal to index/.
#pragma once

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexScalarQuantizer.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "index/coarse_index.h"

namespace hedgedb {
namespace index {

// Squared L2 distances of n contiguous rows of d floats to q, with the active
// level's kernel (list_scan_impl.h).
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
// The same to n vectors stored transposed: row t of `columns` (`stride`
// floats apart) holds dimension t of every vector (CentroidColumns).
void L2SqrColumns(const float* q, const float* columns, int64_t stride, int64_t n, int d,
                  float* out);
// The same for nq queries (q: nq x d floats; out: nq rows of n), each
// query's distances bitwise those of its own L2SqrColumns call: the
// quantizer step of a batch, which reads the columns once per few queries.
void L2SqrColumnsBatch(const float* q, int nq, const float* columns, int64_t stride, int64_t n,
                       int d, float* out);
// The `probes` smallest of n distances, smallest first, ties to the smaller
// index, NaN after every number: their indices in best[0..probes), for
// 1 <= probes <= n. The quantizer step's choice of lists (FAISS's differs
// only in ties).
void NearestLists(const float* dist, int64_t n, int64_t probes, int32_t* best);
// Squared L2 distances of n contiguous SQ8 codes (d bytes each) to q, the
// codes decoded as FAISS's QT_8bit decodes them, x_t = vmin_t + (c_t + 0.5) /
// 255 * vdiff_t (vmin, vdiff: the quantizer's per-dimension ranges), with the
// active level's kernel. It folds the decoding into the query, (a_t - b_t
// c_t)^2 with a_t = q_t - vmin_t - 0.5 b_t and b_t = vdiff_t / 255, so the
// distances differ from FAISS's by float rounding of those terms.
void L2SqrSq8Rows(const float* q, const float* vmin, const float* vdiff, const uint8_t* codes,
                  int64_t n, int d, float* out);
// Squared L2 distances of n contiguous rows of d IEEE half floats (FAISS's
// QT_fp16 codes, 2d bytes each) to q, each half widened to float exactly (as
// FAISS's decode_fp16), with the active level's kernel (the AVX2 one only
// where the CPU has F16C too, else the portable one).
void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n, int d, float* out);
namespace reference {
// The same in plain sequential float arithmetic: what tests compare with.
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
// SQ8 codes decoded as FAISS decodes them, then as L2SqrRows.
void L2SqrSq8Rows(const float* q, const float* vmin, const float* vdiff, const uint8_t* codes,
                  int64_t n, int d, float* out);
// A half's value, from its sign, exponent and mantissa fields (ldexp).
float HalfToFloat(uint16_t h);
// Halves decoded by HalfToFloat, then as L2SqrRows.
void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n, int d, float* out);
}  // namespace reference

// The centroids of an IVF's flat quantizer transposed (row t: dimension t of
// every centroid, rows `stride` floats apart: a multiple of 16, an odd
// number of cache lines), which the quantizer step reads:
// sixteen centroids per vector instruction, no horizontal sums. Made once per
// set of centroids and kept by CentroidCache.
struct CentroidColumns {
  const float* source = nullptr;  // the quantizer's vectors they were made from
  int64_t n = 0;
  int d = 0;
  int64_t stride = 0;
  std::vector<float> values;
};

// The columns of an index's current centroids; thread-safe. Made again if
// the quantizer's vectors move or change in number (a retrained index).
class CentroidCache {
 public:
  std::shared_ptr<const CentroidColumns> For(const faiss::IndexFlat& quantizer);
  // Forgets the columns: whoever changes the quantizer's vectors in place
  // (a retrain can refill the same buffer with as many centroids) calls it.
  void Invalidate();

 private:
  std::mutex mutex_;
  std::shared_ptr<const CentroidColumns> columns_;
};

// The IVF that ListScanSearch can search: an IndexIVFFlat, or an
// IndexIVFScalarQuantizer of QT_8bit or QT_fp16 codes (residuals or not),
// over a trained flat L2 quantizer, L2; nullptr otherwise.
const faiss::IndexIVF* ScannableIvf(const faiss::Index* index);
// The id map over a flat L2 index (IndexFlat, or a trained QT_8bit or
// QT_fp16 IndexScalarQuantizer) that ListScanSearch can search; nullptr
// otherwise.
const faiss::IndexIDMap* ScannableFlat(const faiss::Index* index);

// For nq queries x (d floats each, the index's dimension): the k nearest
// vectors of the nprobe lists nearest to each query (ivf) or of all vectors
// (flat; nprobe ignored), that `filter` allows (null: all). labels and
// distances get nq * k entries, nearest first (in any order where `sorted`
// is false), padded with -1 and +inf.
// Exactly one of ivf and flat is set. Large batches go in chunks of
// kListScanChunk queries, so the bookkeeping stays small whatever nq. Throws what an allocation or
// the filter throws (never from inside a parallel region), like a FAISS search. With `centroids`
// (the ivf's, from a CentroidCache), the quantizer step reads them; null: it reads the quantizer's
// rows.
constexpr int64_t kListScanChunk = 4096;
void ListScanSearch(const faiss::IndexIVF* ivf, const faiss::IndexIDMap* flat, const float* x,
                    int64_t nq, int64_t k, int nprobe, const IdFilter* filter, float* distances,
                    int64_t* labels, const CentroidColumns* centroids = nullptr,
                    bool sorted = true);

}  // namespace index
}  // namespace hedgedb
