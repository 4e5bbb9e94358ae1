// The training methods and the one table of what each of them is: its names,
// the embedding it produces, the batches it trains on, the score a search of
// its embeddings uses, its learned scalars, its loss and its defaults. Model
// files (model_file.cc), the trainer, the engine bridge, the embedder, the
// evaluation and the CLI read their per-method facts here rather than
// switching on Method each. Torch-free: the CLI's help texts include it.
#pragma once

#include <cstdint>
#include <string>

#include "hedgedb/types.h"

namespace hedgedb::encoders {

struct ClassBalancedOptions;  // encoders/data/batch_samplers.h

// Training method the weights came from. It fixes which loss was used and
// which head kind goes with it.
enum class Method {
  kSoftContrastive,  // point embeddings, HIB eq. 3
  kHib,              // gaussian or mog, HIB eq. 8 (VIB)
  kSpe,              // gaussian, stochastic prototype embedding
  kProtoNet,         // point, prototypical network
  kDimco,            // codes, DIMCO eq. 10
  kFStatistic,       // point, F-statistic loss
  kContrastive,      // point embeddings, the margin contrastive loss (HIB eq. 1)
};

// The batches a method trains on (encoders/data/batch_samplers.h).
enum class BatchFamily {
  kPairs,          // HIB two-stream batches with matching/non-matching pairs
  kEpisodes,       // few-shot episodes: support and query items per class
  kClassBalanced,  // classes x items per class
};

// Where a model's soft-contrastive match parameters a, b come from.
enum class MatchParameters {
  kNone,     // the model has none (its scores need no a, b)
  kLearned,  // trained with the loss (softcon, hib)
  kFitted,   // fitted on validation pairs after training (spe)
};

struct MethodInfo {
  Method method;
  const char* name;   // what model files store and MethodName prints
  const char* alias;  // the older training-flag spelling (nullptr: none)
  const char* loss;   // the loss it minimises, for help texts
  // The embedding it produces; `mixtures`: components > 1 gives Kind::kMog.
  Kind kind;
  bool mixtures;
  // The score a search of its embeddings uses (engine_bridge.h: ModelScore).
  ScoreType score;
  MatchParameters match;
  // Its embeddings carry SPE's class spread sigma_eps^2 (added to the
  // variance when embedding; reported by model descriptions).
  bool sigma_eps2;
  BatchFamily family;
  // kClassBalanced: the paper's batch settings (batch_samplers.h).
  ClassBalancedOptions (*class_batches)(uint64_t seed);
  // Defaults ResolveTrainOptions fills in (0: none / the sampler's own).
  int64_t dim;        // D (not for codes)
  int64_t code_dims;  // d (codes)
  int64_t code_k;     // k (codes)
  int batch_size;
  double lr;
};

// The entry of `method`, nullptr for a value outside the enum.
const MethodInfo* FindMethodInfo(Method method);
// The entry of `method`; every Method has one (a value outside the enum gets
// the first row: callers that take a Method from outside check it with
// FindMethodInfo, ValidateSpec or ResolveTrainOptions first).
const MethodInfo& GetMethodInfo(Method method);
// The name model files store ("softcon", "hib", "spe", "protonet", "dimco",
// "fstat", "contrastive").
const char* MethodName(Method method);
// Accepts the stored names and the older training-flag aliases ("point" for
// softcon, "pn" for protonet), so old model files and old flags keep working.
bool ParseMethod(const std::string& name, Method* method);
// "softcon (point), hib, ..., dimco or fstat": the accepted names, for help
// texts and error messages.
std::string MethodNamesText();
// "softcon or point (soft contrastive, point), hib (...), ...": each method
// with its aliases, loss and embedding, for the train command's help.
std::string MethodHelpText();
// Whether `method` produces embeddings of `kind`.
bool MethodAllowsKind(Method method, Kind kind);

// How HIB's match term is estimated from the K x K sample pairs
// (TrainOptions::hib_likelihood, HibOptions::likelihood).
enum class HibLikelihood {
  // HIB eq. 8 (derived in appendix F): -E_{z1,z2}[log p(m = m^ | z1, z2)],
  // i.e. the soft-contrastive loss averaged over the K x K pairs.
  kExpectedLogLikelihood,
  // -log of the Monte Carlo match probability of eq. 5 (the quantity in
  // HIB Figure 2 and what the database scores with).
  kLogMonteCarloProbability,
};
// "expected" and "mc", the option's spellings.
const char* HibLikelihoodName(HibLikelihood likelihood);
bool ParseHibLikelihood(const std::string& name, HibLikelihood* likelihood);

}  // namespace hedgedb::encoders
