// Episodic few-shot accuracy, the protocol of SPE (and of prototypical
// networks): each episode draws `shots` support and `queries` query items
// from every class that has that many, builds one prototype per class from
// the support, and classifies every query among all the episode's classes.
// The three conditions of SPE's tables use the same draws: clean support and
// queries, corrupt support, corrupt queries.
//
// Classification rule per model:
//   spe:          SPE's prototypes (eq. 5: precision-weighted support means)
//                 and class posterior with the naive sampler, as the paper
//                 evaluates, through the training loss's own functions
//                 (losses.h: ComputeSpePrototypes, SpeLogPosterior);
//   point models: the prototypical network's rule, the nearest support mean
//                 in squared Euclidean distance.
// Other models (HIB, DIMCO) are refused: their papers classify otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "encoders/embedder.h"
#include "encoders/models/model_file.h"
#include "hedgedb/status.h"

namespace hedgedb {
namespace encoders {

struct EpisodicOptions {
  int64_t episodes = 100;
  int64_t shots = 5;    // support items per class
  int64_t queries = 5;  // query items per class
  int samples = 8;      // SPE: naive-sampler draws per query
  uint64_t seed = 0;
};

struct EpisodeAccuracy {
  double mean = 0;  // over episodes
  double sd = 0;    // over episodes (n - 1)
};

struct EpisodeResult {
  int64_t classes = 0;              // classes with shots + queries items (per episode)
  int64_t skipped_classes = 0;      // classes with fewer
  EpisodeAccuracy clean;            // clean support, clean queries
  EpisodeAccuracy corrupt_support;  // when corrupt twins are given
  EpisodeAccuracy corrupt_query;
};

// `clean` and `corrupt` are the same items (corrupt may be empty: n = 0);
// labels [clean.n]. Errors: a model kind without a rule (see above), fewer
// than 2 classes with enough items, options out of range.
Status EvaluateEpisodes(const ModelSpec& spec, const Embeddings& clean, const Embeddings& corrupt,
                        const std::vector<int64_t>& labels, const EpisodicOptions& options,
                        EpisodeResult* result);

// True when EvaluateEpisodes has a rule for the model.
bool HasEpisodeRule(const ModelSpec& spec);
// OK when it has; else the InvalidArgument EvaluateEpisodes returns, so that
// a caller can refuse the model before embedding anything.
Status RequireEpisodeRule(const ModelSpec& spec);

}  // namespace encoders
}  // namespace hedgedb
