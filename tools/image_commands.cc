// `hedgedb ingest-images`, `hedgedb query-image` and `hedgedb export-images`:
// image files in, top-k matches out. Thin: list and decode images
// (encoders/image_set.h), embed them with a model file (EncoderModel), and
// call hedgedb::DB.
//
// Error policy of ingest-images (docs/images.md):
//   --on-error abort (default)  every image is decoded and checked before
//       anything is written; one bad image fails the command, naming it, and
//       the database is left untouched (not even the collection is created).
//   --on-error skip  bad images are reported on stderr and in the summary's
//       "skipped" list; the others are ingested.
// Either way every batch is one atomic DB::Ingest, so the database never holds
// part of a batch.

// Only built with the encoders library (tools/CMakeLists.txt builds every
// tools/*.cc; this file needs LibTorch's EncoderModel).
#ifdef HEDGEDB_WITH_ENCODERS

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "encoders/batch_samplers.h"
#include "encoders/benchmark_sets.h"
#include "encoders/embedder.h"
#include "encoders/encoder_data.h"
#include "encoders/image_set.h"
#include "encoders/model_file.h"
#include "hedgedb/db.h"
#include "hedgedb/types.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/search_flags.h"

namespace hedgedb {
namespace cli {
namespace {

namespace fs = std::filesystem;
using encoders::DecodedImages;
using encoders::EncoderModel;
using encoders::ImageInputOptions;
using encoders::ImageSource;
using encoders::ModelSpec;
using nlohmann::json;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---------------------------------------------------------------- progress

// A progress line on stderr: redrawn in place on a terminal, one line every
// few seconds otherwise (so logs stay readable).
class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool enabled)
      : label_(std::move(label)),
        total_(total),
        enabled_(enabled && total > 0),
        tty_(::isatty(2) != 0),
        start_(Clock::now()),
        last_print_(start_) {}

  void Update(int64_t done) {
    if (!enabled_) return;
    const double since_print = std::chrono::duration<double>(Clock::now() - last_print_).count();
    if (done < total_ && since_print < (tty_ ? 0.2 : 5.0)) return;
    last_print_ = Clock::now();
    const double seconds = SecondsSince(start_);
    const double rate = seconds > 0 ? done / seconds : 0.0;
    const int width = 30;
    const int filled = static_cast<int>(width * done / total_);
    std::string bar(filled, '#');
    bar.append(width - filled, '.');
    char eta[32] = "";
    if (done < total_ && rate > 0) {
      std::snprintf(eta, sizeof(eta), " ETA %.0fs", (total_ - done) / rate);
    }
    std::fprintf(stderr, "%s[%s] [%s] %lld/%lld images %.0f/s%s%s", tty_ ? "\r" : "",
                 label_.c_str(), bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total_), rate, eta,
                 tty_ && done < total_ ? "\x1b[K" : "\n");
    if (tty_ && done >= total_) std::fprintf(stderr, "\x1b[K");
    std::fflush(stderr);
  }

 private:
  std::string label_;
  int64_t total_;
  bool enabled_, tty_;
  Clock::time_point start_, last_print_;
};

// ---------------------------------------------------------------- shared flags

struct SourceArgs {
  std::string dir, list, idx, cub, cars;
  std::string split = "test";  // --cub / --cars: class-disjoint split
  bool bbox = false;           // --cub / --cars: crop to the annotated box
  CLI::Option* split_option = nullptr;
  std::vector<std::string> files;  // query-image: positional IMAGE...
};

void AddSourceOptions(CLI::App* cmd, SourceArgs* args) {
  cmd->add_option("--dir", args->dir,
                  "Directory of images: class subfolders (label = folder name) or a flat "
                  "folder (no labels)");
  cmd->add_option("--list", args->list,
                  "List file, one 'path' or 'path,label' per line (relative paths: relative to "
                  "the list file)");
  cmd->add_option("--idx", args->idx,
                  "IDX images file (MNIST layout, gzip allowed), optionally ',LABELS.idx'");
  cmd->add_option("--cub", args->cub,
                  "CUB-200-2011 root (images.txt, image_class_labels.txt, classes.txt, "
                  "bounding_boxes.txt, images/): the images of --split");
  cmd->add_option("--cars", args->cars,
                  "Cars-196 root (cars_annos.mat, car_ims/): the images of --split");
  cmd->add_flag("--bbox", args->bbox,
                "--cub/--cars: crop every image to its annotated bounding box before --fit");
  args->split_option =
      cmd->add_option("--split", args->split,
                      "--cub/--cars: train (CUB classes 1-100, Cars 1-98), test (CUB 101-200, "
                      "Cars 99-196) or all")
          ->capture_default_str()
          ->check(CLI::IsMember({"train", "test", "all"}));
}

ImageSource LoadSourceOrFail(const SourceArgs& args) {
  const int given = !args.dir.empty() + !args.list.empty() + !args.idx.empty() + !args.cub.empty() +
                    !args.cars.empty() + !args.files.empty();
  if (given != 1) {
    UsageError(args.files.empty() && given == 0
                   ? "give the images: --dir DIR, --list FILE, --idx IMAGES[,LABELS], --cub ROOT "
                     "or --cars ROOT"
                   : "give the images one way only (IMAGE arguments, --dir, --list, --idx, "
                     "--cub or --cars)");
  }
  if (args.cub.empty() && args.cars.empty()) {
    if (args.split_option != nullptr && args.split_option->count() > 0) {
      UsageError("--split picks the classes of --cub or --cars; the other sources have none");
    }
    if (args.bbox) UsageError("--bbox needs annotated boxes: only --cub and --cars have them");
  }
  ImageSource source;
  encoders::BenchmarkSplit split = encoders::BenchmarkSplit::kTest;
  if (!encoders::ParseBenchmarkSplit(args.split, &split))
    UsageError("unknown --split " + args.split);
  if (!args.cub.empty()) {
    Check(encoders::ReadCub200(args.cub, split, &source));
  } else if (!args.cars.empty()) {
    Check(encoders::ReadCars196(args.cars, split, &source));
  } else if (!args.dir.empty()) {
    Check(encoders::ListImageDirectory(args.dir, &source));
  } else if (!args.list.empty()) {
    Check(encoders::ReadImageListFile(args.list, &source));
  } else if (!args.idx.empty()) {
    const size_t comma = args.idx.find(',');
    const std::string images = args.idx.substr(0, comma);
    const std::string labels = comma == std::string::npos ? "" : args.idx.substr(comma + 1);
    if (images.empty() || (comma != std::string::npos && labels.empty())) {
      UsageError("--idx takes IMAGES.idx or IMAGES.idx,LABELS.idx, got '" + args.idx + "'");
    }
    Check(encoders::ReadIdxImageSource(images, labels, &source));
  } else {
    source = encoders::ImageFilesSource(args.files);
  }
  return source;
}

struct ModelArgs {
  std::string model;
  std::string fit = "exact";
  int64_t batch_size = 256;
  int threads = 0;
  bool no_progress = false;
};

const std::vector<std::string> kFitNames = {"exact", "resize", "crop"};

void AddModelOptions(CLI::App* cmd, ModelArgs* args) {
  cmd->add_option("--model", args->model, "Model file (hedgedb train --out)")->required();
  cmd->add_option("--fit", args->fit,
                  "Images whose size or channels differ from the model's input: exact (an "
                  "error), resize (convert channels, resize) or crop (convert channels, centre "
                  "crop to the model's aspect ratio, resize)")
      ->capture_default_str()
      ->check(CLI::IsMember(kFitNames));
  cmd->add_option("--batch-size", args->batch_size,
                  "Images decoded, embedded (and ingested) "
                  "per batch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--threads", args->threads, "Torch threads (default: hardware cores)");
  cmd->add_flag("--no-progress", args->no_progress, "No progress bar on stderr");
}

struct LoadedModel {
  std::unique_ptr<EncoderModel> model;
  ModelSpec spec;
  ImageInputOptions input;
};

LoadedModel LoadModelOrFail(const ModelArgs& args) {
  LoadedModel m;
  encoders::SetEncoderThreads(args.threads);
  const Status s = EncoderModel::Load(args.model, &m.model);
  if (!s.ok()) Fail("cannot load model '" + args.model + "': " + s.ToString());
  m.spec = m.model->spec();
  const Status shape = encoders::CheckImageInputShape(m.spec.input_shape);
  if (!shape.ok()) Fail(args.model + ": " + shape.message());
  m.input.input_shape = m.spec.input_shape;
  if (!encoders::ParseImageFit(args.fit, &m.input.fit)) UsageError("unknown --fit " + args.fit);
  return m;
}

// The collection that stores this model's embeddings: the same kind, sizes
// and match parameters `hedgedb embed` prints as create flags (a and b are
// learned by soft-contrastive and HIB training; other methods score with the
// engine's defaults).
CollectionSpec CollectionForModel(const ModelSpec& model, const std::string& name) {
  CollectionSpec spec;
  spec.name = name;
  spec.kind = model.kind;
  if (model.kind == Kind::kCodes) {
    spec.dim = static_cast<int>(model.code_dims);
    spec.code_k = static_cast<int>(model.code_k);
  } else {
    spec.dim = static_cast<int>(model.dim);
  }
  if (model.kind == Kind::kMog) {
    spec.components = static_cast<int>(model.components);
    // Stratified mixture sampling needs a multiple of C samples.
    spec.samples = spec.components * ((8 + spec.components - 1) / spec.components);
  }
  const bool learned =
      model.method == encoders::Method::kSoftContrastive || model.method == encoders::Method::kHib;
  if (model.kind != Kind::kCodes && learned) {
    spec.match_a = static_cast<float>(model.match_a);
    spec.match_b = static_cast<float>(model.match_b);
  }
  return spec;
}

bool NearlyEqual(float a, float b) {
  return std::fabs(a - b) <= 1e-5f * std::max(1.0f, std::max(std::fabs(a), std::fabs(b)));
}

std::string Describe(const CollectionSpec& s) {
  std::string text = std::string(KindName(s.kind)) + " dim " + std::to_string(s.dim);
  if (s.kind == Kind::kMog) text += " components " + std::to_string(s.components);
  if (s.kind == Kind::kCodes) {
    text += " code-k " + std::to_string(s.code_k);
  } else {
    text += " match-a " + JsonFloat(s.match_a).dump() + " match-b " + JsonFloat(s.match_b).dump();
  }
  return text;
}

// Fails unless the existing collection stores what the model produces.
void CheckCollectionFitsModel(const CollectionSpec& have, const CollectionSpec& want,
                              const std::string& model_path) {
  bool same = have.kind == want.kind && have.dim == want.dim;
  if (same && have.kind == Kind::kMog) same = have.components == want.components;
  if (same && have.kind == Kind::kCodes) same = have.code_k == want.code_k;
  if (same && have.kind != Kind::kCodes) {
    same = NearlyEqual(have.match_a, want.match_a) && NearlyEqual(have.match_b, want.match_b);
  }
  if (!same) {
    Fail("collection '" + have.name + "' (" + Describe(have) + ") does not match model '" +
         model_path + "' (" + Describe(want) +
         "): use the model the collection was made with, or another --collection");
  }
}

// Embeds one decoded batch.
encoders::Embeddings EmbedOrFail(const LoadedModel& m, const ImageSource& source,
                                 const std::shared_ptr<const DecodedImages>& images,
                                 int64_t batch_size) {
  const encoders::ItemSet set = encoders::DecodedImageItemSet(images, source);
  std::vector<int64_t> items(set.size());
  for (int64_t i = 0; i < set.size(); ++i) items[i] = i;
  encoders::Embeddings embeddings;
  Check(m.model->Embed(set, items, /*corrupt=*/false, &embeddings, batch_size));
  return embeddings;
}

// ---------------------------------------------------------------- ingest-images

struct IngestImagesArgs {
  std::string db, collection, on_error = "abort", index;
  SourceArgs source;
  ModelArgs model;
};

void RunIngestImages(const IngestImagesArgs& args) {
  const Clock::time_point start = Clock::now();
  const bool skip_bad = args.on_error == "skip";
  const ImageSource source = LoadSourceOrFail(args.source);
  LoadedModel m = LoadModelOrFail(args.model);
  m.input.crop_to_box = args.source.bbox;
  const CollectionSpec wanted = CollectionForModel(m.spec, args.collection);
  const int64_t total = source.size();
  const int64_t batch = args.model.batch_size;

  // An existing database is opened (and its collection checked) before the
  // long work; a new one is only created once there is something to write.
  std::unique_ptr<DB> db;
  bool collection_exists = false;
  auto check_existing = [&] {
    std::vector<std::string> names;
    Check(db->ListCollections(&names));
    collection_exists = std::find(names.begin(), names.end(), args.collection) != names.end();
    if (collection_exists) {
      CheckCollectionFitsModel(DescribeOrFail(*db, args.collection), wanted, args.model.model);
    }
  };
  std::error_code ec;
  if (fs::is_directory(args.db, ec)) {
    db = OpenDatabase(args.db, /*create_if_missing=*/false);
    check_existing();
  }

  // --on-error abort: decode and check every image before writing anything.
  if (!skip_bad) {
    ProgressBar progress("checking", total, !args.model.no_progress);
    std::vector<encoders::ImageError> errors;
    for (int64_t first = 0; first < total; first += batch) {
      DecodedImages decoded;
      Check(
          encoders::DecodeImages(source, first, std::min(batch, total - first), m.input, &decoded));
      errors.insert(errors.end(), decoded.errors.begin(), decoded.errors.end());
      progress.Update(std::min(total, first + batch));
    }
    if (!errors.empty()) {
      for (const auto& e : errors)
        std::fprintf(stderr, "hedgedb: bad image: %s\n", e.message.c_str());
      Fail(errors.front().message + " (" + std::to_string(errors.size()) + " of " +
           std::to_string(total) +
           " images cannot be used, listed above; nothing was ingested; --on-error skip "
           "ingests the others)");
    }
  }

  json skipped = json::array();
  int64_t ingested = 0, batches = 0, first_id = -1, last_id = -1;
  bool created = false;
  ProgressBar progress("ingest-images", total, !args.model.no_progress);
  for (int64_t first = 0; first < total; first += batch) {
    auto decoded = std::make_shared<DecodedImages>();
    Check(encoders::DecodeImages(source, first, std::min(batch, total - first), m.input,
                                 decoded.get()));
    for (const auto& e : decoded->errors) {
      if (!skip_bad) {
        // Checked above, so the file changed since: earlier batches stay.
        Fail(e.message + " (the image changed during the run; " + std::to_string(ingested) +
             " images were ingested before this batch" +
             (ingested > 0 ? ", ids " + std::to_string(first_id) + ".." + std::to_string(last_id)
                           : std::string()) +
             "; nothing of this batch was written)");
      }
      std::fprintf(stderr, "%shedgedb: skipped: %s\n", ::isatty(2) ? "\n" : "", e.message.c_str());
      json s;
      s["image"] = source.entries[e.entry].Name();
      s["error"] = e.message;
      skipped.push_back(std::move(s));
    }
    if (decoded->size() > 0) {
      const encoders::Embeddings embeddings = EmbedOrFail(m, source, decoded, batch);
      if (db == nullptr) {
        db = OpenDatabase(args.db, /*create_if_missing=*/true);
        check_existing();
      }
      if (!collection_exists) {
        CollectionSpec spec = wanted;
        spec.index_factory = args.index;
        Check(db->CreateCollection(spec));
        collection_exists = created = true;
      }
      std::vector<int64_t> labels;
      std::vector<std::string> payloads;
      bool all_labelled = true;
      for (int64_t entry : decoded->entries) {
        const encoders::ImageEntry& e = source.entries[entry];
        all_labelled = all_labelled && e.has_label;
        labels.push_back(e.label);
        payloads.push_back(e.Payload());
      }
      IngestBatch ingest;
      ingest.data = embeddings.View();
      ingest.labels = all_labelled ? labels.data() : nullptr;
      ingest.payloads = payloads.data();
      std::vector<int64_t> ids;
      const Status s = db->Ingest(args.collection, ingest, &ids);
      if (!s.ok()) {
        Fail(s.ToString() + " (batch of images " + source.entries[decoded->entries.front()].Name() +
             " .. " + source.entries[decoded->entries.back()].Name() + " not written; " +
             std::to_string(ingested) + " images were ingested before it)");
      }
      if (first_id < 0 && !ids.empty()) first_id = ids.front();
      if (!ids.empty()) last_id = ids.back();
      ingested += static_cast<int64_t>(ids.size());
      ++batches;
    }
    progress.Update(std::min(total, first + batch));
  }
  if (ingested == 0) {
    Fail("none of the " + std::to_string(total) +
         " images could be used (listed above); nothing was ingested");
  }
  json out;
  out["collection"] = args.collection;
  out["created"] = created;
  out["images"] = total;
  out["ingested"] = ingested;
  out["first_id"] = first_id;
  out["last_id"] = last_id;
  out["batches"] = batches;
  out["skipped"] = std::move(skipped);
  out["seconds"] = std::round(SecondsSince(start) * 1000.0) / 1000.0;
  PrintJsonLine(out);
}

void RegisterIngestImages(CLI::App& app) {
  auto args = std::make_shared<IngestImagesArgs>();
  CLI::App* cmd = app.add_subcommand("ingest-images",
                                     "Embed image files with a model and add them to a collection");
  cmd->footer(
      "Creates the collection from the model (kind, dimensions, match a/b) if it does not exist, "
      "and checks that an existing one matches. Images are decoded, checked, embedded and "
      "ingested in batches of --batch-size; each batch is one atomic write. Every item's "
      "payload is JSON: {\"path\": ABSOLUTE_PATH, \"label_name\": FOLDER_OR_LABEL} "
      "({\"path\": IDX_FILE, \"index\": I} for IDX images); labels come from subfolder names or "
      "the list file (a decimal name is the label itself).\n"
      "Bad images (missing, unreadable, corrupt or truncated, wrong size or channels under "
      "--fit exact) are named on stderr. --on-error abort (default): every image is checked "
      "before anything is written, so one bad image fails the command and leaves the database "
      "unchanged. --on-error skip: bad images are skipped and listed in the summary's "
      "\"skipped\" field; the others are ingested.\n"
      "Prints {\"ingested\": N, \"first_id\", \"last_id\", \"skipped\": [...], ...}.");
  cmd->add_option("--db", args->db, "Database directory (created if missing)")->required();
  cmd->add_option("--collection", args->collection, "Collection name (created if missing)")
      ->required();
  AddModelOptions(cmd, &args->model);
  AddSourceOptions(cmd, &args->source);
  cmd->add_option("--on-error", args->on_error,
                  "A bad image: abort (check all first, write nothing) or skip (report it, "
                  "ingest the rest)")
      ->capture_default_str()
      ->check(CLI::IsMember({"abort", "skip"}));
  cmd->add_option("--index", args->index,
                  "FAISS factory string for a new collection (default: the kind's default)");
  cmd->callback([args] { RunIngestImages(*args); });
}

// ---------------------------------------------------------------- query-image

struct QueryImageArgs {
  std::string db, collection, format = "json";
  SourceArgs source;
  ModelArgs model;
  SearchFlags search;
  bool exclude_self = false;
  std::string on_error = "abort";
};

// Payload fields of a hit: the image path etc. from ingest-images' JSON, or
// the plain payload.
void AddPayloadFields(const std::string& payload, json* hit) {
  if (payload.empty()) return;
  const json parsed = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("path")) {
    for (const auto& [key, value] : parsed.items()) (*hit)[key] = value;
  } else {
    (*hit)["payload"] = payload;
  }
}

// A path for the table: relative to the working directory when inside it.
std::string DisplayPath(const std::string& path) {
  std::error_code ec;
  const fs::path relative = fs::path(path).lexically_relative(fs::current_path(ec));
  if (ec || relative.empty() || *relative.begin() == "..") return path;
  return relative.string();
}

std::string FormatNumber(double value, const char* format = "%.4f") {
  if (std::isnan(value)) return "-";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

// Recall@m of labelled queries for m = 1, 2, 4, ... and k (the metric-
// learning benchmarks report 1, 2, 4, 8): a query is a hit at m if one of its
// first m results has its label.
struct QuerySummary {
  int64_t queries = 0, labelled = 0, skipped = 0;
  std::vector<int64_t> first_hit_counts;  // [r]: labelled queries first hit at rank r
  int64_t with_uncertainty = 0;
  double uncertainty_sum = 0;

  void AddLabelled(const SearchResult& result, int64_t label, int k) {
    ++labelled;
    first_hit_counts.resize(k, 0);
    for (size_t r = 0; r < result.hits.size() && r < static_cast<size_t>(k); ++r) {
      if (result.hits[r].has_label && result.hits[r].label == label) {
        ++first_hit_counts[r];
        return;
      }
    }
  }
  static std::vector<int> Cutoffs(int k) {
    std::vector<int> cutoffs;
    for (int64_t m = 1; m < k; m *= 2) cutoffs.push_back(static_cast<int>(m));
    cutoffs.push_back(k);
    return cutoffs;
  }
  double RecallAt(int m) const {
    int64_t hits = 0;
    for (int r = 0; r < m && r < static_cast<int>(first_hit_counts.size()); ++r) {
      hits += first_hit_counts[r];
    }
    return static_cast<double>(hits) / static_cast<double>(labelled);
  }

  json Json(int k) const {
    json j;
    j["queries"] = queries;
    if (with_uncertainty > 0) {
      j["mean_query_uncertainty"] = uncertainty_sum / static_cast<double>(with_uncertainty);
    }
    j["labelled_queries"] = labelled;
    if (skipped > 0) j["skipped"] = skipped;
    if (labelled > 0) {
      for (int m : Cutoffs(k)) j["recall_at_" + std::to_string(m)] = RecallAt(m);
    }
    return j;
  }
};

void PrintTable(int64_t q, const encoders::ImageEntry& query, const SearchResult& result,
                const json& hits, const std::string& score_name) {
  std::printf("query %lld  %s", static_cast<long long>(q), DisplayPath(query.Name()).c_str());
  if (query.has_label) std::printf("  label %lld", static_cast<long long>(query.label));
  std::printf("  uncertainty %s\n", FormatNumber(result.query_uncertainty).c_str());
  std::printf("  %4s %8s %11s %11s %8s  %s\n", "rank", "id", score_name.c_str(), "uncertainty",
              "label", "path");
  for (size_t r = 0; r < result.hits.size(); ++r) {
    const SearchHit& hit = result.hits[r];
    const json& h = hits[r];
    std::string where = h.contains("path") ? DisplayPath(h["path"].get<std::string>()) : "";
    if (h.contains("index")) where += "[" + h["index"].dump() + "]";
    if (h.contains("payload")) where = h["payload"].get<std::string>();
    std::printf("  %4zu %8lld %11s %11s %8s  %s\n", r + 1, static_cast<long long>(hit.id),
                FormatNumber(hit.score).c_str(), FormatNumber(hit.uncertainty).c_str(),
                hit.has_label ? std::to_string(hit.label).c_str() : "-", where.c_str());
  }
  std::printf("\n");
}

void RunQueryImage(QueryImageArgs& args) {
  SearchOptions options = ResolveSearchFlags(args.search);
  options.with_payload = true;
  const int k = options.k;
  const ImageSource source = LoadSourceOrFail(args.source);
  LoadedModel m = LoadModelOrFail(args.model);
  m.input.crop_to_box = args.source.bbox;
  std::unique_ptr<DB> db = OpenDatabase(args.db, /*create_if_missing=*/false);
  const CollectionSpec spec = DescribeOrFail(*db, args.collection);
  CheckCollectionFitsModel(spec, CollectionForModel(m.spec, args.collection), args.model.model);
  const ScoreType score = ResolveScore(spec.kind, options.score);
  const std::string score_name =
      score == ScoreType::kMc || score == ScoreType::kMatch ? "match_prob" : ScoreName(score);
  // One more result, so that k remain after the query's own image is dropped.
  if (args.exclude_self) options.k = k + 1;

  QuerySummary summary;
  const int64_t total = source.size();
  const int64_t batch = args.model.batch_size;
  ProgressBar progress("query-image", total, !args.model.no_progress && args.format == "summary");
  for (int64_t first = 0; first < total; first += batch) {
    auto decoded = std::make_shared<DecodedImages>();
    Check(encoders::DecodeImages(source, first, std::min(batch, total - first), m.input,
                                 decoded.get()));
    if (!decoded->errors.empty() && args.on_error != "skip") {
      Fail(decoded->errors.front().message + " (--on-error skip answers the other queries)");
    }
    // Skipped images are reported in their place among the answers (entries
    // and errors are both ascending).
    size_t next_error = 0;
    auto report_errors_before = [&](int64_t entry) {
      for (; next_error < decoded->errors.size() && decoded->errors[next_error].entry < entry;
           ++next_error) {
        const encoders::ImageError& e = decoded->errors[next_error];
        ++summary.skipped;
        std::fprintf(stderr, "%shedgedb: skipped: %s\n", ::isatty(2) ? "\n" : "",
                     e.message.c_str());
        if (args.format == "json") {
          json j;
          j["query"] = e.entry;
          j["image"] = source.entries[e.entry].Name();
          j["error"] = e.message;
          PrintJsonLine(j);
        } else if (args.format == "table") {
          std::printf("query %lld  %s  skipped: %s\n\n", static_cast<long long>(e.entry),
                      DisplayPath(source.entries[e.entry].Name()).c_str(), e.message.c_str());
        }
      }
    };
    if (decoded->size() == 0) {
      report_errors_before(total);
      progress.Update(std::min(total, first + batch));
      continue;
    }
    const encoders::Embeddings queries = EmbedOrFail(m, source, decoded, batch);
    EmbeddingView view = queries.View();
    if (spec.kind == Kind::kCodes) view.codes = nullptr;  // queries are logp tables
    std::vector<SearchResult> results;
    Check(db->Search(args.collection, view, options, &results));
    for (size_t i = 0; i < results.size(); ++i) {
      SearchResult& result = results[i];
      const int64_t q = decoded->entries[i];
      report_errors_before(q);
      const encoders::ImageEntry& query = source.entries[q];
      if (args.exclude_self) {
        std::vector<SearchHit> kept;
        for (SearchHit& hit : result.hits) {
          const json theirs = json::parse(hit.payload, nullptr, /*allow_exceptions=*/false);
          const bool same = theirs.is_object() && theirs.value("path", "") == query.path &&
                            theirs.value("index", int64_t{-1}) == query.idx_index;
          if (!same) kept.push_back(std::move(hit));
        }
        kept.resize(std::min<size_t>(kept.size(), k));
        result.hits = std::move(kept);
      }
      json hits = json::array();
      for (const SearchHit& hit : result.hits) {
        json h;
        h["id"] = hit.id;
        h["score"] = JsonFloat(hit.score);
        if (!std::isnan(hit.uncertainty)) h["uncertainty"] = JsonFloat(hit.uncertainty);
        if (hit.has_label) h["label"] = hit.label;
        AddPayloadFields(hit.payload, &h);
        hits.push_back(std::move(h));
      }
      ++summary.queries;
      if (!std::isnan(result.query_uncertainty)) {
        ++summary.with_uncertainty;
        summary.uncertainty_sum += result.query_uncertainty;
      }
      if (query.has_label) summary.AddLabelled(result, query.label, k);
      if (args.format == "json") {
        json j;
        j["query"] = q;
        j["image"] = query.Name();
        if (query.has_label) j["label"] = query.label;
        if (!std::isnan(result.query_uncertainty)) {
          j["query_uncertainty"] = JsonFloat(result.query_uncertainty);
        }
        j["results"] = std::move(hits);
        PrintJsonLine(j);
      } else if (args.format == "table") {
        PrintTable(q, query, result, hits, score_name);
      }
    }
    report_errors_before(total);  // those after the batch's last answer
    progress.Update(std::min(total, first + batch));
  }
  if (summary.queries == 0 && summary.skipped > 0) {
    Fail("none of the " + std::to_string(summary.skipped) +
         " query images could be used (listed above)");
  }
  if (args.format == "summary") {
    PrintJsonLine(summary.Json(k));
  } else if (args.format == "table") {
    std::printf("%lld %s", static_cast<long long>(summary.queries),
                summary.queries == 1 ? "query" : "queries");
    if (summary.skipped > 0)
      std::printf(" (%lld skipped)", static_cast<long long>(summary.skipped));
    if (summary.with_uncertainty > 0) {
      std::printf(", mean query uncertainty %s",
                  FormatNumber(summary.uncertainty_sum / summary.with_uncertainty).c_str());
    }
    if (summary.labelled > 0) {
      for (int m : QuerySummary::Cutoffs(k)) {
        std::printf(", recall@%d %s", m, FormatNumber(summary.RecallAt(m), "%.3f").c_str());
      }
      std::printf(" (%lld labelled)", static_cast<long long>(summary.labelled));
    }
    std::printf("\n");
  }
}

void RegisterQueryImage(CLI::App& app) {
  auto args = std::make_shared<QueryImageArgs>();
  args->search.options.k = 5;
  CLI::App* cmd = app.add_subcommand(
      "query-image", "Embed query images with a model and print their top-k matches");
  cmd->footer(
      "Queries: IMAGE arguments, or --dir/--list/--idx (labelled queries add recall@1 and "
      "recall@k to the summary). Output per query (--format json): {\"query\": i, \"image\": "
      "path, \"label\", \"query_uncertainty\": eta, \"results\": [{\"id\", \"score\", "
      "\"uncertainty\", \"label\", \"path\", \"label_name\"}, ...]}, best first. --format table "
      "prints the same readably with a summary line; --format summary prints only "
      "{\"queries\", \"labelled_queries\", \"mean_query_uncertainty\", \"recall_at_1\", "
      "\"recall_at_2\", "
      "\"recall_at_4\", ..., \"recall_at_K\"}. A query "
      "image that cannot be read or does not fit fails the command, naming it; with --on-error "
      "skip it is reported on stderr and as {\"query\": i, \"image\", \"error\"} (json), and "
      "counted as \"skipped\" in the summary.");
  cmd->add_option("--db", args->db, "Database directory")->required();
  cmd->add_option("--collection", args->collection, "Collection name")->required();
  AddModelOptions(cmd, &args->model);
  AddSourceOptions(cmd, &args->source);
  cmd->add_option("images", args->source.files, "Query image files");
  cmd->add_option("--k", args->search.options.k, "Results per query")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--format", args->format, "json, table or summary")
      ->capture_default_str()
      ->check(CLI::IsMember({"json", "table", "summary"}));
  AddSearchFlags(cmd, &args->search);
  cmd->add_option("--on-error", args->on_error,
                  "A query image that cannot be read or does not fit: abort (fail the command "
                  "there) or skip (report it, answer the others)")
      ->capture_default_str()
      ->check(CLI::IsMember({"abort", "skip"}));
  cmd->add_flag("--exclude-self", args->exclude_self,
                "Drop results whose image is the query's own file (leave-one-out recall of "
                "images already in the collection)");
  cmd->callback([args] { RunQueryImage(*args); });
}

// ---------------------------------------------------------------- export-images

struct ExportImagesArgs {
  encoders::DataOptions data;
  std::string split = "test", out, format = "png";
  bool corrupt = false;
  int64_t offset = 0, count = 1000;
  uint64_t seed = 0;
};

void RunExportImages(const ExportImagesArgs& args) {
  if (args.data.source.rfind("cub:", 0) == 0 || args.data.source.rfind("cars:", 0) == 0) {
    UsageError(
        "export-images writes N-item composites; CUB/Cars images are files already: use "
        "--cub/--cars with ingest-images and query-image");
  }
  encoders::EncoderData data;
  Check(encoders::LoadEncoderData(args.data, &data));
  const encoders::ItemSet* set = nullptr;
  Check(encoders::SelectSplit(data, args.split, &set));
  if (set->input_shape.size() != 3) {
    UsageError("--data " + args.data.source + " holds feature vectors, not images");
  }
  if (args.corrupt && !data.has_corrupt) {
    UsageError("--corrupt: the data set " + data.description + " has no corrupt twin");
  }
  // A seeded permutation of the split, so that disjoint --offset ranges give
  // disjoint image sets (e.g. a gallery and queries) drawn from all classes.
  std::vector<int64_t> order(set->size());
  for (int64_t i = 0; i < set->size(); ++i) order[i] = i;
  encoders::SeededRng rng(encoders::SeededRng::DeriveSeed(args.seed, 0x696d67));
  rng.Shuffle(&order);
  if (args.offset >= set->size()) {
    UsageError("--offset " + std::to_string(args.offset) + " is past the " +
               std::to_string(set->size()) + " items of the split");
  }
  std::vector<int64_t> items(order.begin() + args.offset,
                             order.begin() + std::min(set->size(), args.offset + args.count));
  std::sort(items.begin(), items.end());
  const std::vector<float> pixels = set->Render(items, args.corrupt);
  const int64_t channels = set->input_shape[0], rows = set->input_shape[1],
                cols = set->input_shape[2];
  const int64_t floats = set->item_floats();
  std::error_code ec;
  fs::create_directories(args.out, ec);
  if (ec) Fail(args.out + ": cannot create the directory (" + ec.message() + ")");
  // The occluded twins come with OUT/occlusion.csv: per image, the fraction
  // of the clean image's foreground (non-zero pixels) that occlusion blacked
  // out, i.e. how much of the objects is hidden.
  std::vector<float> clean;
  std::string manifest;
  if (args.corrupt) {
    clean = set->Render(items, false);
    manifest = "path,label,hidden_fraction\n";
  }
  std::vector<int64_t> classes;
  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t label = set->labels[items[i]];
    classes.push_back(label);
    const fs::path folder = fs::path(args.out) / std::to_string(label);
    fs::create_directories(folder, ec);
    if (ec) Fail(folder.string() + ": cannot create the directory (" + ec.message() + ")");
    char name[32];
    std::snprintf(name, sizeof(name), "%06lld.%s", static_cast<long long>(items[i]),
                  args.format.c_str());
    const float* image = pixels.data() + i * floats;
    Check(encoders::WriteImageFile((folder / name).string(), image, channels, rows, cols));
    if (args.corrupt) {
      int64_t foreground = 0, hidden = 0;
      for (int64_t p = 0; p < floats; ++p) {
        const float c = clean[i * floats + p];
        if (c == 0.0f) continue;
        ++foreground;
        hidden += image[p] != c;
      }
      char line[96];
      std::snprintf(line, sizeof(line), "%lld/%s,%lld,%.4f\n", static_cast<long long>(label), name,
                    static_cast<long long>(label),
                    foreground > 0 ? static_cast<double>(hidden) / foreground : 0.0);
      manifest += line;
    }
  }
  if (args.corrupt) {
    const std::string path = (fs::path(args.out) / "occlusion.csv").string();
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << manifest;
    file.close();
    if (!file) Fail(path + ": cannot write the occlusion list");
  }
  std::sort(classes.begin(), classes.end());
  json out;
  out["written"] = static_cast<int64_t>(items.size());
  out["dir"] = args.out;
  out["classes"] = std::unique(classes.begin(), classes.end()) - classes.begin();
  out["data"] = data.description;
  out["split"] = args.split;
  out["corrupt"] = args.corrupt;
  out["shape"] = set->input_shape;
  if (args.corrupt) out["occlusion_list"] = (fs::path(args.out) / "occlusion.csv").string();
  PrintJsonLine(out);
}

void RegisterExportImages(CLI::App& app) {
  auto args = std::make_shared<ExportImagesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export-images", "Write images of a data split as PNG/JPEG files in class folders");
  cmd->footer(
      "Writes OUT/<label>/<item>.png (or .jpg): items --offset .. --offset+--count of a seeded "
      "permutation of the split. With the same flags, --corrupt writes the occluded twins under "
      "the same names, and OUT/occlusion.csv (path,label,hidden_fraction: the share of the clean "
      "image's non-zero pixels that occlusion blacked out). The data flags are those of hedgedb "
      "train.");
  cmd->add_option("--out", args->out, "Output directory")->required();
  cmd->add_option("--data", args->data.source,
                  "Base set of the composites: fashion-mnist, mnist or idx:DIR")
      ->capture_default_str();
  cmd->add_option("--items", args->data.items, "Images per composite")
      ->capture_default_str()
      ->check(CLI::Range(1, 4));
  cmd->add_option("--train-total", args->data.train_total, "Training composites (as in train)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--test-total", args->data.test_total, "Composites per test split")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--data-seed", args->data.seed, "Seed of the class split and occlusions")
      ->capture_default_str();
  cmd->add_option("--split", args->split, "train, test, test-seen or test-unseen")
      ->capture_default_str();
  cmd->add_flag("--corrupt", args->corrupt, "Write the corrupt (occluded) twins");
  cmd->add_option("--offset", args->offset, "First item of the permutation")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--count", args->count, "Number of images")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", args->seed, "Seed of the permutation")->capture_default_str();
  cmd->add_option("--format", args->format, "png or jpg")
      ->capture_default_str()
      ->check(CLI::IsMember({"png", "jpg"}));
  cmd->callback([args] { RunExportImages(*args); });
}

}  // namespace

void RegisterImageCommands(CLI::App& app) {
  RegisterIngestImages(app);
  RegisterQueryImage(app);
  RegisterExportImages(app);
}

}  // namespace cli
}  // namespace hedgedb

#endif  // HEDGEDB_WITH_ENCODERS
