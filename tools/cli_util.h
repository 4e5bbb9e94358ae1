// Helpers shared by the `hedgedb` subcommands: failing with an exit code,
// opening a database, loading embeddings and ids from .npy files with shape
// checks against a collection, and printing JSON.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/json_fields.h"
#include "hedgedb/arrays.h"
#include "hedgedb/db.h"
#include "hedgedb/fields.h"
#include "hedgedb/npy.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hedgedb {
namespace cli {

constexpr int kFailureExitCode = 1;
constexpr int kUsageExitCode = 2;

// Thrown by a subcommand callback; main prints "hedgedb: error: <what()>" and
// exits with exit_code().
class CommandError : public std::runtime_error {
 public:
  CommandError(const std::string& message, int exit_code)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Failure of the command itself (bad data, database errors): exit code 1.
[[noreturn]] void Fail(const std::string& message);
// Wrong or conflicting flags: exit code 2.
[[noreturn]] void UsageError(const std::string& message);
// `message` with each prose word found in `flags` (a library option's
// name, e.g. "lr") replaced by its command-line flag ("--lr"). A key of two
// words is an option given a value ("fit resize" -> "--fit resize"), named
// wherever the two stand together.
std::string NameFlags(const std::string& message, const std::map<std::string, std::string>& flags);
// `message` with the library's option names that have flags named as flags
// (conformal_fraction -> --conformal-fraction, fit resize -> --fit resize):
// the one table of them for every command.
std::string WithFlags(const std::string& message);
// Fails with the status' message if it is not OK, named WithFlags.
void Check(const Status& status);

// How a command opens the database: commands that change it (kWrite), and
// read commands, which take --read-only (kReadOnly when given, else kRead).
enum class Access { kWrite, kRead, kReadOnly };

// Opens the database in `dir`. Only `create` may make a new database: every
// other command fails on a directory that does not hold one, so a mistyped
// --db path is reported instead of silently creating an empty database.
std::unique_ptr<DB> OpenDatabase(const std::string& dir, bool create_if_missing,
                                 Access access = Access::kWrite);
CollectionSpec DescribeOrFail(DB& db, const std::string& collection);

// Reads a .npy file or fails naming it.
NpyArray ReadNpyOrFail(const std::string& path);
// An integer array (any integer type) as int64, with its shape in `shape`.
std::vector<int64_t> ReadInts(const std::string& path, const std::string& what,
                              std::vector<int64_t>* shape);
// A 1-d integer array of exactly `n` elements (ids, labels), or any length when
// n < 0.
std::vector<int64_t> ReadIntVector(const std::string& path, const std::string& what, int64_t n);
// One payload per line (a trailing '\r' is dropped); the file must have exactly
// `n` lines. With base64, each line is standard base64 (padded) of any bytes.
std::vector<std::string> ReadPayloadLines(const std::string& path, int64_t n, bool base64);
// Payloads are opaque bytes: valid UTF-8 is shown as "payload", anything else
// as "payload_base64" (so no byte is replaced). Nothing for an empty payload.
void AddPayloadJson(const std::string& payload, nlohmann::json* j);

// The .npy files that make up a batch of embeddings; which ones are used
// depends on the collection's kind.
struct EmbeddingFiles {
  std::string vec;      // point: N x D
  std::string mean;     // gaussian: N x D; mog: N x C x D
  std::string var;      // as mean: variances, or (one of) the other forms below
  std::string std;      // as mean: standard deviations (--std)
  std::string log_var;  // as mean: log variances (--log-var)
  std::string log_std;  // as mean: log standard deviations (--log-std)
  std::string weights;  // mog: N x C (optional, uniform when empty)
  std::string codes;    // codes items: N x d integers
  std::string logp;     // codes queries: Q x d x k log-probabilities
  // The flags' names in messages are "--" + flag_prefix + name ("query-":
  // --query-mean), as AddEmbeddingOptions registered them.
  std::string flag_prefix;
};

// Registers the embedding file flags of a batch of items (`for_query` false:
// --codes) or queries (--logp), named "--" + prefix + name (e.g.
// --query-mean with prefix "query-"); sets files->flag_prefix.
void AddEmbeddingOptions(CLI::App* cmd, EmbeddingFiles* files, bool for_query,
                         const std::string& prefix = "");

// Embeddings loaded from files; `view` points into the owned buffers, so this
// object is neither copied nor moved.
class LoadedEmbeddings {
 public:
  LoadedEmbeddings() = default;
  LoadedEmbeddings(const LoadedEmbeddings&) = delete;
  LoadedEmbeddings& operator=(const LoadedEmbeddings&) = delete;

  // Loads items (`for_query` false) or queries of the collection `spec`
  // through EmbeddingViewFromArrays (hedgedb/arrays.h, the rule Python's
  // arguments follow too). Flags that do not fit the kind are usage errors;
  // a file whose shape does not match the collection fails naming the file,
  // its flag, the expected and the actual shape.
  void Load(const EmbeddingFiles& files, const CollectionSpec& spec, bool for_query);

  const EmbeddingView& view() const { return view_; }
  int64_t rows() const { return view_.n; }

 private:
  std::vector<float> vec_, mean_, var_, weights_, logp_, converted_var_;
  std::vector<int32_t> codes_;
  EmbeddingView view_;
};

// A spec as the commands show it: only the fields that mean something for
// its kind, floats in their shortest form. (The catalog stores every field:
// storage::SpecToJson.)
nlohmann::json SpecDisplayJson(const CollectionSpec& spec);
nlohmann::json StatsToJson(const CollectionStats& stats);
// The calibration structs as JSON: the fields hedgedb/fields.h
// visits (which the Python module's dicts also follow), null where NaN.
nlohmann::json CalibrationInfoToJson(const CalibrationInfo& info);
nlohmann::json CalibrationQualityToJson(const CalibrationQuality& quality);
nlohmann::json CalibrationReportToJson(const CalibrationReport& report);
nlohmann::json RecordToJson(const Record& record, const CollectionSpec& spec);
nlohmann::json SearchResultToJson(int64_t query, const SearchResult& result);

// Prints one compact JSON object and a newline to stdout. Invalid UTF-8 in
// strings (payloads are opaque bytes) is replaced rather than failing.
void PrintJsonLine(const nlohmann::json& value);

}  // namespace cli
}  // namespace hedgedb
