// libhedgedb_cli_encoders.so: the commands of kEncoderCommands (tools/commands.h),
// which link LibTorch, OpenCV and the data-set readers. bin/hedgedb loads this
// module only to run one of them; its one exported symbol is the entry below.

#include <CLI/CLI.hpp>

#include "tools/commands.h"

extern "C" __attribute__((visibility("default"))) void hedgedb_cli_register_encoder_commands_v1(
    CLI::App* app) {
  hedgedb::cli::RegisterEncoderCommands(*app);
  hedgedb::cli::RegisterImageCommands(*app);
}
