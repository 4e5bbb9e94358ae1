// The `hedgedb` command line: builds the CLI11 app from the registered command
// groups, runs the chosen subcommand and maps failures to exit codes
// (0 success, 1 command failed, 2 usage error).
//
// The commands that need LibTorch and OpenCV (kEncoderCommands) are in a
// module loaded only when argv names one of them: loading those libraries
// costs about half a second; an engine command starts in about 15 ms.

#ifdef HEDGEDB_WITH_ENCODERS
#include <dlfcn.h>
#include <unistd.h>
#endif

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

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

bool IsEncoderCommand(const char* name) {
#ifdef HEDGEDB_WITH_ENCODERS
  return *hedgedb::cli::EncoderCommandDescription(name) != '\0';
#else
  (void)name;
  return false;
#endif
}

bool IsKnownCommand(const CLI::App& app, const char* name) {
  if (IsEncoderCommand(name)) return true;
  try {
    app.get_subcommand(name);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

#ifdef HEDGEDB_WITH_ENCODERS

// The module's path: HEDGEDB_CLI_MODULE is relative to this executable's
// directory, the same in the build tree and after installation.
std::string EncoderModulePath() {
  std::string exe(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", exe.data(), exe.size());
  if (n <= 0 || static_cast<size_t>(n) >= exe.size()) {
    hedgedb::cli::Fail("cannot find the hedgedb executable's directory (/proc/self/exe)");
  }
  exe.resize(static_cast<size_t>(n));
  return (std::filesystem::path(exe).parent_path() / HEDGEDB_CLI_MODULE).lexically_normal();
}

// Registers the real encoder commands from the module; fails naming its file
// when it is missing, broken or from another build. Never unloaded: the
// commands' callbacks live in it.
void LoadEncoderCommands(CLI::App& app) {
  const std::string path = EncoderModulePath();
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    hedgedb::cli::Fail("the training and image commands need the module " + path +
                       ", which cannot be loaded: " + ::dlerror());
  }
  auto entry = reinterpret_cast<decltype(&hedgedb_cli_register_encoder_commands_v1)>(
      ::dlsym(module, hedgedb::cli::kEncoderModuleEntry));
  if (entry == nullptr) {
    hedgedb::cli::Fail("the module " + path + " has no " + hedgedb::cli::kEncoderModuleEntry +
                       ": it is not this build's");
  }
  const size_t before = app.get_subcommands({}).size();
  entry(&app);
  const std::vector<CLI::App*> all = app.get_subcommands({});
  bool same = all.size() - before == std::size(hedgedb::cli::kEncoderCommands);
  for (size_t i = 0; same && i < std::size(hedgedb::cli::kEncoderCommands); ++i) {
    same = all[before + i]->get_name() == hedgedb::cli::kEncoderCommands[i].name;
  }
  if (!same) {
    hedgedb::cli::Fail(
        "the module " + path +
        " does not register the commands this hedgedb expects: it is not this build's");
  }
}

// For --help and the unknown-command check: the encoder commands by name and
// description only, without loading the module.
void ListEncoderCommands(CLI::App& app) {
  for (const hedgedb::cli::CommandSummary& command : hedgedb::cli::kEncoderCommands) {
    app.add_subcommand(command.name, command.description);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "hedgedb: a vector database for uncertain embeddings (Gaussian, mixture of Gaussians, "
      "DIMCO codes, points).\nArrays are read and written as NumPy .npy files; results are "
      "printed as JSON.",
      "hedgedb");
  app.require_subcommand(1);
  app.fallthrough(false);
  // The project's version (CMakeLists.txt), also the library's soname version.
  app.set_version_flag("--version", std::string("hedgedb ") + HEDGEDB_VERSION,
                       "Print the version and exit");

  hedgedb::cli::RegisterEngineCommands(app);
  hedgedb::cli::RegisterGenerateCommand(app);

  // CLI11 reports a mistyped command as a missing one; name it instead.
  if (argc > 1 && argv[1][0] != '-' && !IsKnownCommand(app, argv[1])) {
    std::fprintf(stderr,
                 "hedgedb: error: unknown command '%s'\nRun with --help for more information.\n",
                 argv[1]);
    return hedgedb::cli::kUsageExitCode;
  }
  try {
#ifdef HEDGEDB_WITH_ENCODERS
    if (argc > 1 && IsEncoderCommand(argv[1])) {
      LoadEncoderCommands(app);
    } else {
      ListEncoderCommands(app);
    }
#endif
    CheckIntegerFlags(&app);
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
