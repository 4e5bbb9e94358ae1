#include "tools/data_flags.h"

#include <CLI/CLI.hpp>

#include "tools/cli_util.h"

namespace hedgedb {
namespace cli {

void AddDataSetFlags(CLI::App* cmd, DataSetFlags* flags, const std::string& data_help) {
  flags->data_option = cmd->add_option("--data", flags->data, data_help);
  if (!flags->data.empty()) flags->data_option->capture_default_str();
  cmd->add_option("--cub", flags->cub,
                  "CUB-200-2011 root (images.txt, image_class_labels.txt, classes.txt, "
                  "bounding_boxes.txt, images/); the same as --data cub:ROOT");
  cmd->add_option("--cars", flags->cars,
                  "Cars-196 root (cars_annos.mat, car_ims/); the same as --data cars:ROOT");
}

std::string ResolveDataSet(const DataSetFlags& flags) {
  const bool data_given = flags.data_option != nullptr && flags.data_option->count() > 0;
  if (data_given + !flags.cub.empty() + !flags.cars.empty() > 1) {
    UsageError(
        "give the data set once: --data cub:ROOT, --cub ROOT, --data cars:ROOT or "
        "--cars ROOT");
  }
  if (!flags.cub.empty()) return "cub:" + flags.cub;
  if (!flags.cars.empty()) return "cars:" + flags.cars;
  return flags.data;
}

bool DataSetGiven(const DataSetFlags& flags) {
  return (flags.data_option != nullptr && flags.data_option->count() > 0) || !flags.cub.empty() ||
         !flags.cars.empty();
}

std::string DataSetName(const std::string& source) { return source.substr(0, source.find(':')); }

bool RecordedSettings::Given(const std::string& flag) const { return cmd_.count(flag) > 0; }

void RecordedSettings::Conflict(const std::string& flag, const std::string& given,
                                const std::string& recorded) const {
  UsageError(flag + " " + given + " contradicts " + owner_ + ", " + verb_ + " with " + flag + " " +
             recorded + "; leave " + flag + " out to use the recorded value");
}

}  // namespace cli
}  // namespace hedgedb
