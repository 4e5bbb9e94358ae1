// Stage 1 with hedgedb's own kernels: the exact k nearest coarse vectors (L2)
// in the probed lists of an IVF of float vectors, or in a flat index.
//
// Debian's FAISS 1.7.3 is built without its SIMD paths: its list scan and its
// one-query quantizer search are fvec_L2sqr_ref, one dependent add per
// dimension, and they were most of a search's time (bench/RESULTS.md,
// "Stage 1 at the memory floor"). Here the distances come from
// L2SqrRows, dispatched on the process's SIMD level (common/simd_level.h);
// FAISS still trains, adds, removes, saves and loads the index, and searches
// every other kind of index. Batches share their list scans: a list's
// vectors are read in tiles that stay in L1 while every query probing the
// list is scored against them.
//
// Which k: the k smallest (distance, id) pairs, so the answer does not depend
// on the scan's order, the threads or the tiles (FAISS's heap keeps an
// arbitrary one of equal distances). The distances differ from FAISS's by
// float rounding only (another summation order). Internal to index/.
#pragma once

#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVFFlat.h>

#include <cstdint>

#include "index/coarse_index.h"

namespace hedgedb {
namespace index {

// Squared L2 distances of n contiguous rows of d floats to q, with the active
// level's kernel (list_scan_impl.h).
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
namespace reference {
// The same in plain sequential float arithmetic: what tests compare with.
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
}  // namespace reference

// The IVF that ListScanSearch can search: an IndexIVFFlat over a trained flat
// L2 quantizer; nullptr otherwise.
const faiss::IndexIVFFlat* ScannableIvf(const faiss::Index* index);
// The id map over a flat L2 index that ListScanSearch can search; nullptr
// otherwise.
const faiss::IndexIDMap* ScannableFlat(const faiss::Index* index);

// For nq queries x (d floats each, the index's dimension): the k nearest
// vectors of the nprobe lists nearest to each query (ivf) or of all vectors
// (flat; nprobe ignored), that `filter` allows (null: all). labels and
// distances get nq * k entries, nearest first, padded with -1 and +inf.
// Exactly one of ivf and flat is set.
void ListScanSearch(const faiss::IndexIVFFlat* ivf, const faiss::IndexIDMap* flat, const float* x,
                    int64_t nq, int64_t k, int nprobe, const IdFilter* filter, float* distances,
                    int64_t* labels);

}  // namespace index
}  // namespace hedgedb
