// `hedgedb ingest-images`, `hedgedb query-image` and `hedgedb export-images`:
// image files in, top-k matches out. Thin: list and decode images
// (datasets/image_set.h), embed them with a model file (EncoderModel), and
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

// Only built into the encoder module (libhedgedb_cli_encoders.so, tools/CMakeLists.txt).
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

#include "datasets/benchmark_sets.h"
#include "datasets/image_pipeline.h"
#include "datasets/image_set.h"
#include "datasets/load_data.h"
#include "encoders/data/batch_samplers.h"
#include "encoders/embedder.h"
#include "encoders/engine_bridge.h"
#include "encoders/models/model_file.h"
#include "hedgedb/db.h"
#include "hedgedb/types.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/data_flags.h"
#include "tools/flag_checks.h"
#include "tools/search_flags.h"

namespace hedgedb {
namespace cli {
namespace {

namespace fs = std::filesystem;
using datasets::DecodedImages;
using datasets::ImageInputOptions;
using datasets::ImageSource;
using encoders::EncoderModel;
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
  static constexpr double kMinRateSeconds = 0.5;
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
    // A stage that ends within half a second has no rate worth printing
    // (a few images over microseconds read as millions a second).
    const double rate = seconds >= kMinRateSeconds ? done / seconds : 0.0;
    const int width = 30;
    const int filled = static_cast<int>(width * done / total_);
    std::string bar(filled, '#');
    bar.append(width - filled, '.');
    char eta[32] = "";
    if (done < total_ && rate > 0) {
      std::snprintf(eta, sizeof(eta), " ETA %.0fs", (total_ - done) / rate);
    }
    char speed[32] = "";
    if (rate > 0) std::snprintf(speed, sizeof(speed), " %.0f/s", rate);
    std::fprintf(stderr, "%s[%s] [%s] %lld/%lld images%s%s%s", tty_ ? "\r" : "", label_.c_str(),
                 bar.c_str(), static_cast<long long>(done), static_cast<long long>(total_), speed,
                 eta, tty_ && done < total_ ? "\x1b[K" : "\n");
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
  std::string dir, list, idx;
  DataSetFlags data;           // --data cub:ROOT / --cub ROOT, cars likewise
  std::string split = "test";  // CUB / Cars: class-disjoint split
  bool bbox = false;           // CUB / Cars: crop to the annotated box
  int64_t class_split = 0;     // CUB / Cars: last training class (0: official)
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
  AddDataSetFlags(cmd, &args->data,
                  "cub:ROOT, cars:ROOT or folder:ROOT: the images of --split of a data set "
                  "split by class");
  cmd->add_flag("--bbox", args->bbox,
                "CUB/Cars: crop every image to its annotated bounding box before --fit");
  args->split_option =
      cmd->add_option("--split", args->split,
                      "CUB/Cars: train (CUB classes 1-100, Cars 1-98), test (CUB 101-200, "
                      "Cars 99-196) or all")
          ->capture_default_str()
          ->check(CLI::IsMember({"train", "test", "all"}));
  cmd->add_option("--class-split", args->class_split,
                  "CUB/Cars: classes 1..K are the train split, the others test (0: the official "
                  "split; default: the model's)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

ImageSource LoadSourceOrFail(const SourceArgs& args) {
  // --data cub:ROOT and --cub ROOT are one flag (tools/data_flags.h).
  const std::string data = ResolveDataSet(args.data);
  // A data set split by class: cub:ROOT, cars:ROOT, folder:ROOT.
  const std::string set_name = DataSetName(data);
  const std::string set_root = data.empty() ? "" : data.substr(set_name.size() + 1);
  const bool benchmark =
      !data.empty() && datasets::IsBenchmarkSet(set_name) && data.size() > set_name.size();
  if (!data.empty() && (!benchmark || set_root.empty())) {
    UsageError(
        "--data takes cub:ROOT, cars:ROOT or folder:ROOT here (other images: --dir, --list or "
        "--idx), got '" +
        data + "'");
  }
  const int given =
      !args.dir.empty() + !args.list.empty() + !args.idx.empty() + benchmark + !args.files.empty();
  if (given != 1) {
    UsageError(args.files.empty() && given == 0
                   ? "give the images: --dir DIR, --list FILE, --idx IMAGES[,LABELS], --cub ROOT "
                     "or --cars ROOT"
                   : "give the images one way only (IMAGE arguments, --dir, --list, --idx, "
                     "--cub or --cars)");
  }
  if (!benchmark) {
    if (args.split_option != nullptr && args.split_option->count() > 0) {
      UsageError(
          "--split picks the classes of --cub, --cars or --data folder:ROOT; the other sources "
          "have none");
    }
    if (args.class_split != 0) {
      UsageError(
          "--class-split splits the classes of --cub, --cars or --data folder:ROOT; the other "
          "sources have none");
    }
  }
  if (args.bbox && set_name != "cub" && set_name != "cars") {
    UsageError("--bbox needs annotated boxes: only --cub and --cars have them");
  }
  ImageSource source;
  datasets::BenchmarkSplit split = datasets::BenchmarkSplit::kTest;
  if (!datasets::ParseBenchmarkSplit(args.split, &split))
    UsageError("unknown --split " + args.split);
  if (benchmark) {
    Check(datasets::ReadBenchmarkSet(set_name, set_root, split, &source, args.class_split));
  } else if (!args.dir.empty()) {
    Check(datasets::ListImageDirectory(args.dir, &source));
  } else if (!args.list.empty()) {
    Check(datasets::ReadImageListFile(args.list, &source));
  } else if (!args.idx.empty()) {
    const size_t comma = args.idx.find(',');
    const std::string images = args.idx.substr(0, comma);
    const std::string labels = comma == std::string::npos ? "" : args.idx.substr(comma + 1);
    if (images.empty() || (comma != std::string::npos && labels.empty())) {
      UsageError("--idx takes IMAGES.idx or IMAGES.idx,LABELS.idx, got '" + args.idx + "'");
    }
    Check(datasets::ReadIdxImageSource(images, labels, &source));
  } else {
    source = datasets::ImageFilesSource(args.files);
  }
  return source;
}

struct ModelArgs {
  std::string model;
  std::string fit = "exact";  // see ApplyModelSettings
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
                  "crop to the model's aspect ratio, resize). Default: resize for --cub/--cars "
                  "(as training reads them), else the fit of the model's training data (exact "
                  "for composites)")
      ->check(CLI::IsMember(kFitNames));
  cmd->add_option("--batch-size", args->batch_size, "Images decoded and embedded per batch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--threads", args->threads, "Torch threads (default: hardware cores)");
  cmd->add_flag("--no-progress", args->no_progress, "No progress bar on stderr");
}

datasets::ImageEncoder LoadModelOrFail(const ModelArgs& args) {
  encoders::SetEncoderThreads(args.threads);
  datasets::ImageEncoder encoder;
  const Status s = datasets::LoadImageEncoder(args.model, &encoder);
  if (!s.ok()) Fail(s.message());
  return encoder;
}

// The defaults the model's recorded training data gives the image flags:
// --fit (CUB/Cars sources: resize, as training reads them; others: the fit
// of the training data), and for a source of the data set the model was
// trained on, --bbox and --class-split. Defaults only: reading a gallery
// otherwise than training did is a choice; the collection's record
// (ApplyCollectionRecord) then keeps every later command to it.
void ApplyModelSettings(const CLI::App& cmd, const ModelSpec& model, const std::string& path,
                        SourceArgs* source, ModelArgs* args) {
  const std::string data = ResolveDataSet(source->data);
  const bool benchmark = !data.empty() && std::string(encoders::DataFamily(data)) == "benchmark";
  const encoders::DataSettings& recorded = model.data;
  RecordedSettings settings(cmd, "the model '" + path + "'");
  std::string fit = "exact";
  if (benchmark) {
    fit = "resize";
  } else if (recorded.recorded && !recorded.image_fit.empty()) {
    fit = recorded.image_fit;
  }
  settings.Default("--fit", &args->fit, fit);
  if (recorded.recorded && benchmark && DataSetName(data) == DataSetName(recorded.source)) {
    settings.Default("--bbox", &source->bbox, recorded.bbox);
    settings.Default("--class-split", &source->class_split, recorded.class_split);
  }
}

// ---------------------------------------------------------------- the collection's record

// How ingest-images read a collection's images, kept in the collection's
// metadata as {"images": {"fit": F, "data_set": "cub", "bbox": B,
// "class_split": K}} (data_set, bbox and class_split for CUB/Cars sources
// only), so that later ingests and queries read theirs the same way. The
// image pipeline adds the model file to the record ("model",
// "model_checksum": encoders::RecordModelInMetadata) and enforces it.
std::string ImageRecordText(const SourceArgs& source, const ModelArgs& model) {
  json images = {{"fit", model.fit}};
  const std::string data = ResolveDataSet(source.data);
  if (!data.empty()) {
    images["data_set"] = DataSetName(data);
    images["bbox"] = source.bbox;
    images["class_split"] = source.class_split;
  }
  return json{{"images", images}}.dump();
}

// The record of a collection; null when it has none (created by `create`
// or before collections kept one).
json ImageRecordOf(const CollectionSpec& spec) {
  const json metadata = json::parse(spec.metadata, nullptr, /*allow_exceptions=*/false);
  if (!metadata.is_object() || !metadata.contains("images") || !metadata["images"].is_object()) {
    return json();
  }
  return metadata["images"];
}

// The collection's record as defaults of the image flags, after the model's
// (ApplyModelSettings): the collection's wins, since its items were read that
// way. Ingesting more images must read them as the record says (a
// contradicting flag is an error); queries must crop as the gallery was
// cropped, and take its fit as the default.
void ApplyCollectionRecord(const CLI::App& cmd, const CollectionSpec& spec, bool ingest,
                           SourceArgs* source, ModelArgs* model) {
  const json record = ImageRecordOf(spec);
  if (record.is_null()) return;
  // Before the read settings: another model is the problem to name first.
  const Status model_status = encoders::CheckCollectionModel(
      spec, model->model, ingest ? encoders::ModelUse::kIngest : encoders::ModelUse::kQuery);
  if (!model_status.ok()) Fail(model_status.message());
  RecordedSettings settings(cmd, "collection '" + spec.name + "'", "ingested");
  if (record.contains("fit") && record["fit"].is_string()) {
    const std::string fit = record["fit"];
    if (ingest) {
      settings.Check("--fit", &model->fit, fit);
    } else {
      settings.Default("--fit", &model->fit, fit);
    }
  }
  const std::string data = ResolveDataSet(source->data);
  if (data.empty() || !record.contains("data_set") || record["data_set"] != DataSetName(data)) {
    return;
  }
  if (record.contains("bbox") && record["bbox"].is_boolean()) {
    settings.Check("--bbox", &source->bbox, record["bbox"].get<bool>());
  }
  if (record.contains("class_split") && record["class_split"].is_number_integer()) {
    // Queries default to the gallery's classes; another split is a choice.
    if (ingest) {
      settings.Check("--class-split", &source->class_split, record["class_split"].get<int64_t>());
    } else {
      settings.Default("--class-split", &source->class_split, record["class_split"].get<int64_t>());
    }
  }
}

// The spec of `collection` if the database and the collection exist.
bool ExistingCollection(const std::string& db_path, const std::string& collection,
                        CollectionSpec* spec) {
  std::error_code ec;
  if (!fs::is_directory(db_path, ec)) return false;
  std::unique_ptr<DB> db = OpenDatabase(db_path, /*create_if_missing=*/false);
  std::vector<std::string> names;
  Check(db->ListCollections(&names));
  if (std::find(names.begin(), names.end(), collection) == names.end()) return false;
  *spec = DescribeOrFail(*db, collection);
  return true;
}

// The pipeline options the model, source and --on-error flags set.
void SetBatchOptions(const ModelArgs& model, const SourceArgs& source, const std::string& on_error,
                     datasets::ImageBatchOptions* options) {
  if (!datasets::ParseImageFit(model.fit, &options->fit)) UsageError("unknown --fit " + model.fit);
  options->crop_to_box = source.bbox;
  options->batch_size = model.batch_size;
  options->skip_bad_images = on_error == "skip";
}

// Progress bars for the pipeline's stages, one at a time.
datasets::ImageProgressFn ProgressBars(bool enabled, const std::string& label) {
  if (!enabled) return nullptr;
  auto bar = std::make_shared<std::unique_ptr<ProgressBar>>();
  auto stage = std::make_shared<std::string>();
  return [bar, stage, label](const char* name, int64_t done, int64_t total) {
    if (*bar == nullptr || *stage != name) {
      *stage = name;
      *bar = std::make_unique<ProgressBar>(*stage == "checking" ? "checking" : label, total, true);
    }
    (*bar)->Update(done);
  };
}

// ---------------------------------------------------------------- ingest-images

struct IngestImagesArgs {
  std::string db, collection, on_error = "abort", index, existing = "skip";
  SourceArgs source;
  ModelArgs model;
};

void RunIngestImages(IngestImagesArgs& args, const CLI::App& cmd) {
  const Clock::time_point start = Clock::now();
  const datasets::ImageEncoder encoder = LoadModelOrFail(args.model);
  ApplyModelSettings(cmd, encoder.spec, args.model.model, &args.source, &args.model);
  CollectionSpec existing;
  if (ExistingCollection(args.db, args.collection, &existing)) {
    ApplyCollectionRecord(cmd, existing, /*ingest=*/true, &args.source, &args.model);
  }
  const ImageSource source = LoadSourceOrFail(args.source);
  datasets::IngestImagesOptions options;
  SetBatchOptions(args.model, args.source, args.on_error, &options);
  options.index_factory = args.index;
  options.metadata = ImageRecordText(args.source, args.model);
  if (!datasets::ParseExistingImages(args.existing, &options.existing)) {
    UsageError("unknown --existing " + args.existing);
  }
  options.db_options.create_if_missing = true;
  options.progress = ProgressBars(!args.model.no_progress, "ingest-images");
  const bool skip = options.skip_bad_images;
  options.on_bad_image = [skip](const datasets::ImageError& e) {
    std::fprintf(stderr, "%shedgedb: %s: %s\n", skip && ::isatty(2) ? "\n" : "",
                 skip ? "skipped" : "bad image", WithFlags(e.message).c_str());
  };
  datasets::IngestImagesResult result;
  const Status s =
      datasets::IngestImages(args.db, args.collection, encoder, source, options, &result);
  if (!s.ok()) Fail(WithFlags(s.message()));
  json skipped = json::array();
  for (const datasets::ImageError& e : result.skipped) {
    json j;
    j["image"] = source.entries[e.entry].Name();
    j["error"] = WithFlags(e.message);
    skipped.push_back(std::move(j));
  }
  json out;
  out["collection"] = args.collection;
  out["created"] = result.created;
  // Searches report prob: a new collection from a model that carries a
  // calibration map starts calibrated; an existing one keeps its own map.
  out["calibrated"] = result.calibrated;
  if (result.calibrated && result.created) {
    out["calibration"] = {{"score", ScoreName(encoder.calibration.info.score)},
                          {"method", encoder.calibration.info.method},
                          {"base_rate", encoder.calibration.info.base_rate}};
    std::fprintf(stderr, "hedgedb: collection '%s' starts calibrated (%s map from the model)\n",
                 args.collection.c_str(), encoder.calibration.info.method.c_str());
  }
  if (!result.calibration_note.empty()) {
    std::fprintf(stderr, "hedgedb: note: %s\n", result.calibration_note.c_str());
  }
  out["images"] = result.images;
  out["ingested"] = result.ingested;
  out["already_present"] = result.already_present;
  if (result.already_present > 0) {
    std::fprintf(
        stderr, "hedgedb: %lld of the images are in collection '%s' already: %s\n",
        static_cast<long long>(result.already_present), args.collection.c_str(),
        result.ingested > 0 ? "skipped them, ingested the others" : "nothing new to ingest");
  }
  out["first_id"] = result.first_id;
  out["last_id"] = result.last_id;
  out["batches"] = result.batches;
  out["skipped"] = std::move(skipped);
  out["seconds"] = std::round(SecondsSince(start) * 1000.0) / 1000.0;
  PrintJsonLine(out);
}

void RegisterIngestImages(CLI::App& app) {
  auto args = std::make_shared<IngestImagesArgs>();
  CLI::App* cmd = app.add_subcommand("ingest-images", EncoderCommandDescription("ingest-images"));
  cmd->footer(
      "Creates the collection from the model (kind, dimensions, match a/b) if it does not exist, "
      "and checks that an existing one matches. A new collection starts calibrated when the "
      "model file carries a calibration map (train fits one on its validation split); an "
      "existing collection keeps its own. Images are decoded, checked, embedded and "
      "ingested in batches of --batch-size; each batch is one atomic write. Every item's "
      "payload is JSON: {\"path\": ABSOLUTE_PATH, \"label_name\": FOLDER_OR_LABEL} "
      "({\"path\": IDX_FILE, \"index\": I} for IDX images); labels come from subfolder names or "
      "the list file (a decimal name is the label itself). --cub ROOT and --data cub:ROOT are "
      "the same (likewise cars).\n"
      "Bad images (missing, unreadable, corrupt or truncated, wrong size or channels under "
      "--fit exact) are named on stderr. --on-error abort (default): every image is checked "
      "before anything is written, so one bad image fails the command and leaves the database "
      "unchanged. --on-error skip: bad images are skipped and listed in the summary's "
      "\"skipped\" field; the others are ingested.\n"
      "Prints {\"ingested\": N, \"first_id\", \"last_id\", \"skipped\": [...], "
      "\"calibrated\": BOOL, ...}.");
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
  cmd->add_option("--existing", args->existing,
                  "An image the collection holds already (same path): skip it (re-running an "
                  "ingest adds nothing twice), refuse (fail, write nothing) or add it again")
      ->capture_default_str()
      ->check(CLI::IsMember({"skip", "refuse", "add"}));
  cmd->callback([args, cmd] { RunIngestImages(*args, *cmd); });
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

// Payload fields of a hit: the image path etc. of an image item's payload
// (datasets/image_set.h), or the plain payload.
void AddPayloadFields(const std::string& payload, json* hit) {
  if (payload.empty()) return;
  datasets::ImagePayload fields;
  if (datasets::ParseImagePayload(payload, &fields)) {
    (*hit)["path"] = fields.path;
    if (fields.index >= 0) (*hit)["index"] = fields.index;
    if (!fields.label_name.empty()) (*hit)["label_name"] = fields.label_name;
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

json SummaryJson(const datasets::QueryImagesResult& r) {
  json j;
  j["queries"] = r.queries;
  if (r.with_uncertainty > 0) j["mean_query_uncertainty"] = r.mean_query_uncertainty;
  j["labelled_queries"] = r.labelled;
  if (r.skipped > 0) j["skipped"] = r.skipped;
  for (size_t i = 0; i < r.recall_at_k.size(); ++i) {
    j["recall_at_" + std::to_string(r.recall_ks[i])] = r.recall_at_k[i];
  }
  return j;
}

void PrintTable(int64_t q, const datasets::ImageEntry& query, const SearchResult& result,
                const json& hits, const std::string& score_name) {
  std::printf("query %lld  %s", static_cast<long long>(q), DisplayPath(query.Name()).c_str());
  if (query.has_label) std::printf("  label %lld", static_cast<long long>(query.label));
  std::printf("  uncertainty %s\n", FormatNumber(result.query_uncertainty).c_str());
  std::printf("  %4s %8s %11s %7s %11s %8s  %s\n", "rank", "id", score_name.c_str(), "prob",
              "uncertainty", "label", "path");
  for (size_t r = 0; r < result.hits.size(); ++r) {
    const SearchHit& hit = result.hits[r];
    const json& h = hits[r];
    std::string where = h.contains("path") ? DisplayPath(h["path"].get<std::string>()) : "";
    if (h.contains("index")) where += "[" + h["index"].dump() + "]";
    if (h.contains("payload")) where = h["payload"].get<std::string>();
    std::printf("  %4zu %8lld %11s %7s %11s %8s  %s\n", r + 1, static_cast<long long>(hit.id),
                FormatNumber(hit.score).c_str(), FormatNumber(hit.prob, "%.3f").c_str(),
                FormatNumber(hit.uncertainty).c_str(),
                hit.has_label ? std::to_string(hit.label).c_str() : "-", where.c_str());
  }
  std::printf("\n");
}

void PrintAnswer(const datasets::ImageAnswer& a, const std::string& format,
                 const std::string& score_name) {
  const datasets::ImageEntry& query = *a.image;
  if (a.error != nullptr) {
    if (format == "json") {
      json j;
      j["query"] = a.query;
      j["image"] = query.Name();
      j["error"] = WithFlags(a.error->message);
      PrintJsonLine(j);
    } else if (format == "table") {
      std::printf("query %lld  %s  skipped: %s\n\n", static_cast<long long>(a.query),
                  DisplayPath(query.Name()).c_str(), WithFlags(a.error->message).c_str());
    }
    return;
  }
  if (format == "summary") return;
  json hits = json::array();
  for (const SearchHit& hit : a.result.hits) {
    json h;
    h["id"] = hit.id;
    h["score"] = JsonFloat(hit.score);
    if (!std::isnan(hit.uncertainty)) h["uncertainty"] = JsonFloat(hit.uncertainty);
    if (!std::isnan(hit.prob)) h["prob"] = JsonFloat(hit.prob);
    if (hit.has_label) h["label"] = hit.label;
    AddPayloadFields(hit.payload, &h);
    hits.push_back(std::move(h));
  }
  if (format == "json") {
    json j;
    j["query"] = a.query;
    j["image"] = query.Name();
    if (query.has_label) j["label"] = query.label;
    if (!std::isnan(a.result.query_uncertainty)) {
      j["query_uncertainty"] = JsonFloat(a.result.query_uncertainty);
    }
    j["results"] = std::move(hits);
    PrintJsonLine(j);
  } else {
    PrintTable(a.query, query, a.result, hits, score_name);
  }
}

void RunQueryImage(QueryImageArgs& args, const CLI::App& cmd) {
  datasets::QueryImagesOptions options;
  options.search = ResolveSearchFlags(args.search);
  const datasets::ImageEncoder encoder = LoadModelOrFail(args.model);
  ApplyModelSettings(cmd, encoder.spec, args.model.model, &args.source, &args.model);
  std::unique_ptr<DB> db = OpenDatabase(args.db, /*create_if_missing=*/false);
  const CollectionSpec spec = DescribeOrFail(*db, args.collection);
  ApplyCollectionRecord(cmd, spec, /*ingest=*/false, &args.source, &args.model);
  const ImageSource source = LoadSourceOrFail(args.source);
  SetBatchOptions(args.model, args.source, args.on_error, &options);
  options.exclude_self = args.exclude_self;
  options.progress =
      ProgressBars(!args.model.no_progress && args.format == "summary", "query-image");
  options.on_bad_image = [&options](const datasets::ImageError& e) {
    if (options.skip_bad_images) {
      std::fprintf(stderr, "%shedgedb: skipped: %s\n", ::isatty(2) ? "\n" : "",
                   WithFlags(e.message).c_str());
    }
  };
  const ScoreType score = ResolveScore(spec.kind, options.search.score);
  // "raw": the score before calibration, even where it lies in [0, 1] (mc,
  // match); `prob` is the calibrated probability a user acts on.
  const std::string score_name = std::string("raw ") + ScoreName(score);
  datasets::QueryImagesResult summary;
  const Status s = datasets::QueryImages(
      *db, args.collection, encoder, source, options,
      [&](const datasets::ImageAnswer& a) { PrintAnswer(a, args.format, score_name); }, &summary);
  if (!s.ok()) Fail(WithFlags(s.message()));
  if (args.format == "summary") {
    PrintJsonLine(SummaryJson(summary));
  } else if (args.format == "table") {
    std::printf("%lld %s", static_cast<long long>(summary.queries),
                summary.queries == 1 ? "query" : "queries");
    if (summary.skipped > 0)
      std::printf(" (%lld skipped)", static_cast<long long>(summary.skipped));
    if (summary.with_uncertainty > 0) {
      std::printf(", mean query uncertainty %s",
                  FormatNumber(summary.mean_query_uncertainty).c_str());
    }
    if (summary.labelled > 0) {
      for (size_t i = 0; i < summary.recall_ks.size(); ++i) {
        std::printf(", recall@%d %s", summary.recall_ks[i],
                    FormatNumber(summary.recall_at_k[i], "%.3f").c_str());
      }
      std::printf(" (%lld labelled)", static_cast<long long>(summary.labelled));
    }
    std::printf("\n");
  }
}

void RegisterQueryImage(CLI::App& app) {
  auto args = std::make_shared<QueryImageArgs>();
  args->search.options.k = 5;
  CLI::App* cmd = app.add_subcommand("query-image", EncoderCommandDescription("query-image"));
  cmd->footer(
      "Queries: IMAGE arguments, or --dir/--list/--idx, or the images of --split of --cub ROOT / "
      "--cars ROOT (labelled queries add recall@1 and recall@k to the summary). The images are "
      "read as the collection's were (its record of --fit, --bbox) unless flags say "
      "otherwise; a --bbox that contradicts the gallery's is an error. Output per query (--format "
      "json): {\"query\": i, \"image\": "
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
      ->check(Positive());
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
  cmd->callback([args, cmd] { RunQueryImage(*args, *cmd); });
}

// ---------------------------------------------------------------- export-images

struct ExportImagesArgs {
  datasets::DataOptions data;
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
  Check(datasets::LoadEncoderData(args.data, &data));
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
    Check(datasets::WriteImageFile((folder / name).string(), image, channels, rows, cols));
    if (args.corrupt) {
      char line[96];
      std::snprintf(line, sizeof(line), "%lld/%s,%lld,%.4f\n", static_cast<long long>(label), name,
                    static_cast<long long>(label),
                    datasets::HiddenFraction(clean.data() + i * floats, image, floats));
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
  CLI::App* cmd = app.add_subcommand("export-images", EncoderCommandDescription("export-images"));
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
  cmd->add_option("--composite-layout", args->data.composite_layout,
                  "reference, hib or hib-scaled (as in train)")
      ->capture_default_str()
      ->check(CLI::IsMember({"reference", "hib", "hib-scaled"}));
  cmd->add_option("--train-total", args->data.train_total, "Training composites (as in train)")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--test-total", args->data.test_total, "Composites per test split")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--data-seed", args->data.seed, "Seed of the class split and occlusions")
      ->capture_default_str();
  cmd->add_option("--split", args->split, "train, test, test-seen or test-unseen")
      ->capture_default_str();
  cmd->add_flag("--corrupt", args->corrupt, "Write the corrupt (occluded) twins");
  cmd->add_option("--offset", args->offset, "First item of the permutation")
      ->capture_default_str()
      ->check(NonNegative());
  cmd->add_option("--count", args->count, "Number of images")
      ->capture_default_str()
      ->check(Positive());
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
