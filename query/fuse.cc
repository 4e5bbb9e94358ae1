// Template fusion (hedgedb/fuse.h): the product of Gaussian densities, with
// the collection's input checks (query/row_checks.h).
#include "hedgedb/fuse.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "common/row_layout.h"
#include "query/row_checks.h"

namespace hedgedb {
namespace {

// Which kinds fuse, and why the others do not.
Status CheckFusable(const RowShape& shape, int64_t n, const std::vector<float>* weights) {
  switch (shape.kind) {
    case Kind::kGaussian:
      return Status::OK();
    case Kind::kPoint:
      return Status::InvalidArgument(
          "point embeddings cannot be fused: a vector has no variance to weigh it by (fusion "
          "multiplies Gaussian densities; it is defined for gaussian collections)");
    case Kind::kCodes:
      return Status::InvalidArgument(
          "codes cannot be fused: a DIMCO code is one discrete symbol per dimension, with no "
          "mean and variance to combine (multiplying categorical probability tables would be a "
          "different operation, and is not what fusion does)");
    case Kind::kMog:
      if (weights == nullptr) {
        return Status::InvalidArgument("fusing mog items needs the weights output");
      }
      if (n > 1 && shape.components > 1) {
        const std::string c = std::to_string(shape.components);
        return Status::InvalidArgument(
            "the product of " + std::to_string(n) + " mixtures of " + c +
            " components is a mixture of " + c + "^" + std::to_string(n) +
            " components, more than the " + c +
            " a mog item of this collection holds: mog items fuse only one at a time, or when "
            "the collection has 1 component");
      }
      return Status::OK();
  }
  return Status::OK();
}

}  // namespace

Status FuseGaussians(const CollectionSpec& spec, const EmbeddingView& items,
                     std::vector<float>* mean, std::vector<float>* var,
                     std::vector<float>* weights) {
  const RowShape shape = RowShapeOf(spec);
  HEDGEDB_RETURN_IF_ERROR(query::CheckRowShape(shape));
  HEDGEDB_RETURN_IF_ERROR(CheckFusable(shape, items.n, weights));
  HEDGEDB_RETURN_IF_ERROR(query::CheckItemRows(shape, items));
  const size_t per = shape.mixture_components() * size_t(shape.dim);
  if (items.n == 1) {
    // The item itself, as a collection stores it (mixture weights normalised).
    std::vector<float> row(shape.item_row_size());
    PackFloatRow(shape, items, 0, row.data());
    mean->assign(row.begin() + shape.mean_offset(), row.begin() + shape.mean_offset() + per);
    var->assign(row.begin() + shape.var_offset(), row.begin() + shape.var_offset() + per);
    if (shape.kind == Kind::kMog) {
      weights->assign(row.begin() + shape.weights_offset(),
                      row.begin() + shape.weights_offset() + per / size_t(shape.dim));
    } else if (weights != nullptr) {
      weights->clear();
    }
    return Status::OK();
  }
  // Gaussian, or mog with one component (its weight is 1 whatever was given).
  std::vector<double> precision(per, 0.0), weighted_sum(per, 0.0);
  for (size_t i = 0; i < size_t(items.n); ++i) {
    for (size_t j = 0; j < per; ++j) {
      const double p = 1.0 / double(items.var[i * per + j]);
      precision[j] += p;
      weighted_sum[j] += p * double(items.mean[i * per + j]);
    }
  }
  std::vector<float> fused_mean(per), fused_var(per);
  for (size_t j = 0; j < per; ++j) {
    const double v = 1.0 / precision[j];
    fused_var[j] = float(v);
    fused_mean[j] = float(v * weighted_sum[j]);
    // Precisions of tiny variances add up: the fused variance can round to 0.
    if (!(fused_var[j] > 0.0f) || !std::isfinite(fused_var[j]) || !std::isfinite(fused_mean[j])) {
      char text[160];
      std::snprintf(text, sizeof(text),
                    "the fused embedding leaves float's range at dimension %zu (mean %g, "
                    "variance %g)",
                    j, v * weighted_sum[j], v);
      return Status::InvalidArgument(text);
    }
  }
  *mean = std::move(fused_mean);
  *var = std::move(fused_var);
  if (shape.kind == Kind::kMog) {
    weights->assign(1, 1.0f);
  } else if (weights != nullptr) {
    weights->clear();
  }
  return Status::OK();
}

}  // namespace hedgedb
