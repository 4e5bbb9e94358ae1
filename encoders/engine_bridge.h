// The engine bridge: how a trained model's embeddings are stored and scored by
// the core library. Every rule that ties a model file (ModelSpec) to a
// collection lives here, so the CLI, the image pipeline and the evaluation
// agree:
//   - the collection kind and sizes (dim, components, code_k) of a model;
//   - the match parameters a, b: learned only by soft-contrastive and HIB
//     training; every other method scores with a = 1, b = 0;
//   - the score a model's embeddings are compared with.
// Torch-free: only model_file.h and the public hedgedb types.
#pragma once

#include <string>

#include "encoders/models/model_file.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace encoders {

// True for the methods whose training learns the soft-contrastive match
// parameters a, b (softcon and HIB). Other methods' a, b are not trained.
bool LearnsMatchParameters(Method method);
// True for the methods whose model file's a, b are used: the learned ones,
// and SPE's, fitted after training on validation pairs (encoders/train,
// FitMatchParameters) so that its eta is on HIB's scale.
bool HasMatchParameters(Method method);

// The match a and b the model's embeddings are scored with: the model's
// (HasMatchParameters), else 1 and 0.
float MatchA(const ModelSpec& model);
float MatchB(const ModelSpec& model);

// The score a model's embeddings are searched with, per its training, and
// the one its calibration map is fitted for; it is also the default score of
// the collection kind, so a collection of the model needs no --score:
//   point (softcon, protonet, fstat,  match, sigmoid(-a ||z1 - z2|| + b) with the
//   contrastive)                      model's a, b (1, 0 for the last three)
//   hib (gaussian, mog)               mc, the Monte Carlo match probability
//   spe                               mls, the mutual likelihood score
//   dimco (codes)                     logprob
ScoreType ModelScore(const ModelSpec& model);

// The score `evaluate` ranks with: ModelScore, except l2 for points. Both
// rank alike (the database breaks float ties of match by the exact distance,
// PreparedQuery::TieBreakKeys); l2 keeps that order in a float matrix too.
ScoreType RankingScore(const ModelSpec& model);

// Samples per side a mixture needs by default: the engine's 8, rounded up to
// a multiple of the component count (stratified mixture sampling).
int DefaultSamplesFor(const ModelSpec& model);

// The collection that stores a model's embeddings: kind, dim (D, or d for
// codes), components, code_k, match a/b (MatchA/MatchB) and default samples.
// Other fields keep CollectionSpec's defaults.
CollectionSpec CollectionSpecForModel(const ModelSpec& model, const std::string& name);

// OK if the existing collection `have` stores what the model produces (same
// kind and sizes, and for non-codes kinds the same match a/b); otherwise
// InvalidArgument naming both, e.g. "collection 'c' (gaussian dim 2 match-a 3
// match-b 1) does not match model 'm.model' (point dim 4 ...): ...".
Status CheckCollectionFitsModel(const CollectionSpec& have, const ModelSpec& model,
                                const std::string& model_name);

// "gaussian dim 2 match-a 3.5 match-b 1": a collection's model-relevant
// fields, for messages.
std::string DescribeForModel(const CollectionSpec& spec);

}  // namespace encoders
}  // namespace hedgedb
