// What the command-line tests share: running the real bin/hedgedb as a
// subprocess and reading what it printed.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace hedgedb {
namespace cli_testing {

// One run of bin/hedgedb.
struct CliRun {
  int exit_code = -1;  // 128 + signal if it was killed
  std::string out;
  std::string err;
};

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every non-empty line of `out` as JSON. `strict`: a line that is not JSON
// throws (the test fails there); otherwise it becomes a discarded value.
inline std::vector<nlohmann::json> JsonLines(const std::string& out, bool strict) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line, nullptr, strict));
  }
  return lines;
}

inline std::string Lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Runs HEDGEDB_BIN_DIR/hedgedb with args; stdout and stderr go through
// stdout.txt / stderr.txt in scratch_dir (files, so large outputs cannot
// block on a pipe).
inline CliRun RunHedgedb(const std::string& scratch_dir, const std::vector<std::string>& args) {
  const std::string bin = std::string(HEDGEDB_BIN_DIR) + "/hedgedb";
  const std::string out_path = scratch_dir + "/stdout.txt", err_path = scratch_dir + "/stderr.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<char*> argv = {const_cast<char*>(bin.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  CliRun r;
  const int rc = posix_spawn(&pid, bin.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "cannot run " << bin << ": " << std::strerror(rc);
    return r;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadWholeFile(out_path);
  r.err = ReadWholeFile(err_path);
  return r;
}

// The command line and what it printed, for failure messages.
inline std::string DescribeRun(const std::vector<std::string>& args, const CliRun& r) {
  std::string cmd = "hedgedb";
  for (const auto& a : args) cmd += " " + a;
  return cmd + "\nexit " + std::to_string(r.exit_code) + "\nstdout: " + r.out +
         "\nstderr: " + r.err;
}

}  // namespace cli_testing
}  // namespace hedgedb
