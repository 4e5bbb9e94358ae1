// `hedgedb evaluate` without a model: recall@k, MAP@R, R-precision, KNN
// accuracy and the eta calibration of embeddings the user already has, from
// .npy files (every item queries the others, or separate queries) or from a
// collection (every labelled item queries the other labelled items).
// encoders::EvaluateEmbeddings does the work; this file parses the flags.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tools/cli_util.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hedgedb {
namespace encoders {
struct EvaluationProgress;
}  // namespace encoders
namespace cli {

struct EmbeddingEvaluateArgs {
  EmbeddingFiles items;
  EmbeddingFiles queries;  // --query-*: separate queries, no leave-one-out
  std::string labels;
  std::string query_labels;
  std::string kind;
  int dim = 0;
  int components = 1;
  int code_k = 0;
  float match_a = 1.0f;
  float match_b = 0.0f;
  std::string score;
  std::vector<int> recall_ks = {1, 2, 4, 8};
  int knn_k = 5;
  std::string db;
  std::string collection;
  bool read_only = false;
};

// Registers the flags of the embeddings and collection forms on `evaluate`
// (its --samples, --seed and --bins are shared with the model form).
void AddEmbeddingEvaluateFlags(CLI::App* cmd, EmbeddingEvaluateArgs* args);

// Whether the command line asks for the embeddings or collection form: any
// of its flags given. Usage error when it is mixed with --model or with a
// flag only the model form takes.
bool EmbeddingEvaluateRequested(const CLI::App& cmd);

// Prints the report (one JSON line). samples <= 0: the collection's (--db)
// or the kind's default; seed: used unless --db without --seed (the
// collection's seed); progress: evaluate's progress lines (or nullptr).
void RunEmbeddingEvaluate(const EmbeddingEvaluateArgs& args, const CLI::App& cmd, int samples,
                          uint64_t seed, int eta_bins,
                          const std::function<void(const encoders::EvaluationProgress&)>& progress);

}  // namespace cli
}  // namespace hedgedb
