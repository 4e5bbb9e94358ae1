// Re-running this program as a child process that the parent can kill: the
// SIGKILL crash test (tests/engine/crash_test.cc) and the crash harness
// (bench/crash_harness.cc) share it. No GoogleTest.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

extern char** environ;

namespace hedgedb {
namespace testing {

// Starts /proc/self/exe with `args` (argv[1..]) and this environment plus
// `extra_env` ("NAME=value"). `close_fd` (if >= 0) is closed in the child
// (the parent's end of a pipe, so that the parent sees EOF when the child
// dies); stdout goes to /dev/null. Returns the pid, or -1 with errno set.
inline pid_t SpawnSelf(const std::vector<std::string>& args,
                       const std::vector<std::string>& extra_env, int close_fd) {
  std::vector<std::string> owned_env(extra_env);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  for (std::string& e : owned_env) envp.push_back(&e[0]);
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::vector<std::string> owned_args(args);
  std::vector<char*> argv = {&exe[0]};
  for (std::string& a : owned_args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (close_fd >= 0) posix_spawn_file_actions_addclose(&actions, close_fd);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  return pid;
}

// Sends SIGKILL and reaps the child; returns its wait status (-1 on error).
inline int KillAndReap(pid_t pid) {
  if (::kill(pid, SIGKILL) != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

}  // namespace testing
}  // namespace hedgedb
