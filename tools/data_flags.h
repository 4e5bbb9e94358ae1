// The data-set flags shared by train, embed, evaluate, ingest-images and
// query-image: `--data cub:ROOT` and `--cub ROOT` (likewise cars) name the
// same data set on every command (docs/cli.md, "Data sets").
#pragma once

#include <string>

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

}  // namespace cli
}  // namespace hedgedb
