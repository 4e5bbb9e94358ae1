// The data-set flags shared by train, embed, evaluate, ingest-images and
// query-image: `--data cub:ROOT` and `--cub ROOT` (likewise cars) name the
// same data set on every command (docs/cli.md, "Data sets").
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace hedgedb {
namespace cli {

struct DataSetFlags {
  std::string data;  // --data SPEC (a command may give it a default)
  std::string cub;   // --cub ROOT: the same as --data cub:ROOT
  std::string cars;  // --cars ROOT: the same as --data cars:ROOT
  CLI::Option* data_option = nullptr;
};

// Adds --data (with `data_help`; its current value is the default) and
// --cub / --cars.
void AddDataSetFlags(CLI::App* cmd, DataSetFlags* flags, const std::string& data_help);

// The one data spec the flags name: "cub:ROOT" for --cub ROOT, "cars:ROOT" for
// --cars ROOT, else --data's value (or its default). Giving more than one of
// them is a usage error.
std::string ResolveDataSet(const DataSetFlags& flags);
// Whether any of --data, --cub, --cars was given.
bool DataSetGiven(const DataSetFlags& flags);
// The data set a source names, without its paths: "cub", "cars", "idx",
// "fashion-mnist", ...
std::string DataSetName(const std::string& source);

// Settings recorded by a model file or a collection, applied to a command's
// flags: a flag not given takes the recorded value; a flag given with another
// value is a usage error naming both (Check) or is kept (Default). `owner`
// names the record in the message: "the model 'm.hdbm'".
class RecordedSettings {
 public:
  RecordedSettings(const CLI::App& cmd, std::string owner, std::string verb = "trained")
      : cmd_(cmd), owner_(std::move(owner)), verb_(std::move(verb)) {}

  template <typename T, typename R>
  void Check(const std::string& flag, T* value, const R& recorded) {
    if (Given(flag) && *value != static_cast<T>(recorded)) {
      Conflict(flag, Text(*value), Text(static_cast<T>(recorded)));
    }
    *value = static_cast<T>(recorded);
  }
  template <typename T, typename R>
  void Default(const std::string& flag, T* value, const R& recorded) {
    if (!Given(flag)) *value = static_cast<T>(recorded);
  }

 private:
  bool Given(const std::string& flag) const;
  [[noreturn]] void Conflict(const std::string& flag, const std::string& given,
                             const std::string& recorded) const;
  static std::string Text(bool v) { return v ? "on" : "off"; }
  static std::string Text(const std::string& v) { return v; }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  static std::string Text(T v) {
    return std::to_string(v);
  }

  const CLI::App& cmd_;
  std::string owner_, verb_;
};

}  // namespace cli
}  // namespace hedgedb
