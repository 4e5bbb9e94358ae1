// Input checks of item and query rows, shared by the collection (ingest,
// search) and the public scoring functions (hedgedb/score.h), so that both
// accept exactly the same embeddings. The scorers trust rows that passed.
#pragma once

#include "common/row_layout.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace query {

// The sizes every row of `shape` needs: dim >= 1, components >= 1 (mog),
// code alphabet k in [2, 256] (codes).
Status CheckRowShape(const RowShape& shape);
// Items of a collection of `shape`: n >= 1; the kind's buffers present;
// finite means and vectors, variances > 0, mixture weights >= 0 summing to 1
// (within 1e-3), code symbols in [0, k); with a compact row format, means,
// vectors and variances that the format holds (row_checks.cc,
// CheckFormatRange). Errors name the item.
Status CheckItemRows(const RowShape& shape, const EmbeddingView& items);
// Queries: the same for vector kinds; codes queries are d x k tables of
// log-probabilities (entries <= 0, -inf allowed). Errors name the query.
Status CheckQueryRows(const RowShape& shape, const EmbeddingView& queries);

}  // namespace query
}  // namespace hedgedb
