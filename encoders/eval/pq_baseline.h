// Product quantization (Jegou et al. 2011) of point embeddings: the baseline
// DIMCO compares its codes with at an equal number of bits. FAISS's
// ProductQuantizer learns M sub-codebooks of 2^B centroids on training
// embeddings; gallery items are stored as M codes of B bits (M * B bits an
// item) and ranked by the asymmetric distance (ADC: the uncompressed query
// against the centroids its codes name), as a PQ index searches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "encoders/embedder.h"
#include "encoders/eval/metrics.h"
#include "hedgedb/status.h"

namespace hedgedb {
namespace encoders {

struct PqOptions {
  int subquantizers = 0;      // M; must divide the embedding dimension
  int bits = 8;               // B per sub-code, 1..16
  int64_t max_train = 20000;  // training embeddings used (the first ones)
  uint64_t seed = 0;          // k-means initialisation
};

// Reads "MxB" (e.g. "2x8": 2 sub-codes of 8 bits, 16 bits an item).
// InvalidArgument naming the text when it is not of that form or out of range.
Status ParsePqSpec(const std::string& text, PqOptions* options);

// Trains the quantizer on `train` (point embeddings), encodes `gallery` and
// ranks it for every probe by ADC, leaving the same index out (probes and
// gallery are the same items or twins). Errors: not point embeddings,
// dimensions that differ or that M does not divide, fewer training items
// than 2^B centroids, label count not matching.
Status PqRetrieval(const Embeddings& train, const Embeddings& probes, const Embeddings& gallery,
                   const std::vector<int64_t>& labels, const PqOptions& options,
                   RetrievalMetrics* metrics,
                   const RetrievalOptions& retrieval = RetrievalOptions());

}  // namespace encoders
}  // namespace hedgedb
