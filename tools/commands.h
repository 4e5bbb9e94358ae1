// Subcommand registration for the `hedgedb` command line. tools/main.cc creates
// the CLI::App and calls each Register* function; every group of subcommands
// lives in its own file, so new commands are added without touching the others.
//
// A subcommand does its work in its CLI11 callback and reports failure by
// throwing hedgedb::cli::CommandError (tools/cli_util.h); main turns that into
// "hedgedb: error: <message>" on stderr and the error's exit code.
#pragma once

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
// Training and encoding with the LibTorch encoders (tools/encoder_commands.cc).
void RegisterEncoderCommands(CLI::App& app);
// ingest-images, query-image, export-images: image files in, top-k matches out
// (tools/image_commands.cc).
void RegisterImageCommands(CLI::App& app);
#endif

}  // namespace cli
}  // namespace hedgedb
