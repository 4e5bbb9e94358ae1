// Image files in, collection items or top-k matches out: the pipeline behind
// `hedgedb ingest-images` and `hedgedb query-image`, callable from C++.
// Images are listed (image_set.h, benchmark_sets.h), decoded and fitted in
// batches, embedded with a model file (EncoderModel), and written to or
// searched in a hedgedb::DB collection that matches the model
// (engine_bridge.h). docs/images.md describes the behaviour in full.
//
// Error policy (IngestImagesOptions::skip_bad_images):
//   false (default)  every image is decoded and checked before anything is
//       written; one bad image fails the call, naming it, and the database is
//       left untouched (not even the collection or the database is created).
//   true  bad images are reported (ImageError) and the others ingested.
// Either way every batch is one atomic DB::Ingest, so the database never holds
// part of a batch.
//
// Torch-free header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "datasets/image_set.h"
#include "encoders/embedder.h"
#include "encoders/models/model_file.h"
#include "hedgedb/db.h"
#include "hedgedb/options.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace datasets {

// A model file loaded for image input.
struct ImageEncoder {
  std::unique_ptr<encoders::EncoderModel> model;
  encoders::ModelSpec spec;
  encoders::ModelCalibration calibration;  // the model file's map, if any
  std::string path;                        // names the model in messages
};

// Loads a model file and checks that its input is an image shape {1|3, H, W}.
// Errors name the file.
Status LoadImageEncoder(const std::string& path, ImageEncoder* encoder);

// Progress of a long pass: `stage` is "checking" (the abort policy's first
// pass), "ingest" or "query"; `done` of `total` images.
using ImageProgressFn = std::function<void(const char* stage, int64_t done, int64_t total)>;

// Options shared by both pipelines.
struct ImageBatchOptions {
  // How images that differ from the model's input size or channels are
  // fitted (image_set.h); kExact makes them errors.
  ImageFit fit = ImageFit::kExact;
  // Crop entries with an annotated box (CUB/Cars) to it before fitting.
  bool crop_to_box = false;
  // Images decoded, embedded (and ingested) per batch; >= 1.
  int64_t batch_size = 256;
  // false: a bad image fails the call; true: it is skipped (and listed in
  // the result) and the others are used.
  bool skip_bad_images = false;
  // Called for every bad image found, skipped or not (optional): e.g. to
  // list them all when the first one fails the call.
  std::function<void(const ImageError&)> on_bad_image;
  // Called after every batch (optional).
  ImageProgressFn progress;
};

// What ingest does with an image the collection already holds (the same
// path, and IDX index, in a stored item's payload): re-running an ingest must
// not duplicate the gallery.
enum class ExistingImages {
  kSkip,    // leave it, ingest the new ones
  kRefuse,  // fail, naming it; nothing is written
  kAdd,     // ingest it again under a new id
};
const char* ExistingImagesName(ExistingImages policy);
bool ParseExistingImages(const std::string& name, ExistingImages* policy);

struct IngestImagesOptions : ImageBatchOptions {
  // Opening the database: a missing database is created (with these options)
  // only once there is a batch to write.
  Options db_options;
  // FAISS factory string of a new collection; empty: the kind's default.
  std::string index_factory;
  ExistingImages existing = ExistingImages::kSkip;
  // CollectionSpec::metadata of a new collection (an existing one keeps
  // its): empty or a JSON object, to which the model file is added
  // (RecordModelInMetadata), so that another model's images are refused.
  std::string metadata;
};

struct IngestImagesResult {
  bool created = false;  // the collection was created by this call
  // The collection has a calibration map after the call, so searches report
  // prob: a created collection took the model's map; a collection that
  // existed keeps its own calibration, if any. When the model has a map that
  // could not be stored, `calibration_note` says why and ingesting goes on.
  bool calibrated = false;
  std::string calibration_note;
  int64_t images = 0;  // images in the source
  int64_t ingested = 0;
  int64_t first_id = -1, last_id = -1;  // -1: nothing ingested
  int64_t batches = 0;
  std::vector<ImageError> skipped;  // with skip_bad_images
  int64_t already_present = 0;      // images the collection held (kSkip)
};

// Embeds every image of `source` and ingests it into `collection` of the
// database at `db_path`, creating the collection from the model if it does
// not exist (an existing one must match the model: CheckCollectionFitsModel,
// and hold no other model's embeddings: CheckCollectionModel);
// a created collection starts with the model's calibration map, if it has one.
// Labels come from the entries (only when all of a batch have one); every
// item's payload is ImageEntry::Payload(). Images the collection already
// holds follow options.existing. Fails when no image could be used (unless
// all were present already).
// On a failure after some batches were written, *result says what was
// ingested and the message names the batch that was not.
Status IngestImages(const std::string& db_path, const std::string& collection,
                    const ImageEncoder& encoder, const ImageSource& source,
                    const IngestImagesOptions& options, IngestImagesResult* result);

struct QueryImagesOptions : ImageBatchOptions {
  // k, score and the other search settings; with_payload is always set (the
  // answers carry the image paths).
  SearchOptions search;
  // Drop hits whose payload names the query's own image (leave-one-out
  // queries of images already in the collection); k results remain.
  bool exclude_self = false;
};

// One query image's answer, in source order. For a skipped image `error` is
// set and `result` is empty.
struct ImageAnswer {
  int64_t query = 0;  // index into ImageSource::entries
  const ImageEntry* image = nullptr;
  SearchResult result;
  const ImageError* error = nullptr;
};
using ImageAnswerFn = std::function<void(const ImageAnswer&)>;

struct QueryImagesResult {
  ScoreType score = ScoreType::kDefault;  // the score the search used (ResolveScore)
  int64_t queries = 0;                    // answered
  int64_t skipped = 0;
  int64_t labelled = 0;          // answered queries with a label
  int64_t with_uncertainty = 0;  // answered queries with an eta
  double mean_query_uncertainty = 0;
  // Recall@m of the labelled queries for m = 1, 2, 4, ... < k and k: a query
  // counts at m if one of its first m results has its label.
  std::vector<int> recall_ks;
  std::vector<double> recall_at_k;
};

// Embeds the images of `source` and searches `collection` (which must match
// the model and hold its embeddings, as for IngestImages) for each; `answer`
// (optional) gets every answer and skipped image in source order as soon as
// its batch is done. Fails when no image could be used.
Status QueryImages(DB& db, const std::string& collection, const ImageEncoder& encoder,
                   const ImageSource& source, const QueryImagesOptions& options,
                   const ImageAnswerFn& answer, QueryImagesResult* result);

// The recall cut-offs reported for k results: 1, 2, 4, ... below k, then k.
std::vector<int> RecallCutoffs(int k);

}  // namespace datasets
}  // namespace hedgedb
