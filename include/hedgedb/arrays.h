// Embeddings given as arrays (the command line's .npy files, the Python
// module's NumPy arguments) into the EmbeddingView the engine reads. Which
// arrays each kind takes, their shapes against the collection and the
// conversion of the variance forms are checked here once, so that both front
// ends accept and refuse the same batches with the same reasons; the front
// ends only read their arrays into float32 / int32 and name them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hedgedb/export.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {

// One array of a batch, already converted to float32 (vec, mean, var,
// weights, logp) or int32 (codes), C order.
struct EmbeddingArray {
  bool given = false;
  // How messages name the array: "mean", "queries['mean']",
  // "faces.mean.npy (--mean)". Also used for arrays not given (a missing one
  // is named), so set it for every array.
  std::string name;
  std::vector<int64_t> shape;
  const float* floats = nullptr;
  const int32_t* ints = nullptr;
};

// The arrays of one batch by role. The variances come in one of the forms of
// VarianceForm; `var` holds them in `var_form`.
struct EmbeddingArrays {
  EmbeddingArray vec, mean, var, weights, codes, logp;
  VarianceForm var_form = VarianceForm::kVar;
};

// The arrays items (`queries` false) or queries of `kind` take:
//   point     vec (n, D)
//   gaussian  mean (n, D), var (n, D)
//   mog       mean (n, C, D), var (n, C, D), weights (n, C) optional
//   codes     items: codes (n, d); queries: logp (n, d, k)
// An array the kind does not take, or a missing one, is InvalidArgument:
//   "<name> does not apply to <subject> (gaussian items take mean and var)"
//   "<name> is missing for <subject> (gaussian items take mean and var)"
// where `subject` says what the arrays are for ("the gaussian collection
// 'c'", "the items"). Reads only `given` and the names, so a front end can
// check its arguments before it reads any file.
HEDGEDB_EXPORT Status CheckEmbeddingArraysGiven(Kind kind, bool queries,
                                                const EmbeddingArrays& arrays,
                                                const std::string& subject);

// CheckEmbeddingArraysGiven, then each array's shape against `spec` (dim,
// components, code_k): the first array fixes n, the others must have the
// same rows. A wrong shape is InvalidArgument "<name>: expected shape (n, 4),
// got (5, 3)" (the first array; the later ones show n: "(5, 4)"). Variances
// in another form than var are converted (ToVariance) into *converted_var,
// which the view's var then points to; errors name the array. On success
// *view borrows the arrays (and *converted_var): they must outlive it.
HEDGEDB_EXPORT Status EmbeddingViewFromArrays(const CollectionSpec& spec, bool queries,
                                              const EmbeddingArrays& arrays,
                                              const std::string& subject,
                                              std::vector<float>* converted_var,
                                              EmbeddingView* view);

}  // namespace hedgedb
