// Template fusion: several embeddings of one subject (e.g. several photos of
// one face) merged into one embedding of the same kind, which can be stored
// or searched with like any other.
#pragma once

#include <vector>

#include "hedgedb/export.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {

// Fuses the items.n rows of `items` (the item layout of spec's kind) into
// one: the normalised product of their densities, the fusion PFE uses for
// the images of one face. Per dimension, in double:
//   1 / var = sum_i 1 / var_i,    mean = var * sum_i mean_i / var_i
// so an item counts in proportion to its precision, and the fused variance
// is below every item's. n == 1 returns the item itself.
//   gaussian: *mean and *var get D values; *weights (optional) is cleared.
//   mog:      the product of n mixtures of C components is a mixture of C^n
//             components, which fits the collection only when C^n <= C:
//             n == 1, or C == 1 (then it is the gaussian product, weight 1).
//             Other cases are InvalidArgument. *mean and *var get C x D
//             values, *weights C (it must not be null).
//   point:    InvalidArgument: a vector has no variance to weigh it by.
//   codes:    InvalidArgument: a code is a discrete symbol per dimension,
//             with no density to multiply (a product of categorical tables
//             would be another operation, on query tables, not on codes).
// Rows are checked as DB::Ingest checks items (same errors; n == 0 is one).
// A fused value outside float's range (a variance that rounds to 0) is
// InvalidArgument. Only the kind and sizes (dim, components) of `spec` are
// used.
HEDGEDB_EXPORT Status FuseGaussians(const CollectionSpec& spec, const EmbeddingView& items,
                                    std::vector<float>* mean, std::vector<float>* var,
                                    std::vector<float>* weights = nullptr);

}  // namespace hedgedb
