// The public scoring functions (hedgedb/score.h) over the internal scorers,
// with the collection's input checks (query/row_checks.h).
#include "hedgedb/score.h"

#include <limits>
#include <memory>

#include "common/row_layout.h"
#include "query/row_checks.h"
#include "query/scorer.h"

namespace hedgedb {
namespace {

// The params a search of a collection with `spec` uses for `options`
// (Searcher::Plan), checked.
Status ParamsFor(const CollectionSpec& spec, const ScoreOptions& options,
                 query::ScoreParams* params) {
  return query::ScoreParamsFor(spec, options.score, options.samples, options.has_seed, options.seed,
                               params);
}

// The item rows of `items`, packed as the collection's arena holds them.
std::vector<uint8_t> PackItems(const RowShape& shape, const EmbeddingView& items) {
  const size_t row_bytes = shape.item_row_bytes();
  std::vector<uint8_t> rows(size_t(items.n) * row_bytes);
  for (int64_t i = 0; i < items.n; ++i) PackItemRow(shape, items, i, rows.data() + i * row_bytes);
  return rows;
}

}  // namespace

Status ScoreMatrix(const CollectionSpec& spec, const EmbeddingView& queries,
                   const EmbeddingView& items, const ScoreOptions& options,
                   std::vector<float>* scores) {
  query::ScoreParams params;
  HEDGEDB_RETURN_IF_ERROR(ParamsFor(spec, options, &params));
  const RowShape shape = RowShapeOf(spec);
  HEDGEDB_RETURN_IF_ERROR(query::CheckQueryRows(shape, queries));
  HEDGEDB_RETURN_IF_ERROR(query::CheckItemRows(shape, items));
  const std::vector<uint8_t> rows = PackItems(shape, items);
  std::vector<int64_t> all(size_t(items.n));
  for (int64_t i = 0; i < items.n; ++i) all[size_t(i)] = i;
  const size_t qsize = shape.query_row_size();
  const size_t ni = size_t(items.n);
  scores->assign(size_t(queries.n) * ni, 0.0f);
  std::vector<Status> errors(size_t(queries.n));
#pragma omp parallel for schedule(dynamic) if (queries.n > 1)
  for (int64_t q = 0; q < queries.n; ++q) {
    std::vector<float> qrow(qsize);
    PackQueryRow(shape, queries, q, qrow.data());
    std::unique_ptr<query::PreparedQuery> prepared;
    errors[size_t(q)] = query::PrepareQuery(shape, params, qrow.data(), &prepared);
    if (!errors[size_t(q)].ok()) continue;
    prepared->ScoreRows(rows.data(), shape.item_row_bytes(), all.data(), ni,
                        scores->data() + size_t(q) * ni);
  }
  for (const Status& e : errors) HEDGEDB_RETURN_IF_ERROR(e);
  return Status::OK();
}

Status ItemUncertainties(const CollectionSpec& spec, const EmbeddingView& items,
                         const ScoreOptions& options, std::vector<float>* eta) {
  query::ScoreParams params;
  HEDGEDB_RETURN_IF_ERROR(ParamsFor(spec, options, &params));
  const RowShape shape = RowShapeOf(spec);
  HEDGEDB_RETURN_IF_ERROR(query::CheckItemRows(shape, items));
  if (spec.kind == Kind::kPoint || spec.kind == Kind::kCodes) {
    eta->assign(size_t(items.n), std::numeric_limits<float>::quiet_NaN());
    return Status::OK();
  }
  const std::vector<uint8_t> rows = PackItems(shape, items);
  std::vector<int64_t> all(size_t(items.n));
  for (int64_t i = 0; i < items.n; ++i) all[size_t(i)] = i;
  eta->assign(size_t(items.n), 0.0f);
  // One batched call: rows share SIMD lanes.
  query::UncertaintyRows(shape, params, rows.data(), shape.item_row_bytes(), all.data(), all.size(),
                         eta->data());
  return Status::OK();
}

}  // namespace hedgedb
