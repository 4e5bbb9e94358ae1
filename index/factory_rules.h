// Which FAISS factory strings a collection accepts, and their bounds.
//
// FAISS's own factory accepts strings whose indexes abort the process later
// (IVF0, HNSW0, PQ0, NSG that cannot add incrementally) or need gigabytes to
// open (IVF100000000). A collection lives for years and is reopened by every
// command, so only a documented grammar with bounded parameters is accepted,
// checked before FAISS ever sees the string (docs/concepts.md lists it):
//
//   vectors (point, gaussian, mog), over the coarse dimension cd:
//     Flat
//     HNSW<M>[,Flat|,SQ4|,SQ6|,SQ8|,SQfp16]            M in [4, 256]
//     IVF<n>[_HNSW<M>],<encoding>                      n in [1, 262144]
//     PQ<m>[x<b>] | SQ4 | SQ6 | SQ8 | SQfp16            (no coarse quantizer)
//     <encoding> = Flat | SQ4 | SQ6 | SQ8 | SQfp16 | PQ<m>[x<b>]
//                  m divides cd, b in [1, 12] (default 8); under IVF b = 8
//   codes: PQ | IVF<n>,PQ                               n in [1, 65536],
//          codebooks and IVF centroids below 2^28 floats each
#pragma once

#include <cstdint>
#include <string>

#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace index {

// What a factory string parsed to.
struct FactoryShape {
  int64_t ivf_lists = 0;  // 0: no inverted lists
  int hnsw_m = 0;         // 0: no HNSW graph (an IVF's HNSW quantizer counts)
  int pq_m = 0;           // 0: no product quantizer
  int pq_bits = 0;
  bool half_codes = false;  // SQfp16: each coarse value stored as a half float

  // An HNSW graph without inverted lists (not an IVF's HNSW quantizer).
  bool graph_only() const { return ivf_lists == 0 && hnsw_m > 0; }
  // Neither lists nor graph (Flat, SQ, PQ): stage 1 scans every vector.
  bool flat() const { return ivf_lists == 0 && hnsw_m <= 0; }
};

// Checks `factory` (already defaulted) against the grammar above for a
// collection of this spec; fills *shape when not null.
Status CheckFactoryString(const CollectionSpec& spec, const std::string& factory,
                          FactoryShape* shape);

// The largest magnitude a value of a coarse vector may have so that what an
// index of this shape stores stays finite; +inf (any finite value) unless it
// stores half floats (SQfp16). FAISS encodes a half beyond 65504 as an
// infinity, and nothing downstream notices: the item's coarse distances are
// infinite or NaN and it is never a candidate. A flat or HNSW store encodes
// the value itself: 65504. An IVF encodes the residual, the value less its
// list's centroid: the limit is then kFloat16ResidualLimit (factory_rules.cc
// says why), which bounds the residual whatever list the item joins, even
// before the index is trained (when no centroid exists to check against).
float CoarseValueLimit(const FactoryShape& shape);

// The dimension of the vectors the coarse index holds: D for points, D + 1
// for gaussian/mog ([mu, sqrt(tr S)]), d * (k rounded up to a power of two)
// for codes (the flattened one-hot code).
int CoarseDimension(const CollectionSpec& spec);

}  // namespace index
}  // namespace hedgedb
