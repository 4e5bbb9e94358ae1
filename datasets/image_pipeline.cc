#include "datasets/image_pipeline.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <utility>

#include "encoders/engine_bridge.h"
#include "encoders/eval/metrics.h"

namespace hedgedb {
namespace datasets {

using encoders::CheckCollectionFitsModel;
using encoders::CheckCollectionModel;
using encoders::CollectionSpecForModel;
using encoders::Embeddings;
using encoders::EncoderModel;
using encoders::ItemSet;
using encoders::ModelUse;
using encoders::RecallAtK;
using encoders::RecordModelInMetadata;

namespace {

namespace fs = std::filesystem;

ImageInputOptions InputOptions(const ImageEncoder& encoder, const ImageBatchOptions& options) {
  ImageInputOptions input;
  input.input_shape = encoder.spec.input_shape;
  input.fit = options.fit;
  input.crop_to_box = options.crop_to_box;
  return input;
}

Status CheckBatchOptions(const ImageEncoder& encoder, const ImageBatchOptions& options) {
  if (encoder.model == nullptr) return Status::InvalidArgument("no model loaded");
  if (options.batch_size < 1) return Status::InvalidArgument("batch size must be >= 1");
  return Status::OK();
}

void Report(const ImageBatchOptions& options, const char* stage, int64_t done, int64_t total) {
  if (options.progress) options.progress(stage, done, total);
}

// Embeds one decoded batch.
Status EmbedBatch(const ImageEncoder& encoder, const ImageSource& source,
                  const std::shared_ptr<const DecodedImages>& images, int64_t batch_size,
                  Embeddings* embeddings) {
  const ItemSet set = DecodedImageItemSet(images, source);
  std::vector<int64_t> items(set.size());
  for (int64_t i = 0; i < set.size(); ++i) items[i] = i;
  return encoder.model->Embed(set, items, /*corrupt=*/false, embeddings, batch_size);
}

// Whether the collection exists (*exists), after checking that it holds
// embeddings of this model: its kind and sizes, and the model it records.
Status FindCollection(DB& db, const std::string& collection, const ImageEncoder& encoder,
                      bool* exists) {
  std::vector<std::string> names;
  HEDGEDB_RETURN_IF_ERROR(db.ListCollections(&names));
  *exists = std::find(names.begin(), names.end(), collection) != names.end();
  if (!*exists) return Status::OK();
  CollectionSpec have;
  HEDGEDB_RETURN_IF_ERROR(db.DescribeCollection(collection, &have));
  HEDGEDB_RETURN_IF_ERROR(CheckCollectionModel(have, encoder.path, ModelUse::kIngest));
  return CheckCollectionFitsModel(have, encoder.spec, encoder.path);
}

Status OpenDb(const std::string& path, Options options, bool create, std::unique_ptr<DB>* db) {
  options.create_if_missing = create;
  // A database another process holds is reported as such by DB::Open.
  return DB::Open(options, path, db);
}

// The images of `source` that `collection` already holds, by entry (payloads
// that ImageEntry::Payload wrote: the same path and IDX index). *first_id is
// the stored id of the first one.
Status FindStoredImages(DB& db, const std::string& collection, const ImageSource& source,
                        std::vector<bool>* stored, int64_t* first_id) {
  std::vector<int64_t> ids;
  HEDGEDB_RETURN_IF_ERROR(db.ListIds(collection, &ids));
  std::unordered_map<std::string, int64_t> id_of;  // "path\nindex" -> id
  const auto key = [](const std::string& path, int64_t index) {
    return path + '\n' + std::to_string(index);
  };
  constexpr size_t kChunk = 4096;
  for (size_t first = 0; first < ids.size(); first += kChunk) {
    std::vector<Record> records;
    HEDGEDB_RETURN_IF_ERROR(
        db.Get(collection, ids.data() + first, std::min(kChunk, ids.size() - first), &records));
    for (const Record& r : records) {
      ImagePayload fields;
      if (r.found && ParseImagePayload(r.payload, &fields)) {
        id_of.emplace(key(fields.path, fields.index), r.id);
      }
    }
  }
  stored->assign(source.entries.size(), false);
  *first_id = -1;
  for (size_t i = 0; i < source.entries.size(); ++i) {
    const ImageEntry& e = source.entries[i];
    const auto it = id_of.find(key(e.path, e.idx_index));
    if (it == id_of.end()) continue;
    (*stored)[i] = true;
    if (*first_id < 0) *first_id = it->second;
  }
  return Status::OK();
}

// First pass of the abort policy: every image decoded and checked.
Status CheckAllImages(const ImageSource& source, const ImageInputOptions& input,
                      const ImageBatchOptions& options) {
  const int64_t total = source.size(), batch = options.batch_size;
  std::vector<ImageError> errors;
  for (int64_t first = 0; first < total; first += batch) {
    DecodedImages decoded;
    HEDGEDB_RETURN_IF_ERROR(
        DecodeImages(source, first, std::min(batch, total - first), input, &decoded));
    errors.insert(errors.end(), decoded.errors.begin(), decoded.errors.end());
    Report(options, "checking", std::min(total, first + batch), total);
  }
  if (errors.empty()) return Status::OK();
  if (options.on_bad_image) {
    for (const ImageError& e : errors) options.on_bad_image(e);
  }
  const bool all = static_cast<int64_t>(errors.size()) == total;
  const bool size_errors = input.fit == ImageFit::kExact &&
                           errors.front().message.find(kExactFitHint) != std::string::npos;
  // The hint must fit the case: when every image fails, skipping them leaves
  // nothing, and a fit problem wants another fit, not skip_bad_images.
  std::string hint = all ? (size_errors ? "no image can be used as it is: fit resize or fit "
                                          "crop fits images of other sizes to the model"
                                        : "no image can be used: check the source and the model")
                         : "skipping bad images (skip_bad_images) ingests the others";
  return Status::InvalidArgument(errors.front().message + " (" + std::to_string(errors.size()) +
                                 " of " + std::to_string(total) +
                                 " images cannot be used; nothing was ingested; " + hint + ")");
}

}  // namespace

Status LoadImageEncoder(const std::string& path, ImageEncoder* encoder) {
  ImageEncoder loaded;
  const Status s = EncoderModel::Load(path, &loaded.model);
  if (!s.ok()) {
    return Status::InvalidArgument("cannot load model '" + path + "': " + s.ToString());
  }
  loaded.spec = loaded.model->spec();
  loaded.calibration = loaded.model->calibration();
  loaded.path = path;
  const Status shape = CheckImageInputShape(loaded.spec.input_shape);
  if (!shape.ok()) return Status::InvalidArgument(path + ": " + shape.message());
  *encoder = std::move(loaded);
  return Status::OK();
}

std::vector<int> RecallCutoffs(int k) {
  std::vector<int> cutoffs;
  for (int64_t m = 1; m < k; m *= 2) cutoffs.push_back(static_cast<int>(m));
  cutoffs.push_back(k);
  return cutoffs;
}

const char* ExistingImagesName(ExistingImages policy) {
  switch (policy) {
    case ExistingImages::kSkip:
      return "skip";
    case ExistingImages::kRefuse:
      return "refuse";
    case ExistingImages::kAdd:
      break;
  }
  return "add";
}

bool ParseExistingImages(const std::string& name, ExistingImages* policy) {
  for (ExistingImages p : {ExistingImages::kSkip, ExistingImages::kRefuse, ExistingImages::kAdd}) {
    if (name == ExistingImagesName(p)) {
      *policy = p;
      return true;
    }
  }
  return false;
}

Status IngestImages(const std::string& db_path, const std::string& collection,
                    const ImageEncoder& encoder, const ImageSource& all_images,
                    const IngestImagesOptions& options, IngestImagesResult* result) {
  *result = IngestImagesResult();
  HEDGEDB_RETURN_IF_ERROR(CheckBatchOptions(encoder, options));
  const ImageInputOptions input = InputOptions(encoder, options);
  result->images = all_images.size();
  // A new collection records the model (CheckCollectionModel).
  std::string metadata;
  HEDGEDB_RETURN_IF_ERROR(RecordModelInMetadata(options.metadata, encoder.path, &metadata));

  // An existing database is opened (and its collection checked) before the
  // long work; a new one is only created once there is something to write.
  std::unique_ptr<DB> db;
  bool collection_exists = false;
  std::error_code ec;
  if (fs::is_directory(db_path, ec)) {
    HEDGEDB_RETURN_IF_ERROR(OpenDb(db_path, options.db_options, /*create=*/false, &db));
    HEDGEDB_RETURN_IF_ERROR(FindCollection(*db, collection, encoder, &collection_exists));
  }
  // Images the collection holds already: skipped, refused or added again.
  ImageSource new_images;
  std::vector<int64_t> original_entry;  // entry of new_images -> of all_images
  const ImageSource* images = &all_images;
  if (collection_exists && options.existing != ExistingImages::kAdd) {
    std::vector<bool> stored;
    int64_t first_id = -1;
    HEDGEDB_RETURN_IF_ERROR(FindStoredImages(*db, collection, all_images, &stored, &first_id));
    const int64_t present = std::count(stored.begin(), stored.end(), true);
    if (present > 0 && options.existing == ExistingImages::kRefuse) {
      const size_t first = std::find(stored.begin(), stored.end(), true) - stored.begin();
      return Status::InvalidArgument(
          std::to_string(present) + " of the " + std::to_string(all_images.size()) +
          " images are in collection '" + collection + "' already (the first: " +
          all_images.entries[first].Name() + ", id " + std::to_string(first_id) +
          "); nothing was ingested (existing skip ingests only the new ones, existing add "
          "adds them again)");
    }
    if (present > 0) {
      new_images.idx_images = all_images.idx_images;
      for (size_t i = 0; i < stored.size(); ++i) {
        if (stored[i]) continue;
        new_images.entries.push_back(all_images.entries[i]);
        original_entry.push_back(static_cast<int64_t>(i));
      }
      images = &new_images;
      result->already_present = present;
      if (new_images.entries.empty()) return Status::OK();  // nothing new
    }
  }
  const ImageSource& source = *images;
  const int64_t total = source.size(), batch = options.batch_size;
  if (!options.skip_bad_images) HEDGEDB_RETURN_IF_ERROR(CheckAllImages(source, input, options));

  const auto written_so_far = [result] {
    return std::to_string(result->ingested) + " images were ingested before " +
           (result->ingested > 0 ? "(ids " + std::to_string(result->first_id) + ".." +
                                       std::to_string(result->last_id) + ") "
                                 : std::string());
  };
  for (int64_t first = 0; first < total; first += batch) {
    auto decoded = std::make_shared<DecodedImages>();
    HEDGEDB_RETURN_IF_ERROR(
        DecodeImages(source, first, std::min(batch, total - first), input, decoded.get()));
    for (const ImageError& e : decoded->errors) {
      if (!options.skip_bad_images) {
        // Checked above, so the file changed since: earlier batches stay.
        return Status::IOError(e.message + " (the image changed during the run; " +
                               written_so_far() + "this batch; nothing of this batch was written)");
      }
      ImageError reported = e;  // entries count in all_images
      if (!original_entry.empty()) reported.entry = original_entry[e.entry];
      if (options.on_bad_image) options.on_bad_image(reported);
      result->skipped.push_back(reported);
    }
    if (decoded->size() > 0) {
      Embeddings embeddings;
      HEDGEDB_RETURN_IF_ERROR(EmbedBatch(encoder, source, decoded, batch, &embeddings));
      if (db == nullptr) {
        HEDGEDB_RETURN_IF_ERROR(OpenDb(db_path, options.db_options, /*create=*/true, &db));
        HEDGEDB_RETURN_IF_ERROR(FindCollection(*db, collection, encoder, &collection_exists));
      }
      if (!collection_exists) {
        CollectionSpec spec = CollectionSpecForModel(encoder.spec, collection);
        spec.index_factory = options.index_factory;
        spec.metadata = metadata;
        HEDGEDB_RETURN_IF_ERROR(db->CreateCollection(spec));
        collection_exists = result->created = true;
        if (!encoder.calibration.empty()) {
          // base rate 0 keeps the map's own (its validation pairs'); a
          // refused map leaves the collection uncalibrated, not the images
          // unwritten.
          const Status c = db->ImportCalibration(collection, encoder.calibration.map, 0);
          result->calibrated = c.ok();
          if (!c.ok()) {
            result->calibration_note =
                "the model's calibration map was not stored: " + c.ToString();
          }
        }
      }
      std::vector<int64_t> labels;
      std::vector<std::string> payloads;
      bool all_labelled = true;
      for (int64_t entry : decoded->entries) {
        const ImageEntry& e = source.entries[entry];
        all_labelled = all_labelled && e.has_label;
        labels.push_back(e.label);
        payloads.push_back(e.Payload());
      }
      IngestBatch ingest;
      ingest.data = embeddings.View();
      ingest.labels = all_labelled ? labels.data() : nullptr;
      ingest.payloads = payloads.data();
      std::vector<int64_t> ids;
      const Status s = db->Ingest(collection, ingest, &ids);
      if (!s.ok()) {
        return Status::IOError(s.ToString() + " (batch of images " +
                               source.entries[decoded->entries.front()].Name() + " .. " +
                               source.entries[decoded->entries.back()].Name() + " not written; " +
                               written_so_far() + "it)");
      }
      if (result->first_id < 0 && !ids.empty()) result->first_id = ids.front();
      if (!ids.empty()) result->last_id = ids.back();
      result->ingested += static_cast<int64_t>(ids.size());
      ++result->batches;
    }
    Report(options, "ingest", std::min(total, first + batch), total);
  }
  if (db != nullptr && !result->created) {
    CollectionStats stats;
    result->calibrated = db->GetStats(collection, &stats).ok() && !stats.calibrations.empty();
  }
  // Nothing new that could be used is no error when the rest was stored.
  if (result->ingested == 0 && result->already_present == 0) {
    return Status::InvalidArgument("none of the " + std::to_string(total) +
                                   " images could be used; nothing was ingested");
  }
  return Status::OK();
}

Status QueryImages(DB& db, const std::string& collection, const ImageEncoder& encoder,
                   const ImageSource& source, const QueryImagesOptions& options,
                   const ImageAnswerFn& answer, QueryImagesResult* result) {
  *result = QueryImagesResult();
  HEDGEDB_RETURN_IF_ERROR(CheckBatchOptions(encoder, options));
  const ImageInputOptions input = InputOptions(encoder, options);
  CollectionSpec spec;
  HEDGEDB_RETURN_IF_ERROR(db.DescribeCollection(collection, &spec));
  HEDGEDB_RETURN_IF_ERROR(CheckCollectionModel(spec, encoder.path, ModelUse::kQuery));
  HEDGEDB_RETURN_IF_ERROR(CheckCollectionFitsModel(spec, encoder.spec, encoder.path));
  SearchOptions search = options.search;
  const int k = search.k;
  if (k < 1) return Status::InvalidArgument("k must be >= 1");
  search.with_payload = true;
  // One more result, so that k remain after the query's own image is dropped.
  if (options.exclude_self) search.k = k + 1;
  result->score = ResolveScore(spec.kind, search.score);
  result->recall_ks = RecallCutoffs(k);

  std::vector<int64_t> first_hits;  // of the labelled queries
  double uncertainty_sum = 0;
  const int64_t total = source.size(), batch = options.batch_size;
  for (int64_t first = 0; first < total; first += batch) {
    auto decoded = std::make_shared<DecodedImages>();
    HEDGEDB_RETURN_IF_ERROR(
        DecodeImages(source, first, std::min(batch, total - first), input, decoded.get()));
    if (!decoded->errors.empty() && !options.skip_bad_images) {
      return Status::InvalidArgument(
          decoded->errors.front().message +
          " (skipping bad images (skip_bad_images) answers the other queries)");
    }
    // Skipped images are reported in their place among the answers (entries
    // and errors are both ascending).
    size_t next_error = 0;
    const auto report_errors_before = [&](int64_t entry) {
      for (; next_error < decoded->errors.size() && decoded->errors[next_error].entry < entry;
           ++next_error) {
        const ImageError& e = decoded->errors[next_error];
        ++result->skipped;
        if (options.on_bad_image) options.on_bad_image(e);
        if (answer) {
          ImageAnswer a;
          a.query = e.entry;
          a.image = &source.entries[e.entry];
          a.error = &e;
          answer(a);
        }
      }
    };
    if (decoded->size() > 0) {
      Embeddings queries;
      HEDGEDB_RETURN_IF_ERROR(EmbedBatch(encoder, source, decoded, batch, &queries));
      EmbeddingView view = queries.View();
      if (spec.kind == Kind::kCodes) view.codes = nullptr;  // queries are logp tables
      std::vector<SearchResult> results;
      HEDGEDB_RETURN_IF_ERROR(db.Search(collection, view, search, &results));
      for (size_t i = 0; i < results.size(); ++i) {
        ImageAnswer a;
        a.query = decoded->entries[i];
        a.image = &source.entries[a.query];
        a.result = std::move(results[i]);
        report_errors_before(a.query);
        if (options.exclude_self) {
          std::vector<SearchHit> kept;
          for (SearchHit& hit : a.result.hits) {
            if (!a.image->IsPayloadOf(hit.payload)) kept.push_back(std::move(hit));
          }
          kept.resize(std::min<size_t>(kept.size(), k));
          a.result.hits = std::move(kept);
        }
        ++result->queries;
        if (!std::isnan(a.result.query_uncertainty)) {
          ++result->with_uncertainty;
          uncertainty_sum += a.result.query_uncertainty;
        }
        if (a.image->has_label) {
          int64_t first_hit = k;  // none among the k results
          for (size_t r = 0; r < a.result.hits.size() && r < static_cast<size_t>(k); ++r) {
            const SearchHit& hit = a.result.hits[r];
            if (hit.has_label && hit.label == a.image->label) {
              first_hit = static_cast<int64_t>(r);
              break;
            }
          }
          first_hits.push_back(first_hit);
        }
        if (answer) answer(a);
      }
    }
    report_errors_before(total);  // those after the batch's last answer
    Report(options, "query", std::min(total, first + batch), total);
  }
  if (result->queries == 0 && result->skipped > 0) {
    return Status::InvalidArgument("none of the " + std::to_string(result->skipped) +
                                   " query images could be used");
  }
  result->labelled = static_cast<int64_t>(first_hits.size());
  if (result->with_uncertainty > 0) {
    result->mean_query_uncertainty =
        uncertainty_sum / static_cast<double>(result->with_uncertainty);
  }
  if (result->labelled > 0) result->recall_at_k = RecallAtK(first_hits, result->recall_ks);
  return Status::OK();
}

}  // namespace datasets
}  // namespace hedgedb
