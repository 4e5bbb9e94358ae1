// `hedgedb generate`: synthetic uncertain embeddings with class structure, for
// demos and benchmarks.
//
// Generative model (all per dimension):
//   class centre      c_y ~ N(0, 1)
//   item difficulty   t = u^2, u ~ U(0, 1): most items are clean, a few are not
//                     (queries alike, or evenly spaced with --spread-queries)
//   clean embedding   x = c_y + N(0, within^2)
//   item mean         mu = (1 - t) x + t r, r ~ N(0, 0.5^2): a degraded input
//                     drifts towards an uninformative point near the origin
//   item variance     s2 = 0.02 * exp(3 t) * exp(0.3 N(0, 1)): 20x larger for
//                     the hardest items, so uncertainty predicts difficulty
//   mog               C components around mu, offset ~ N(0, s2), variances
//                     s2 * U(0.5, 1), random weights
//   codes             class prototype code p_y in {0..k-1}^d; each symbol
//                     keeps the prototype's value with probability 0.9 - 0.7 t
//   code queries      log-softmax tables over k, peaked at the class
//                     prototype's symbol (or, likewise, a random one)
// Random numbers come from std::mt19937_64 (its output is fixed by the C++
// standard) with our own uniform and Box-Muller transforms, so a seed gives
// the same files on every platform.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/random.h"
#include "hedgedb/npy.h"
#include "hedgedb/types.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"

namespace hedgedb {
namespace cli {
namespace {

constexpr double kWithinClassStd = 0.6;
constexpr double kDriftStd = 0.5;
constexpr double kBaseVariance = 0.02;
constexpr double kVarianceGrowth = 3.0;  // s2 grows by exp(3) from t = 0 to 1

class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1) from the top 53 bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - Uniform();  // (0, 1]: log is finite
    const double u2 = Uniform();
    double z0;
    BoxMuller(u1, u2, &z0, &spare_);
    has_spare_ = true;
    return z0;
  }
  int64_t Below(int64_t n) { return std::min<int64_t>(static_cast<int64_t>(Uniform() * n), n - 1); }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

struct GenerateArgs {
  std::string kind = "gaussian";
  int64_t n = 0;
  int dim = 0;
  int components = 4;
  int code_k = 16;
  int classes = 10;
  int64_t queries = 10;
  bool spread_queries = false;
  uint64_t seed = 0;
  std::string out;
};

// The arrays of one set (items or queries) of one kind.
struct Embeddings {
  std::vector<float> vec, mean, var, weights, logp;
  std::vector<uint8_t> codes;
  std::vector<int64_t> labels;
};

struct ClassModel {
  std::vector<double> centres;      // classes x D (vector kinds)
  std::vector<int64_t> prototypes;  // classes x d (codes)
};

// Difficulty t of row i of n: random like the items, or for --spread-queries
// evenly spaced from clean (0) to fully degraded (1). The uniform draw is made
// either way so that the rest of the stream does not depend on the choice.
double Difficulty(Random& rng, bool spread, int64_t i, int64_t n) {
  const double u = rng.Uniform();
  if (spread) return n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
  return u * u;
}

void GenerateVectors(const GenerateArgs& a, Kind kind, const ClassModel& model, int64_t n,
                     bool as_queries, Random& rng, Embeddings* e) {
  const size_t d = static_cast<size_t>(a.dim);
  const size_t c = static_cast<size_t>(a.components);
  std::vector<double> mu(d), s2(d);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = rng.Below(a.classes);
    e->labels.push_back(y);
    const double t = Difficulty(rng, as_queries && a.spread_queries, i, n);
    for (size_t j = 0; j < d; ++j) {
      const double clean = model.centres[y * d + j] + kWithinClassStd * rng.Normal();
      mu[j] = (1 - t) * clean + t * kDriftStd * rng.Normal();
      s2[j] = kBaseVariance * std::exp(kVarianceGrowth * t) * std::exp(0.3 * rng.Normal());
    }
    switch (kind) {
      case Kind::kPoint:
        e->vec.insert(e->vec.end(), mu.begin(), mu.end());
        break;
      case Kind::kGaussian:
        e->mean.insert(e->mean.end(), mu.begin(), mu.end());
        e->var.insert(e->var.end(), s2.begin(), s2.end());
        break;
      case Kind::kMog: {
        double total = 0;
        std::vector<double> w(c);
        for (size_t k = 0; k < c; ++k) total += (w[k] = 1.0 + rng.Uniform());
        for (size_t k = 0; k < c; ++k) e->weights.push_back(static_cast<float>(w[k] / total));
        for (size_t k = 0; k < c; ++k) {
          for (size_t j = 0; j < d; ++j) {
            e->mean.push_back(static_cast<float>(mu[j] + std::sqrt(s2[j]) * rng.Normal()));
          }
          for (size_t j = 0; j < d; ++j) {
            e->var.push_back(static_cast<float>(s2[j] * (0.5 + 0.5 * rng.Uniform())));
          }
        }
        break;
      }
      case Kind::kCodes:
        break;
    }
  }
}

void GenerateCodes(const GenerateArgs& a, const ClassModel& model, int64_t n, bool as_queries,
                   Random& rng, Embeddings* e) {
  const size_t d = static_cast<size_t>(a.dim);
  const int k = a.code_k;
  std::vector<double> logits(k);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = rng.Below(a.classes);
    e->labels.push_back(y);
    const double t = Difficulty(rng, as_queries && a.spread_queries, i, n);
    const double keep = 0.9 - 0.7 * t;
    for (size_t j = 0; j < d; ++j) {
      const int64_t symbol = rng.Uniform() < keep ? model.prototypes[y * d + j] : rng.Below(k);
      if (!as_queries) {
        e->codes.push_back(static_cast<uint8_t>(symbol));
        continue;
      }
      // A softmax peaked at `symbol`, less sharply for harder queries.
      double max_logit = -INFINITY;
      for (int s = 0; s < k; ++s) {
        logits[s] = 0.5 * rng.Normal() + (s == symbol ? 2.0 + 2.0 * (1 - t) : 0.0);
        max_logit = std::max(max_logit, logits[s]);
      }
      double sum = 0;
      for (int s = 0; s < k; ++s) sum += std::exp(logits[s] - max_logit);
      const double log_sum = max_logit + std::log(sum);
      for (int s = 0; s < k; ++s) e->logp.push_back(static_cast<float>(logits[s] - log_sum));
    }
  }
}

void WriteOrFail(const std::string& path, const NpyArray& array, nlohmann::json* files,
                 const std::string& role) {
  Check(WriteNpy(path, array));
  (*files)[role] = path;
}

// Writes the arrays of `e` as PREFIX<infix>.<name>.npy.
// Items: PREFIX.<name>.npy; queries: PREFIX.query.<name>.npy, except that code
// queries are PREFIX.logp.npy.
void WriteSet(const GenerateArgs& a, Kind kind, const Embeddings& e, int64_t n, bool is_query,
              nlohmann::json* files) {
  const int64_t d = a.dim, c = a.components;
  const std::string base = a.out + (is_query ? ".query" : "");
  const std::string role_prefix = is_query ? "query_" : "";
  switch (kind) {
    case Kind::kPoint:
      WriteOrFail(base + ".vec.npy", MakeNpy(e.vec, {n, d}), files, role_prefix + "vec");
      break;
    case Kind::kGaussian:
      WriteOrFail(base + ".mean.npy", MakeNpy(e.mean, {n, d}), files, role_prefix + "mean");
      WriteOrFail(base + ".var.npy", MakeNpy(e.var, {n, d}), files, role_prefix + "var");
      break;
    case Kind::kMog:
      WriteOrFail(base + ".mean.npy", MakeNpy(e.mean, {n, c, d}), files, role_prefix + "mean");
      WriteOrFail(base + ".var.npy", MakeNpy(e.var, {n, c, d}), files, role_prefix + "var");
      WriteOrFail(base + ".weights.npy", MakeNpy(e.weights, {n, c}), files,
                  role_prefix + "weights");
      break;
    case Kind::kCodes:
      if (is_query) {
        WriteOrFail(a.out + ".logp.npy", MakeNpy(e.logp, {n, d, a.code_k}), files, "logp");
      } else {
        WriteOrFail(base + ".codes.npy", MakeNpy(NpyType::kUInt8, e.codes.data(), {n, d}), files,
                    "codes");
      }
      break;
  }
  WriteOrFail(base + ".labels.npy", MakeNpy(e.labels, {n}), files, role_prefix + "labels");
}

void RunGenerate(const GenerateArgs& a) {
  Kind kind;
  if (!ParseKind(a.kind, &kind)) UsageError("unknown kind '" + a.kind + "'");
  if (kind == Kind::kCodes && a.queries < 1) {
    UsageError("codes: --queries must be at least 1 (the log-probability tables)");
  }
  const size_t d = static_cast<size_t>(a.dim);
  ClassModel model;
  // Independent streams for centres, items and queries, so that changing --n
  // does not change the class centres or the queries.
  Random centre_rng(StreamSeed(a.seed, 0));
  if (kind == Kind::kCodes) {
    model.prototypes.resize(a.classes * d);
    for (auto& p : model.prototypes) p = centre_rng.Below(a.code_k);
  } else {
    model.centres.resize(a.classes * d);
    for (auto& c : model.centres) c = centre_rng.Normal();
  }
  Random item_rng(StreamSeed(a.seed, 1));
  Random query_rng(StreamSeed(a.seed, 2));
  Embeddings items, queries;
  if (kind == Kind::kCodes) {
    GenerateCodes(a, model, a.n, /*as_queries=*/false, item_rng, &items);
    GenerateCodes(a, model, a.queries, /*as_queries=*/true, query_rng, &queries);
  } else {
    GenerateVectors(a, kind, model, a.n, /*as_queries=*/false, item_rng, &items);
    GenerateVectors(a, kind, model, a.queries, /*as_queries=*/true, query_rng, &queries);
  }

  nlohmann::json files;
  WriteSet(a, kind, items, a.n, /*is_query=*/false, &files);
  if (a.queries > 0) WriteSet(a, kind, queries, a.queries, /*is_query=*/true, &files);

  nlohmann::json out;
  out["kind"] = a.kind;
  out["n"] = a.n;
  out["queries"] = a.queries;
  out["dim"] = a.dim;
  if (kind == Kind::kMog) out["components"] = a.components;
  if (kind == Kind::kCodes) out["code_k"] = a.code_k;
  out["classes"] = a.classes;
  out["seed"] = a.seed;
  out["files"] = files;
  // Small query sets are listed inline so a demo can show whether results
  // come from the query's class without reading .npy files.
  if (a.queries > 0 && a.queries <= 100) out["query_labels"] = queries.labels;
  if (kind != Kind::kCodes) {
    // A match threshold between the typical same-class and different-class
    // distances of the means, for create --match-a 1 --match-b B.
    const double same = std::sqrt(2.0 * a.dim * kWithinClassStd * kWithinClassStd);
    const double different = std::sqrt(2.0 * a.dim * (1.0 + kWithinClassStd * kWithinClassStd));
    out["suggested_match_a"] = 1.0;
    out["suggested_match_b"] = std::round(0.5 * (same + different) * 100) / 100;
  }
  PrintJsonLine(out);
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Write synthetic embeddings with classes and varying uncertainty (.npy)");
  cmd->footer(
      "Files: PREFIX.vec (point), PREFIX.mean/.var (gaussian), PREFIX.mean/.var/.weights (mog), "
      "PREFIX.codes (codes), PREFIX.labels; queries from the same classes as "
      "PREFIX.query.vec/.mean/.var/.weights and PREFIX.query.labels, or for codes "
      "PREFIX.logp.npy (log-softmax tables) and PREFIX.query.labels. Same seed, same files.");
  cmd->add_option("--kind", args->kind, "Embedding kind")
      ->required()
      ->check(CLI::IsMember(std::vector<std::string>{"point", "gaussian", "mog", "codes"}));
  cmd->add_option("--n", args->n, "Number of items")->required()->check(Positive());
  cmd->add_option("--dim", args->dim, "D (vector kinds) or d (code length)")
      ->required()
      ->check(Positive());
  cmd->add_option("--components", args->components, "mog: components C")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--code-k", args->code_k, "codes: alphabet size k")
      ->capture_default_str()
      ->check(CLI::Range(2, 256));
  cmd->add_option("--classes", args->classes, "Number of classes Y")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--queries", args->queries, "Number of queries to write (0: none)")
      ->capture_default_str()
      ->check(NonNegative());
  cmd->add_flag("--spread-queries", args->spread_queries,
                "Space the queries' difficulty evenly from clean to fully degraded (for demos of "
                "uncertainty) instead of drawing it like the items'");
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_option("--out", args->out, "Output path prefix")->required();
  cmd->callback([args] { RunGenerate(*args); });
}

}  // namespace cli
}  // namespace hedgedb
