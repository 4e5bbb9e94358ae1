// The engine bridge: how a trained model's embeddings are stored and scored by
// the core library. Every rule that ties a model file (ModelSpec) to a
// collection lives here, so the CLI, the image pipeline and the evaluation
// agree:
//   - the collection kind and sizes (dim, components, code_k) of a model;
//   - the match parameters a, b: learned only by soft-contrastive and HIB
//     training; every other method scores with a = 1, b = 0;
//   - the score a model's embeddings are compared with;
//   - which model's embeddings a collection holds (CheckCollectionModel).
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
// (MethodInfo::score, encoders/models/methods.h; a valid spec's kind is
// always its method's, ValidateSpec).
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
// kind and sizes, and for non-codes kinds that record no model the same
// match a/b: calibrate may refit a recorded model's); otherwise
// InvalidArgument naming both, e.g. "collection 'c' (gaussian dim 2 match-a 3
// match-b 1) does not match model 'm.model' (point dim 4 ...): ...".
Status CheckCollectionFitsModel(const CollectionSpec& have, const ModelSpec& model,
                                const std::string& model_name);

// Embeddings of two models are not comparable, even of one kind and size:
// each model embeds into a space of its own. So a collection made from a
// model records the model file in its metadata (CollectionSpec::metadata, a
// JSON object) as
//   {"images": {"model": ABSOLUTE_PATH, "model_checksum": HEX, ...}}
// (the image pipeline keeps how it read the images beside them,
// datasets/image_pipeline.h). The checksum (ModelFileChecksum) identifies the
// model; the path names it in messages.
enum class ModelUse {
  kIngest,  // the model's embeddings are to join the collection
  kQuery,   // they are to query it
};

// `metadata` (a JSON object's text, or empty) with the model file
// `model_path` recorded as above, in *out. InvalidArgument when `metadata`
// is not a JSON object, or when its "images" entry is not an object.
Status RecordModelInMetadata(const std::string& metadata, const std::string& model_path,
                             std::string* out);

// OK when the model file `model_path` may be used with the collection `spec`
// as `use` says: the collection records no model (made by `create`, or
// before collections recorded one) or one with the same checksum. Otherwise
// InvalidArgument naming the collection, both models and checksums, e.g.
// "collection 'g' holds embeddings of another model (/m/a.hdbm, checksum
// 1a2b3c4d); 'b.hdbm' (checksum ...) embeds into another space, so its
// embeddings cannot join them: ...". The CLI, the image pipeline and the
// Python module all check with this.
Status CheckCollectionModel(const CollectionSpec& spec, const std::string& model_path,
                            ModelUse use);

// "gaussian dim 2 match-a 3.5 match-b 1": a collection's model-relevant
// fields, for messages.
std::string DescribeForModel(const CollectionSpec& spec);

}  // namespace encoders
}  // namespace hedgedb
