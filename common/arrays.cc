#include "hedgedb/arrays.h"

#include "hedgedb/npy.h"

namespace hedgedb {
namespace {

struct Role {
  const char* name;
  EmbeddingArray EmbeddingArrays::*array;
  bool required;
};

// The arrays of each kind (include/hedgedb/arrays.h), in the order a batch
// gives them.
std::vector<Role> RolesOf(Kind kind, bool queries) {
  using A = EmbeddingArrays;
  switch (kind) {
    case Kind::kPoint:
      return {{"vec", &A::vec, true}};
    case Kind::kGaussian:
      return {{"mean", &A::mean, true}, {"var", &A::var, true}};
    case Kind::kMog:
      return {{"mean", &A::mean, true}, {"var", &A::var, true}, {"weights", &A::weights, false}};
    case Kind::kCodes:
      if (queries) return {{"logp", &A::logp, true}};
      return {{"codes", &A::codes, true}};
  }
  return {};
}

// "(gaussian items take mean and var)", "(mog queries take mean, var and
// optionally weights)".
std::string TakesText(Kind kind, bool queries) {
  std::vector<std::string> names;
  for (const Role& role : RolesOf(kind, queries)) {
    names.push_back(role.required ? role.name : std::string("optionally ") + role.name);
  }
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  return std::string("(") + KindName(kind) + (queries ? " queries take " : " items take ") + list +
         ")";
}

// "(n, 3, 4)" or "(10, 3, 4)": a shape whose rows are `n` (< 0: any).
std::string ExpectedText(int64_t n, const std::vector<int64_t>& row_shape) {
  std::string text = n < 0 ? "(n" : "(" + std::to_string(n);
  for (int64_t d : row_shape) text += ", " + std::to_string(d);
  return text + ")";
}

// Checks `a` against (n, row_shape...); the first array sets *n.
Status CheckRows(const EmbeddingArray& a, const std::vector<int64_t>& row_shape, int64_t* n) {
  bool ok = a.shape.size() == row_shape.size() + 1 && (*n < 0 || a.shape[0] == *n);
  for (size_t i = 0; ok && i < row_shape.size(); ++i) ok = a.shape[i + 1] == row_shape[i];
  if (!ok) {
    return Status::InvalidArgument(a.name + ": expected shape " + ExpectedText(*n, row_shape) +
                                   ", got " + NpyShapeString(a.shape));
  }
  *n = a.shape[0];
  return Status::OK();
}

}  // namespace

Status CheckEmbeddingArraysGiven(Kind kind, bool queries, const EmbeddingArrays& arrays,
                                 const std::string& subject) {
  const std::vector<Role> roles = RolesOf(kind, queries);
  using A = EmbeddingArrays;
  // An array that does not belong is named before a missing one: it is
  // usually the one given in the missing one's place (logp for codes).
  for (EmbeddingArray A::*member : {&A::vec, &A::mean, &A::var, &A::weights, &A::codes, &A::logp}) {
    const EmbeddingArray& a = arrays.*member;
    bool taken = false;
    for (const Role& role : roles) taken = taken || role.array == member;
    if (a.given && !taken) {
      return Status::InvalidArgument(a.name + " does not apply to " + subject + " " +
                                     TakesText(kind, queries));
    }
  }
  for (const Role& role : roles) {
    const EmbeddingArray& a = arrays.*role.array;
    if (!a.given && role.required) {
      return Status::InvalidArgument(a.name + " is missing for " + subject + " " +
                                     TakesText(kind, queries));
    }
  }
  return Status::OK();
}

Status EmbeddingViewFromArrays(const CollectionSpec& spec, bool queries,
                               const EmbeddingArrays& arrays, const std::string& subject,
                               std::vector<float>* converted_var, EmbeddingView* view) {
  HEDGEDB_RETURN_IF_ERROR(CheckEmbeddingArraysGiven(spec.kind, queries, arrays, subject));
  const int64_t d = spec.dim, c = spec.components;
  // Rows of mean and var: (D) for gaussian, (C, D) for mog.
  const std::vector<int64_t> rows =
      spec.kind == Kind::kMog ? std::vector<int64_t>{c, d} : std::vector<int64_t>{d};
  EmbeddingView v;
  int64_t n = -1;
  switch (spec.kind) {
    case Kind::kPoint:
      HEDGEDB_RETURN_IF_ERROR(CheckRows(arrays.vec, {d}, &n));
      v.vec = arrays.vec.floats;
      break;
    case Kind::kGaussian:
    case Kind::kMog:
      HEDGEDB_RETURN_IF_ERROR(CheckRows(arrays.mean, rows, &n));
      HEDGEDB_RETURN_IF_ERROR(CheckRows(arrays.var, rows, &n));
      v.mean = arrays.mean.floats;
      v.var = arrays.var.floats;
      if (arrays.var_form != VarianceForm::kVar) {
        const int64_t per_item = spec.kind == Kind::kMog ? c * d : d;
        converted_var->resize(size_t(n * per_item));
        const Status s =
            ToVariance(arrays.var_form, arrays.var.floats, n, per_item, converted_var->data());
        if (!s.ok()) return Status::InvalidArgument(arrays.var.name + ": " + s.message());
        v.var = converted_var->data();
      }
      if (spec.kind == Kind::kMog && arrays.weights.given) {
        HEDGEDB_RETURN_IF_ERROR(CheckRows(arrays.weights, {c}, &n));
        v.weights = arrays.weights.floats;
      }
      break;
    case Kind::kCodes:
      if (queries) {
        HEDGEDB_RETURN_IF_ERROR(CheckRows(arrays.logp, {d, spec.code_k}, &n));
        v.logp = arrays.logp.floats;
      } else {
        HEDGEDB_RETURN_IF_ERROR(CheckRows(arrays.codes, {d}, &n));
        v.codes = arrays.codes.ints;
      }
      break;
  }
  v.n = n;
  *view = v;
  return Status::OK();
}

}  // namespace hedgedb
