// Embeddings in and out: borrowed batch buffers, their variance forms,
// ingest batches and results, stored records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hedgedb/export.h"
#include "hedgedb/kinds.h"
#include "hedgedb/status.h"

namespace hedgedb {

// How a batch gives its diagonal variances; all are converted to variances
// once, on input (ToVariance):
//   var       sigma^2 (what the engine stores)
//   std       sigma > 0
//   log_var   log sigma^2 (PFE's log_sigma_sq)
//   log_std   log sigma (PCME++)
enum class VarianceForm { kVar, kStd, kLogVar, kLogStd };
HEDGEDB_EXPORT const char* VarianceFormName(VarianceForm form);  // "var", "std", ...
HEDGEDB_EXPORT bool ParseVarianceForm(const std::string& name, VarianceForm* form);
// Writes the variances of `items` x `per_item` values of `form` to `out`
// (which may be `in`). InvalidArgument naming the form, item and value when
// a value is not finite, a std is not > 0, or the variance leaves float's
// range (0 or infinite): the batch is then refused, nothing half-converted
// is kept by the callers.
HEDGEDB_EXPORT Status ToVariance(VarianceForm form, const float* in, int64_t items,
                                 int64_t per_item, float* out);

// A batch of embeddings as borrowed row-major float buffers. Which pointers are
// used depends on the kind; n is the number of rows.
//   point:    vec     n x D
//   gaussian: mean    n x D,      var n x D (every entry > 0)
//   mog:      mean    n x C x D,  var n x C x D, weights n x C (nullptr: uniform 1/C)
//   codes:    codes   n x d with symbols in [0, k)            (items)
//             logp    n x d x k natural-log probabilities      (queries)
struct EmbeddingView {
  int64_t n = 0;
  const float* vec = nullptr;
  const float* mean = nullptr;
  const float* var = nullptr;
  const float* weights = nullptr;
  const int32_t* codes = nullptr;
  const float* logp = nullptr;
};

// One ingest batch: written atomically (all or nothing). A batch of 0 items
// writes nothing and succeeds (the command line and Python alike).
struct IngestBatch {
  EmbeddingView data;
  // n ids, unique within the batch and new to the collection (unless
  // upsert). nullptr: ids continue after the largest id the collection has
  // ever held.
  const int64_t* ids = nullptr;
  // n labels, or nullptr for none.
  const int64_t* labels = nullptr;
  // With labels: n flags, 0 where item i has no label (labels[i] is then
  // ignored), so that one batch can mix labelled and unlabelled items;
  // nullptr: every item has its label.
  const uint8_t* has_labels = nullptr;
  // n payloads (opaque bytes, e.g. an image path or JSON), or nullptr for none.
  const std::string* payloads = nullptr;
  // Makes a retry idempotent: a batch whose token the collection has already
  // committed is not written again; Ingest returns the ids of the first write
  // (IngestResult::replayed). A token reused for a different batch is an
  // error. Empty: no token. At most 256 bytes.
  std::string token;
  // Replace the items whose ids exist (record, label and payload: an item
  // given no label or payload keeps none) and add the others, in the same
  // atomic batch: after a crash each id holds its old item or its new one,
  // never a mix and never nothing. Needs `ids`.
  bool upsert = false;
};

// What an Ingest did, beyond the ids.
struct IngestResult {
  // The token was seen before: nothing was written, the ids are the first
  // write's.
  bool replayed = false;
  // Collection sequence number of the batch (of the first write if replayed).
  uint64_t sequence = 0;
  // IngestBatch::upsert: how many of the ids existed and were replaced.
  int64_t replaced = 0;
  // Non-empty when the batch is durable but the coarse index could not take
  // it: searches of the collection then score every item exactly until the
  // index is rebuilt (on the next open). The reason, for the user.
  std::string index_warning;
};

// One stored item as returned by Get. Only the vectors of the collection's
// kind are filled.
struct Record {
  int64_t id = 0;
  bool found = false;
  bool has_label = false;
  int64_t label = 0;
  std::string payload;
  std::vector<float> vec;      // point: D
  std::vector<float> mean;     // gaussian: D; mog: C x D
  std::vector<float> var;      // gaussian: D; mog: C x D
  std::vector<float> weights;  // mog: C
  std::vector<int32_t> codes;  // codes: d
};

}  // namespace hedgedb
