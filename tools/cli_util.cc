#include "tools/cli_util.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
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

void Check(const Status& status) {
  if (!status.ok()) Fail(status.ToString());
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

void CheckShape(const NpyArray& array, const std::string& path, const std::string& what,
                const std::vector<int64_t>& expected) {
  if (array.shape != expected) {
    Fail(path + ": " + what + " must have shape " + NpyShapeString(expected) + ", got " +
         NpyShapeString(array.shape));
  }
}

std::vector<float> ReadFloatRows(const std::string& path, const std::string& what, int64_t* rows,
                                 const std::vector<int64_t>& row_shape) {
  const NpyArray array = ReadNpyOrFail(path);
  if (*rows < 0 && !array.shape.empty()) *rows = array.shape[0];
  std::vector<int64_t> expected = {*rows < 0 ? 0 : *rows};
  expected.insert(expected.end(), row_shape.begin(), row_shape.end());
  if (*rows < 0) {
    // A 0-d array: report it against the row shape the kind needs.
    std::string wanted = "(N";
    for (int64_t dim : row_shape) wanted += ", " + std::to_string(dim);
    Fail(path + ": " + what + " must have shape " + wanted + "), got " +
         NpyShapeString(array.shape));
  }
  CheckShape(array, path, what, expected);
  std::vector<float> out;
  Check(NpyToFloat32(array, path + " (" + what + ")", &out));
  return out;
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

void RequireFlags(const char* kind, const std::vector<std::pair<const char*, bool>>& allowed,
                  const EmbeddingFiles& files, bool for_query) {
  // --std, --log-var and --log-std stand for --var (LoadedEmbeddings::Load).
  const std::vector<std::pair<const char*, const std::string*>> given = {
      {"--vec", &files.vec},         {"--mean", &files.mean},   {"--var", &files.var},
      {"--weights", &files.weights}, {"--codes", &files.codes}, {"--logp", &files.logp}};
  std::string usage;
  for (const auto& [flag, required] : allowed) {
    usage += std::string(usage.empty() ? "" : " ") + (required ? "" : "[") + FlagName(files, flag) +
             " FILE" + (required ? "" : "]");
  }
  const std::string what =
      std::string(for_query ? "queries of a " : "items of a ") + kind + " collection take " + usage;
  for (const auto& [flag, path] : given) {
    bool is_allowed = false, is_required = false;
    for (const auto& [allowed_flag, required] : allowed) {
      if (std::string(allowed_flag) == flag) {
        is_allowed = true;
        is_required = required;
      }
    }
    if (!path->empty() && !is_allowed)
      UsageError(FlagName(files, flag) + " does not apply: " + what);
    if (path->empty() && is_required) UsageError(FlagName(files, flag) + " is missing: " + what);
  }
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

void LoadedEmbeddings::Load(const EmbeddingFiles& given_files, const CollectionSpec& spec,
                            bool for_query) {
  view_ = EmbeddingView();
  // The variances come in one of four forms; the file is read as --var and
  // converted once (ToVariance).
  EmbeddingFiles files = given_files;
  VarianceForm form = VarianceForm::kVar;
  std::string variance_flag = FlagName(files, "--var");
  int forms = 0;
  for (const auto& [flag, path, f] :
       {std::tuple{"--var", &given_files.var, VarianceForm::kVar},
        std::tuple{"--std", &given_files.std, VarianceForm::kStd},
        std::tuple{"--log-var", &given_files.log_var, VarianceForm::kLogVar},
        std::tuple{"--log-std", &given_files.log_std, VarianceForm::kLogStd}}) {
    if (path->empty()) continue;
    ++forms;
    files.var = *path;
    form = f;
    variance_flag = FlagName(files, flag);
  }
  if (forms > 1) {
    UsageError("give the variances once: " + FlagName(files, "--var") + ", " +
               FlagName(files, "--std") + ", " + FlagName(files, "--log-var") + " or " +
               FlagName(files, "--log-std"));
  }
  const auto convert = [&](int64_t n, int64_t per_item) {
    if (form == VarianceForm::kVar) return;
    const Status s = ToVariance(form, var_.data(), n, per_item, var_.data());
    if (!s.ok()) Fail(files.var + " (" + variance_flag + "): " + s.message());
  };
  const int64_t d = spec.dim;
  const int64_t c = spec.components;
  // The first file fixes the number of rows; the others must agree with it.
  int64_t n = -1;
  switch (spec.kind) {
    case Kind::kPoint:
      RequireFlags("point", {{"--vec", true}}, files, for_query);
      vec_ = ReadFloatRows(files.vec, "vectors", &n, {d});
      view_.vec = vec_.data();
      break;
    case Kind::kGaussian:
      RequireFlags("gaussian", {{"--mean", true}, {"--var", true}}, files, for_query);
      mean_ = ReadFloatRows(files.mean, "means", &n, {d});
      var_ = ReadFloatRows(files.var, "variances", &n, {d});
      convert(n, d);
      view_.mean = mean_.data();
      view_.var = var_.data();
      break;
    case Kind::kMog: {
      RequireFlags("mog", {{"--mean", true}, {"--var", true}, {"--weights", false}}, files,
                   for_query);
      // The component count is the collection's (create --components, default
      // 1), which other tools choose otherwise (generate: 4): say so.
      const std::string of =
          " of a " + std::to_string(c) + "-component collection (create --components)";
      mean_ = ReadFloatRows(files.mean, "component means" + of, &n, {c, d});
      var_ = ReadFloatRows(files.var, "component variances" + of, &n, {c, d});
      convert(n, c * d);
      view_.mean = mean_.data();
      view_.var = var_.data();
      if (!files.weights.empty()) {
        weights_ = ReadFloatRows(files.weights, "component weights" + of, &n, {c});
        view_.weights = weights_.data();
      }
      break;
    }
    case Kind::kCodes:
      if (for_query) {
        RequireFlags("codes", {{"--logp", true}}, files, for_query);
        logp_ = ReadFloatRows(files.logp, "log-probability tables", &n, {d, spec.code_k});
        view_.logp = logp_.data();
      } else {
        RequireFlags("codes", {{"--codes", true}}, files, for_query);
        std::vector<int64_t> shape;
        const std::vector<int64_t> codes = ReadInts(files.codes, "codes", &shape);
        n = shape.empty() ? 0 : shape[0];
        if (shape.size() != 2 || shape[1] != d) {
          Fail(files.codes + ": codes must have shape " + NpyShapeString({n, d}) + ", got " +
               NpyShapeString(shape));
        }
        // Symbols outside [0, k) are the database's to reject; here only the
        // narrowing to int32 must not wrap a wild value into a valid one.
        codes_.resize(codes.size());
        for (size_t i = 0; i < codes.size(); ++i) {
          if (codes[i] < std::numeric_limits<int32_t>::min() ||
              codes[i] > std::numeric_limits<int32_t>::max()) {
            Fail(files.codes + ": code symbol " + std::to_string(codes[i]) + " at row " +
                 std::to_string(i / static_cast<size_t>(d)) + " is outside [0, " +
                 std::to_string(spec.code_k) + ")");
          }
          codes_[i] = static_cast<int32_t>(codes[i]);
        }
        view_.codes = codes_.data();
      }
      break;
  }
  view_.n = n;
}

nlohmann::json JsonFloat(float value) {
  if (!std::isfinite(value)) return nullptr;
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return static_cast<double>(value);
  *end = '\0';
  return std::strtod(buf, nullptr);
}

nlohmann::json JsonFloats(const float* values, size_t n) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) out.push_back(JsonFloat(values[i]));
  return out;
}

nlohmann::json JsonFloatMatrix(const float* values, size_t rows, size_t cols) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t r = 0; r < rows; ++r) out.push_back(JsonFloats(values + r * cols, cols));
  return out;
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
    if (!v.empty()) (*j)[name] = v;
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
