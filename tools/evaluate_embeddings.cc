#include "tools/evaluate_embeddings.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "encoders/eval/evaluation.h"
#include "hedgedb/db.h"

namespace hedgedb {
namespace cli {
namespace {

using nlohmann::json;

constexpr const char* kEmbeddingFileFlags[] = {"vec",     "mean",    "var",    "std",
                                               "log-var", "log-std", "weights"};

// The flags only the embeddings and collection forms take.
std::set<std::string> EmbeddingFormFlags() {
  std::set<std::string> flags = {"--codes",   "--query-logp", "--labels",     "--query-labels",
                                 "--kind",    "--dim",        "--components", "--code-k",
                                 "--match-a", "--match-b",    "--score",      "--recall-k",
                                 "--knn-k",   "--db",         "--collection", "--read-only"};
  for (const char* name : kEmbeddingFileFlags) {
    flags.insert(std::string("--") + name);
    flags.insert(std::string("--query-") + name);
  }
  return flags;
}

// Flags both forms take.
const std::set<std::string>& SharedFlags() {
  static const std::set<std::string> flags = {"--samples", "--seed",        "--bins",
                                              "--help",    "--no-progress", "--progress-seconds"};
  return flags;
}

bool AnyQueryFile(const EmbeddingFiles& q) {
  return !(q.vec.empty() && q.mean.empty() && q.var.empty() && q.std.empty() && q.log_var.empty() &&
           q.log_std.empty() && q.weights.empty() && q.logp.empty());
}

// Embeddings of one kind held in memory: the labelled items of a collection.
struct CollectionItems {
  std::vector<float> vec, mean, var, weights;
  std::vector<int64_t> labels;
  int64_t unlabelled = 0;
  EmbeddingView View() const {
    EmbeddingView v;
    v.n = static_cast<int64_t>(labels.size());
    if (!vec.empty()) v.vec = vec.data();
    if (!mean.empty()) v.mean = mean.data();
    if (!var.empty()) v.var = var.data();
    if (!weights.empty()) v.weights = weights.data();
    return v;
  }
};

void ReadCollection(DB& db, const std::string& collection, CollectionItems* items) {
  std::vector<int64_t> ids;
  Check(db.ListIds(collection, &ids));
  constexpr size_t kChunk = 4096;  // records read per Get
  std::vector<Record> records;
  for (size_t begin = 0; begin < ids.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, ids.size() - begin);
    Check(db.Get(collection, ids.data() + begin, n, &records));
    for (const Record& r : records) {
      // An item removed between ListIds and Get is simply not evaluated.
      if (!r.found) continue;
      if (!r.has_label) {
        ++items->unlabelled;
        continue;
      }
      items->labels.push_back(r.label);
      items->vec.insert(items->vec.end(), r.vec.begin(), r.vec.end());
      items->mean.insert(items->mean.end(), r.mean.begin(), r.mean.end());
      items->var.insert(items->var.end(), r.var.begin(), r.var.end());
      items->weights.insert(items->weights.end(), r.weights.begin(), r.weights.end());
    }
  }
}

}  // namespace

void AddEmbeddingEvaluateFlags(CLI::App* cmd, EmbeddingEvaluateArgs* args) {
  const std::string group = "Embeddings without a model (instead of --model)";
  const auto add = [&](const std::string& name, auto& value, const std::string& help) {
    return cmd->add_option(name, value, help)->group(group);
  };
  AddEmbeddingOptions(cmd, &args->items, /*for_query=*/false);
  AddEmbeddingOptions(cmd, &args->queries, /*for_query=*/true, "query-");
  for (CLI::Option* option : cmd->get_options()) {
    const std::string name = option->get_name();
    if (EmbeddingFormFlags().count(name) != 0) option->group(group);
  }
  add("--labels", args->labels,
      "One integer label per item (.npy, any integer type); every item queries all the others "
      "(leave-one-out) unless --query-* files are given");
  add("--query-labels", args->query_labels,
      "One integer label per query (.npy); with --query-* files the queries rank every item, "
      "none left out");
  add("--kind", args->kind, "Embedding kind of the files: point, gaussian, mog or codes");
  add("--dim", args->dim, "D for point/gaussian/mog; d (code length) for codes");
  add("--components", args->components, "mog: mixture components C")->capture_default_str();
  add("--code-k", args->code_k, "codes: alphabet size k");
  add("--match-a", args->match_a,
      "Soft-contrastive a of the match and mc scores and of eta (as create --match-a). "
      "gaussian/mog without --match-a and --match-b: both fitted to the items' labelled pairs "
      "(as calibrate fits a collection's); with one of them, the other's default")
      ->capture_default_str();
  add("--match-b", args->match_b, "Soft-contrastive b (as create --match-b)")
      ->capture_default_str();
  add("--score", args->score,
      "Ranking score: mc, csd, mls, l2, match or logprob (default: l2 for point, else the "
      "kind's search default: mc for gaussian/mog, logprob for codes)");
  add("--recall-k", args->recall_ks, "Cut-offs of recall@k (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  add("--knn-k", args->knn_k, "K of the KNN accuracy (majority of the K nearest)")
      ->capture_default_str();
  add("--db", args->db,
      "Database directory: evaluate the labelled items of --collection, each querying the "
      "others with the collection's spec");
  add("--collection", args->collection, "Collection of --db");
  cmd->add_flag("--read-only", args->read_only, "--db: open the database read-only")->group(group);
}

bool EmbeddingEvaluateRequested(const CLI::App& cmd) {
  const std::set<std::string> embedding_flags = EmbeddingFormFlags();
  std::string embedding_flag, model_flag;
  for (const CLI::Option* option : cmd.get_options()) {
    if (option->count() == 0) continue;
    const std::string name = option->get_name();
    if (SharedFlags().count(name) != 0) continue;
    std::string& slot = embedding_flags.count(name) != 0 ? embedding_flag : model_flag;
    if (slot.empty()) slot = name;
  }
  if (embedding_flag.empty()) return false;
  if (!model_flag.empty()) {
    UsageError(model_flag + " and " + embedding_flag +
               " do not go together: evaluate takes either --model (with the data flags) or "
               "embeddings (--labels with the embedding files, or --db with --collection)");
  }
  return true;
}

void RunEmbeddingEvaluate(const EmbeddingEvaluateArgs& args, const CLI::App& cmd, int samples,
                          uint64_t seed, int eta_bins,
                          const encoders::EvaluationProgressFn& progress) {
  for (const int k : args.recall_ks) {
    if (k < 1) UsageError("--recall-k: every k must be >= 1, got " + std::to_string(k));
  }
  if (args.knn_k < 1) UsageError("--knn-k must be >= 1, got " + std::to_string(args.knn_k));
  if (eta_bins < 2) UsageError("--bins must be >= 2, got " + std::to_string(eta_bins));
  encoders::EmbeddingEvaluationOptions options;
  options.progress = progress;
  options.eta_bins = eta_bins;
  options.retrieval.recall_ks = args.recall_ks;
  options.retrieval.knn_k = args.knn_k;
  options.score.samples = samples;
  const bool from_db = !args.db.empty() || !args.collection.empty();
  // A collection's own seed unless --seed is given (as search does).
  options.score.has_seed = !from_db || cmd.count("--seed") != 0;
  options.score.seed = seed;

  CollectionSpec spec;
  json report = json::object();
  std::vector<int64_t> item_labels, query_labels;
  LoadedEmbeddings items, queries;
  CollectionItems stored;
  EmbeddingView item_view, query_view;
  if (from_db) {
    if (args.db.empty() || args.collection.empty()) {
      UsageError("evaluate --db DIR --collection NAME: both are needed");
    }
    for (const char* flag : {"--labels", "--query-labels", "--kind", "--dim", "--components",
                             "--code-k", "--match-a", "--match-b", "--vec", "--mean", "--var",
                             "--std", "--log-var", "--log-std", "--weights", "--codes"}) {
      if (cmd.count(flag) != 0) {
        UsageError(std::string(flag) +
                   " does not go with --db: the collection gives the embeddings, labels and spec");
      }
    }
    if (AnyQueryFile(args.queries)) {
      UsageError("--query-* files do not go with --db: every labelled item queries the others");
    }
    std::unique_ptr<DB> db =
        OpenDatabase(args.db, false, args.read_only ? Access::kReadOnly : Access::kRead);
    spec = DescribeOrFail(*db, args.collection);
    if (spec.kind == Kind::kCodes) {
      Fail("collection '" + args.collection +
           "' holds codes, whose queries are log-probability tables the collection does not "
           "store: evaluate its codes with --codes/--labels and the tables with "
           "--query-logp/--query-labels");
    }
    ReadCollection(*db, args.collection, &stored);
    item_labels = stored.labels;
    item_view = stored.View();
    query_view = item_view;
    query_labels = item_labels;
    options.retrieval.exclude_same_index = true;
    report["collection"] = args.collection;
    report["unlabelled_items_skipped"] = stored.unlabelled;
    if (item_view.n < 2) {
      Fail("collection '" + args.collection + "' has " + std::to_string(item_view.n) +
           " labelled items: evaluation needs at least 2");
    }
  } else {
    if (args.kind.empty()) UsageError("--kind is required with embedding files");
    if (!ParseKind(args.kind, &spec.kind)) {
      UsageError("--kind: unknown kind '" + args.kind + "' (point, gaussian, mog or codes)");
    }
    if (args.dim < 1) UsageError("--dim is required: D (d for codes), at least 1");
    if (args.labels.empty()) UsageError("--labels is required: one integer label per item (.npy)");
    spec.dim = args.dim;
    spec.components = args.components;
    spec.code_k = args.code_k;
    spec.match_a = args.match_a;
    spec.match_b = args.match_b;
    // Without either, gaussian and mog get theirs from the labels, as
    // calibrate gives a collection whose defaults cannot express a match.
    options.fit_match_parameters = cmd.count("--match-a") == 0 && cmd.count("--match-b") == 0;
    spec.samples = DefaultSamples(spec.kind == Kind::kMog ? args.components : 1);
    items.Load(args.items, spec, /*for_query=*/false);
    item_labels = ReadIntVector(args.labels, "labels", items.rows());
    item_view = items.view();
    if (AnyQueryFile(args.queries)) {
      if (args.query_labels.empty()) {
        UsageError("--query-labels is required with --query-* files: one label per query");
      }
      queries.Load(args.queries, spec, /*for_query=*/true);
      query_labels = ReadIntVector(args.query_labels, "query labels", queries.rows());
      query_view = queries.view();
      options.retrieval.exclude_same_index = false;
    } else {
      if (!args.query_labels.empty()) {
        UsageError("--query-labels needs the queries' files (--query-vec, --query-mean, ...)");
      }
      if (spec.kind == Kind::kCodes) {
        UsageError(
            "codes are queried with log-probability tables: give them with --query-logp and "
            "--query-labels (the items are --codes)");
      }
      query_view = item_view;
      query_labels = item_labels;
      options.retrieval.exclude_same_index = true;
    }
  }
  // Point embeddings rank by l2 by default: the match probability is a
  // monotone function of it that saturates (ties) far from the query.
  if (args.score.empty()) {
    options.score.score = spec.kind == Kind::kPoint ? ScoreType::kL2 : ScoreType::kDefault;
  } else if (!ParseScore(args.score, &options.score.score)) {
    UsageError("--score: unknown score '" + args.score +
               "' (mc, csd, mls, l2, match, logprob or default)");
  }
  json out;
  Check(encoders::EvaluateEmbeddings(spec, query_view, item_view, query_labels, item_labels,
                                     options, &out));
  out.update(report);
  PrintJsonLine(out);
}

}  // namespace cli
}  // namespace hedgedb
