// The `hedgedb` command line: builds the CLI11 app from the registered command
// groups, runs the chosen subcommand and maps failures to exit codes
// (0 success, 1 command failed, 2 usage error).

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "tools/cli_util.h"
#include "tools/commands.h"

namespace {

// CLI11 converts integers with strtoll/strtoull in base 0: an out-of-range
// value is clamped (remove --id 99999999999999999999 removed item INT64_MAX),
// "-1" wraps for unsigned flags and "010" is octal 8. Every integer flag of
// every command is checked here as plain base-10 text that fits its type.
CLI::Validator Base10Integer(bool is_unsigned) {
  return CLI::Validator(
      [is_unsigned](std::string& text) -> std::string {
        size_t digits = (!is_unsigned && !text.empty() && text[0] == '-') ? 1 : 0;
        if (digits == text.size()) return "'" + text + "' is not a whole number";
        for (size_t i = digits; i < text.size(); ++i) {
          if (text[i] < '0' || text[i] > '9') {
            return "'" + text + "' is not a base-10 whole number" +
                   (is_unsigned && text[0] == '-' ? std::string(" >= 0") : std::string());
          }
        }
        errno = 0;
        char* end = nullptr;
        if (is_unsigned) {
          const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
          if (errno == ERANGE) return "'" + text + "' is out of range";
          text = std::to_string(v);  // no leading zeros left to read as octal
        } else {
          const long long v = std::strtoll(text.c_str(), &end, 10);
          if (errno == ERANGE) return "'" + text + "' is out of range";
          text = std::to_string(v);
        }
        return std::string();  // CLI11 then checks that it fits the flag's type
      },
      "", is_unsigned ? "UINT" : "INT");
}

void CheckIntegerFlags(CLI::App* app) {
  for (CLI::Option* option : app->get_options()) {
    // Flags with validators report e.g. "INT:POSITIVE": the type comes first.
    const std::string full = option->get_type_name();
    const std::string type = full.substr(0, full.find(':'));
    if (type == "INT" || type == "UINT") option->transform(Base10Integer(type == "UINT"));
  }
  for (CLI::App* sub : app->get_subcommands({})) CheckIntegerFlags(sub);
}

}  // namespace

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
  CheckIntegerFlags(&app);

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
