#include "tools/cli_util.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <tuple>

#include "tools/payload_text.h"

namespace hedgedb {
namespace cli {

void Fail(const std::string& message) { throw CommandError(message, kFailureExitCode); }

void UsageError(const std::string& message) { throw CommandError(message, kUsageExitCode); }

std::string NameFlags(const std::string& message, const std::map<std::string, std::string>& flags) {
  std::string out;
  for (size_t i = 0; i < message.size();) {
    size_t end = i;
    while (end < message.size() &&
           (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '_')) {
      ++end;
    }
    if (end == i) {
      out += message[i++];
      continue;
    }
    // Whole words of the prose only: not parts of paths or values
    // ("/tmp/out/m.hdbm", "'lr'").
    const auto ends_prose = [&](size_t at) {
      return at == message.size() || std::string(" ,):").find(message[at]) != std::string::npos;
    };
    const bool starts_prose = i == 0 || message[i - 1] == ' ' || message[i - 1] == '(';
    const bool prose = starts_prose && ends_prose(end);
    const std::string word = message.substr(i, end - i);
    // An option given a value ("fit resize", "layout hib-scaled",
    // "source cub:ROOT"): the pair is the key.
    if (prose && end < message.size() && message[end] == ' ') {
      size_t value_end = end + 1;
      while (value_end < message.size() &&
             (std::isalnum(static_cast<unsigned char>(message[value_end])) ||
              message[value_end] == '_' || message[value_end] == '-')) {
        ++value_end;
      }
      const auto pair = value_end > end + 1 && ends_prose(value_end)
                            ? flags.find(message.substr(i, value_end - i))
                            : flags.end();
      if (pair != flags.end()) {
        out += pair->second;
        i = value_end;
        continue;
      }
    }
    // And used as an option's name: a name with '_' is one wherever it
    // stands; a plain word only where the message states a rule of it
    // ("lr must be > 0", "out (the output model path) is required",
    // "components > 1 ...", "... not dim"), not in "header length out of
    // range" or "TorchScript backbone '...' does not exist".
    const std::string rest = message.substr(end, 16);
    bool named = word.find('_') != std::string::npos || end == message.size();
    for (const char* after : {" must", " (", " is required", " needs", " >", " and ", " applies"}) {
      named = named || rest.rfind(after, 0) == 0;
    }
    const auto flag = prose && named ? flags.find(word) : flags.end();
    out += flag == flags.end() ? word : flag->second;
    i = end;
  }
  return out;
}

std::string WithFlags(const std::string& message) {
  // The library names its options (the fields of its options structs);
  // these read the same on the command line as flags. Only names no prose
  // word could be, and options given a value: plain words are named by the
  // command that has them (WithTrainFlags). DataOptions::items is not here
  // ("70 classes of 1428 items (...)"): --items is range-checked by the flag
  // itself, so the library's "items must be in [1, 4]" never reaches a
  // command.
  static const std::map<std::string, std::string> kFlags = {
      {"conformal_fraction", "--conformal-fraction"},
      {"match_parameters", "--match-parameters"},
      {"max_pairs", "--max-pairs"},
      {"top_ranks", "--top-ranks"},
      {"val_fraction", "--val-fraction"},
      // Data sets: datasets::DataOptions, CompositeConfig and the readers'
      // class_split.
      {"bbox", "--bbox"},
      {"class_split", "--class-split"},
      {"composite_layout", "--composite-layout"},
      {"image_size", "--image-size"},
      {"num_positions", "--items"},
      {"train_occlusion", "--train-occlusion"},
      {"train_total", "--train-total"},
      {"test_total", "--test-total"},
      {"layout reference", "--composite-layout reference"},
      {"layout hib-scaled", "--composite-layout hib-scaled"},
      {"source cub", "--data cub"},
      {"source cars", "--data cars"},
      {"source folder", "--data folder"},
      {"source idx", "--data idx"},
      {"source features", "--data features"},
      // Image files: datasets::ImageBatchOptions and IngestImagesOptions.
      {"fit resize", "--fit resize"},
      {"fit crop", "--fit crop"},
      {"skip_bad_images", "--on-error skip"},
      {"existing skip", "--existing skip"},
      {"existing add", "--existing add"}};
  return NameFlags(message, kFlags);
}

void Check(const Status& status) {
  if (!status.ok()) Fail(WithFlags(status.ToString()));
}

std::unique_ptr<DB> OpenDatabase(const std::string& dir, bool create_if_missing, Access access) {
  if (!create_if_missing) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      Fail("no database at '" + dir + "' (run 'hedgedb create' first)");
    }
  }
  Options options;
  options.create_if_missing = create_if_missing;
  options.read_only = access == Access::kReadOnly;
  options.on_warning = [](const std::string& warning) {
    std::fprintf(stderr, "hedgedb: warning: %s\n", warning.c_str());
  };
  std::unique_ptr<DB> db;
  const Status s = DB::Open(options, dir, &db);
  // One process at a time opens a database for writing (DB::Open says which
  // holds it); name the way out that this command has.
  if (s.IsIOError() && s.message().find("is locked by another process") != std::string::npos) {
    Fail(s.ToString() + (access == Access::kRead
                             ? " (add --read-only to this command)"
                             : " (stop that process first; read commands take --read-only)"));
  }
  Check(s);
  return db;
}

CollectionSpec DescribeOrFail(DB& db, const std::string& collection) {
  CollectionSpec spec;
  Check(db.DescribeCollection(collection, &spec));
  return spec;
}

NpyArray ReadNpyOrFail(const std::string& path) {
  NpyArray array;
  // ReadNpy's messages already start with the path.
  const Status s = ReadNpy(path, &array);
  if (!s.ok()) Fail(s.message());
  return array;
}

std::vector<int64_t> ReadInts(const std::string& path, const std::string& what,
                              std::vector<int64_t>* shape) {
  const NpyArray array = ReadNpyOrFail(path);
  *shape = array.shape;
  std::vector<int64_t> out;
  Check(NpyToInt64(array, path + " (" + what + ")", &out));
  return out;
}

std::vector<int64_t> ReadIntVector(const std::string& path, const std::string& what, int64_t n) {
  std::vector<int64_t> shape;
  std::vector<int64_t> values = ReadInts(path, what, &shape);
  if (shape.size() != 1 || (n >= 0 && shape[0] != n)) {
    const std::string expected = n >= 0 ? NpyShapeString({n}) : std::string("(N,)");
    Fail(path + ": " + what + " must have shape " + expected + ", got " + NpyShapeString(shape));
  }
  return values;
}

void AddPayloadJson(const std::string& payload, nlohmann::json* j) {
  if (payload.empty()) return;
  if (IsValidUtf8(payload)) {
    (*j)["payload"] = payload;
  } else {
    (*j)["payload_base64"] = Base64Encode(payload);
  }
}

std::vector<std::string> ReadPayloadLines(const std::string& path, int64_t n, bool base64) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path + ": cannot open the payload file");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  std::string problem;
  if (!SplitPayloadLines(text, base64, &lines, &problem)) Fail(path + ": " + problem);
  if (static_cast<int64_t>(lines.size()) != n) {
    Fail(path + ": expected " + std::to_string(n) + " payload lines (one per item), got " +
         std::to_string(lines.size()));
  }
  return lines;
}

namespace {

// A flag's name as the command registered it (EmbeddingFiles::flag_prefix).
std::string FlagName(const EmbeddingFiles& files, const std::string& flag) {
  return "--" + files.flag_prefix + flag.substr(2);
}

}  // namespace

void AddEmbeddingOptions(CLI::App* cmd, EmbeddingFiles* files, bool for_query,
                         const std::string& prefix) {
  files->flag_prefix = prefix;
  const auto flag = [&prefix](const char* name) { return "--" + prefix + name; };
  cmd->add_option(flag("vec"), files->vec, "point: vectors, N x D float32/float64 .npy");
  cmd->add_option(flag("mean"), files->mean,
                  "gaussian: means, N x D; mog: component means, N x C x D (.npy)");
  cmd->add_option(flag("var"), files->var,
                  "gaussian/mog: diagonal variances (> 0), same shape as " + flag("mean") +
                      " (.npy); or give " + flag("std") + ", " + flag("log-var") + " or " +
                      flag("log-std") + " instead");
  cmd->add_option(flag("std"), files->std,
                  "gaussian/mog: standard deviations (> 0) instead of " + flag("var"));
  cmd->add_option(flag("log-var"), files->log_var,
                  "gaussian/mog: log variances (PFE's log_sigma_sq) instead of " + flag("var"));
  cmd->add_option(flag("log-std"), files->log_std,
                  "gaussian/mog: log standard deviations (PCME++) instead of " + flag("var"));
  cmd->add_option(flag("weights"), files->weights,
                  "mog: component weights, N x C (.npy; default uniform 1/C)");
  if (for_query) {
    cmd->add_option(flag("logp"), files->logp,
                    "codes: query tables, Q x d x k natural-log probabilities (.npy)");
  } else {
    cmd->add_option(flag("codes"), files->codes,
                    "codes: DIMCO codes, N x d integers in [0, k) (.npy, any integer type)");
  }
}

void LoadedEmbeddings::Load(const EmbeddingFiles& files, const CollectionSpec& spec,
                            bool for_query) {
  view_ = EmbeddingView();
  // The variances come in one of four forms; the file given is read as the
  // var array in its form (hedgedb/arrays.h converts it once).
  EmbeddingArrays arrays;
  std::string var_path, var_flag = "--var";
  int forms = 0;
  for (const auto& [flag, path, form] :
       {std::tuple{"--var", &files.var, VarianceForm::kVar},
        std::tuple{"--std", &files.std, VarianceForm::kStd},
        std::tuple{"--log-var", &files.log_var, VarianceForm::kLogVar},
        std::tuple{"--log-std", &files.log_std, VarianceForm::kLogStd}}) {
    if (path->empty()) continue;
    ++forms;
    var_path = *path;
    var_flag = flag;
    arrays.var_form = form;
  }
  if (forms > 1) {
    UsageError("give the variances once: " + FlagName(files, "--var") + ", " +
               FlagName(files, "--std") + ", " + FlagName(files, "--log-var") + " or " +
               FlagName(files, "--log-std"));
  }
  struct File {
    EmbeddingArray* array;
    const char* flag;
    const std::string* path;
  };
  const File all[] = {
      {&arrays.vec, "--vec", &files.vec},         {&arrays.mean, "--mean", &files.mean},
      {&arrays.var, var_flag.c_str(), &var_path}, {&arrays.weights, "--weights", &files.weights},
      {&arrays.codes, "--codes", &files.codes},   {&arrays.logp, "--logp", &files.logp}};
  for (const File& f : all) {
    f.array->given = !f.path->empty();
    f.array->name = FlagName(files, f.flag);
  }
  const std::string subject =
      std::string(for_query ? "queries of " : "items of ") +
      (spec.name.empty() ? std::string("a ") + KindName(spec.kind) + " collection"
                         : "collection '" + spec.name + "'");
  // Flags the kind does not take, or a missing one: usage errors, before
  // any file is read.
  const Status given = CheckEmbeddingArraysGiven(spec.kind, for_query, arrays, subject);
  if (!given.ok()) UsageError(given.message());
  std::vector<float>* floats[] = {&vec_, &mean_, &var_, &weights_, nullptr, &logp_};
  for (size_t i = 0; i < 6; ++i) {
    const File& f = all[i];
    if (!f.array->given) continue;
    f.array->name = *f.path + " (" + f.array->name + ")";
    const NpyArray npy = ReadNpyOrFail(*f.path);
    f.array->shape = npy.shape;
    if (floats[i] == nullptr) {  // codes: integers that fit int32 (symbols: the engine checks)
      Check(NpyToInt32(npy, f.array->name, &codes_));
      f.array->ints = codes_.data();
    } else {
      Check(NpyToFloat32(npy, f.array->name, floats[i]));
      f.array->floats = floats[i]->data();
    }
  }
  const Status s =
      EmbeddingViewFromArrays(spec, for_query, arrays, subject, &converted_var_, &view_);
  if (!s.ok()) {
    // The component count is the collection's (create --components, default
    // 1), which other tools choose otherwise (generate: 4): say so.
    Fail(s.message() + (spec.kind == Kind::kMog ? " (a " + std::to_string(spec.components) +
                                                      "-component collection: create --components)"
                                                : std::string()));
  }
}

namespace {

// Writes the fields hedgedb/fields.h visits into a JSON object. What the
// commands show of them: numbers that are not finite become null, floats
// their shortest text, empty text is left out (a note, metadata or
// conditioned_on that says nothing), and with `kind` set, the spec fields
// that do not apply to it (SpecFieldApplies).
struct JsonFields {
  nlohmann::json* j;
  const Kind* kind = nullptr;
  void operator()(const char* name, double v) const {
    (*j)[name] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  }
  void operator()(const char* name, float v) const {
    if (!kind || SpecFieldApplies(*kind, name)) (*j)[name] = JsonFloat(v);
  }
  void operator()(const char* name, int64_t v) const {
    if (!kind || SpecFieldApplies(*kind, name)) (*j)[name] = v;
  }
  void operator()(const char* name, uint64_t v) const { (*j)[name] = v; }
  void operator()(const char* name, bool v) const { (*j)[name] = v; }
  void operator()(const char* name, const std::string& v) const {
    if (!v.empty() && (!kind || SpecFieldApplies(*kind, name))) (*j)[name] = v;
  }
  void operator()(const char* name, Kind v) const { (*j)[name] = KindName(v); }
  void operator()(const char* name, ScoreType v) const { (*j)[name] = ScoreName(v); }
  void operator()(const char* name, const CalibrationQuality& v) const { (*j)[name] = Object(v); }
  // Lists of structs (eta quartiles, stored maps): an object each, without
  // the spec filter.
  template <typename T>
  void operator()(const char* name, const std::vector<T>& items) const {
    nlohmann::json array = nlohmann::json::array();
    for (const T& item : items) array.push_back(Object(item));
    (*j)[name] = std::move(array);
  }
  template <typename T>
  static nlohmann::json Object(const T& v) {
    nlohmann::json out = nlohmann::json::object();
    VisitFields(v, JsonFields{&out});
    return out;
  }
};

}  // namespace

nlohmann::json SpecDisplayJson(const CollectionSpec& spec) {
  nlohmann::json j = nlohmann::json::object();
  VisitFields(spec, JsonFields{&j, &spec.kind});
  return j;
}

nlohmann::json StatsToJson(const CollectionStats& stats) {
  nlohmann::json j = nlohmann::json::object();
  VisitFields(stats, JsonFields{&j, &stats.spec.kind});
  return j;
}

nlohmann::json CalibrationInfoToJson(const CalibrationInfo& info) {
  return JsonFields::Object(info);
}

nlohmann::json CalibrationQualityToJson(const CalibrationQuality& q) {
  return JsonFields::Object(q);
}

nlohmann::json CalibrationReportToJson(const CalibrationReport& report) {
  return JsonFields::Object(report);
}

nlohmann::json RecordToJson(const Record& record, const CollectionSpec& spec) {
  nlohmann::json j;
  j["id"] = record.id;
  j["found"] = record.found;
  if (!record.found) return j;
  if (record.has_label) j["label"] = record.label;
  AddPayloadJson(record.payload, &j);
  const size_t d = static_cast<size_t>(spec.dim);
  switch (spec.kind) {
    case Kind::kPoint:
      j["vec"] = JsonFloats(record.vec.data(), record.vec.size());
      break;
    case Kind::kGaussian:
      j["mean"] = JsonFloats(record.mean.data(), record.mean.size());
      j["var"] = JsonFloats(record.var.data(), record.var.size());
      break;
    case Kind::kMog:
      j["weights"] = JsonFloats(record.weights.data(), record.weights.size());
      j["mean"] = JsonFloatMatrix(record.mean.data(), d ? record.mean.size() / d : 0, d);
      j["var"] = JsonFloatMatrix(record.var.data(), d ? record.var.size() / d : 0, d);
      break;
    case Kind::kCodes:
      j["codes"] = record.codes;
      break;
  }
  return j;
}

nlohmann::json SearchResultToJson(int64_t query, const SearchResult& result) {
  nlohmann::json j;
  j["query"] = query;
  if (!std::isnan(result.query_uncertainty)) {
    j["query_uncertainty"] = JsonFloat(result.query_uncertainty);
  }
  nlohmann::json hits = nlohmann::json::array();
  for (const SearchHit& hit : result.hits) {
    nlohmann::json h;
    h["id"] = hit.id;
    h["score"] = JsonFloat(hit.score);
    if (!std::isnan(hit.uncertainty)) h["uncertainty"] = JsonFloat(hit.uncertainty);
    if (!std::isnan(hit.prob)) h["prob"] = JsonFloat(hit.prob);
    if (!std::isnan(hit.std_error)) h["std_error"] = JsonFloat(hit.std_error);
    if (hit.samples > 0) h["samples"] = hit.samples;
    if (hit.has_label) h["label"] = hit.label;
    AddPayloadJson(hit.payload, &h);
    hits.push_back(std::move(h));
  }
  j["results"] = std::move(hits);
  if (result.truncated) j["truncated"] = true;
  if (result.passing >= 0) j["passing"] = result.passing;
  return j;
}

void PrintJsonLine(const nlohmann::json& value) {
  const std::string text =
      value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
}

}  // namespace cli
}  // namespace hedgedb
