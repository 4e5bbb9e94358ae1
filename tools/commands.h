// Subcommand registration for the `hedgedb` command line. tools/main.cc creates
// the CLI::App and calls each Register* function (the encoder commands' through
// their module, below); every group of subcommands lives in its own file, so
// new commands are added without touching the others.
//
// A subcommand does its work in its CLI11 callback and reports failure by
// throwing hedgedb::cli::CommandError (tools/cli_util.h); main turns that into
// "hedgedb: error: <message>" on stderr and the error's exit code.
#pragma once

#include <cstring>

namespace CLI {
class App;
}  // namespace CLI

namespace hedgedb {
namespace cli {

// create, ingest, search, calibrate, get, remove, fuse, stats, list, drop, repair,
// backup, verify (tools/engine_commands.cc).
void RegisterEngineCommands(CLI::App& app);

// generate: synthetic embeddings for demos and benchmarks (tools/generate_command.cc).
void RegisterGenerateCommand(CLI::App& app);

#ifdef HEDGEDB_WITH_ENCODERS
// The commands that need LibTorch, OpenCV and the data-set readers. They live
// in a module that main loads only to run one of them (libhedgedb_cli_encoders.so,
// tools/encoder_module.cc), so that the engine commands start without loading
// those libraries; main lists them from this table for --help.
struct CommandSummary {
  const char* name;
  const char* description;
};
inline constexpr CommandSummary kEncoderCommands[] = {
    {"train", "Train an encoder and write a model file"},
    {"embed", "Embed a data split with a model; write .npy files for ingest"},
    {"evaluate",
     "Recall@k, MAP@R, KNN accuracy, verification AP and uncertainty calibration of a model, "
     "or of your own embeddings (.npy files or a collection)"},
    {"ingest-images", "Embed image files with a model and add them to a collection"},
    {"query-image", "Embed query images with a model and print their top-k matches"},
    {"export-images", "Write images of a data split as PNG/JPEG files in class folders"},
};
// The description of a command of kEncoderCommands ("" for another name).
inline const char* EncoderCommandDescription(const char* name) {
  for (const CommandSummary& command : kEncoderCommands) {
    if (std::strcmp(command.name, name) == 0) return command.description;
  }
  return "";
}
// The module's one exported function (declared below, outside the namespace):
// registers every command of kEncoderCommands on the app. The version suffix
// changes with its signature.
constexpr const char* kEncoderModuleEntry = "hedgedb_cli_register_encoder_commands_v1";

// Training and encoding with the LibTorch encoders (tools/encoder_commands.cc).
void RegisterEncoderCommands(CLI::App& app);
// ingest-images, query-image, export-images: image files in, top-k matches out
// (tools/image_commands.cc).
void RegisterImageCommands(CLI::App& app);
#endif

}  // namespace cli
}  // namespace hedgedb

#ifdef HEDGEDB_WITH_ENCODERS
extern "C" void hedgedb_cli_register_encoder_commands_v1(CLI::App* app);
#endif
