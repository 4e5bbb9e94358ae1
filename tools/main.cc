// The `hedgedb` command line: builds the CLI11 app from the registered command
// groups, runs the chosen subcommand and maps failures to exit codes
// (0 success, 1 command failed, 2 usage error).

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "tools/cli_util.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app(
      "hedgedb: a vector database for uncertain embeddings (Gaussian, mixture of Gaussians, "
      "DIMCO codes, points).\nArrays are read and written as NumPy .npy files; results are "
      "printed as JSON.",
      "hedgedb");
  app.require_subcommand(1);
  app.fallthrough(false);

  hedgedb::cli::RegisterEngineCommands(app);
  hedgedb::cli::RegisterGenerateCommand(app);
#ifdef HEDGEDB_WITH_ENCODERS
  hedgedb::cli::RegisterEncoderCommands(app);
  hedgedb::cli::RegisterImageCommands(app);
#endif

  // CLI11 reports a mistyped command as a missing one; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    try {
      app.get_subcommand(argv[1]);
    } catch (const CLI::OptionNotFound&) {
      std::fprintf(stderr,
                   "hedgedb: error: unknown command '%s'\nRun with --help for more information.\n",
                   argv[1]);
      return hedgedb::cli::kUsageExitCode;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "hedgedb: error: %s\nRun with --help for more information.\n", e.what());
    return hedgedb::cli::kUsageExitCode;
  } catch (const hedgedb::cli::CommandError& e) {
    std::fprintf(stderr, "hedgedb: error: %s\n", e.what());
    if (e.exit_code() == hedgedb::cli::kUsageExitCode) {
      std::fprintf(stderr, "Run with --help for more information.\n");
    }
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hedgedb: error: %s\n", e.what());
    return hedgedb::cli::kFailureExitCode;
  }
  return 0;
}
