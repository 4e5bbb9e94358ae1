// libhedgedb_cli_encoders.so: the commands of kEncoderCommands (tools/commands.h),
// which link LibTorch, OpenCV and the data-set readers. bin/hedgedb loads this
// module only to run one of them; its one exported symbol is the entry below.

#include <CLI/CLI.hpp>

#include "tools/commands.h"
#include "tools/process_memory.h"

extern "C" __attribute__((visibility("default"))) void hedgedb_cli_register_encoder_commands_v1(
    CLI::App* app) {
  // A process that loads this module runs a network: its freed activations
  // are kept for the next step (tools/process_memory.h).
  hedgedb::cli::KeepFreedMemoryForReuse();
  hedgedb::cli::RegisterEncoderCommands(*app);
  hedgedb::cli::RegisterImageCommands(*app);
}
