#include "script_frontend/cli/graphviz.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"

extern char** environ;

namespace kiln::cli {
namespace {

std::string extension(const std::string& path) {
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return path.substr(dot + 1);
}

// Runs `dot -TFORMAT -o PATH` with the DOT text on its stdin; dot's own messages go to stderr.
void render(const std::string& dot_text, const std::string& format, const std::string& path) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) fail("kiln dot: cannot write {}: pipe: {}", path, std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], STDIN_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  std::string t = "-T" + format;
  std::vector<char*> argv = {const_cast<char*>("dot"), t.data(), const_cast<char*>("-o"),
                             const_cast<char*>(path.c_str()), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "dot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[0]);
  if (rc != 0) {
    close(pipe_fds[1]);
    fail("kiln dot: writing {} needs Graphviz's dot on PATH (apt-get install graphviz; or -o FILE.dot): {}", path,
         std::strerror(rc));
  }
  // dot exiting early (a bad path) must end in its status below, not kill kiln with SIGPIPE
  auto old_pipe_handler = std::signal(SIGPIPE, SIG_IGN);
  size_t done = 0;
  while (done < dot_text.size()) {
    ssize_t n = write(pipe_fds[1], dot_text.data() + done, dot_text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // dot exited early: its status below says why
    done += size_t(n);
  }
  close(pipe_fds[1]);
  std::signal(SIGPIPE, old_pipe_handler);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("kiln dot: Graphviz's dot failed writing {} (exit status {})", path,
         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

}  // namespace

void write_graph(const std::string& dot_text, const std::string& path) {
  std::string ext = extension(path);
  if (ext == "dot" || ext == "gv") {
    std::ofstream out(path, std::ios::binary);
    out << dot_text;
    if (!out) fail("kiln dot: cannot write {}", path);
    return;
  }
  if (ext != "svg" && ext != "png" && ext != "pdf")
    fail("kiln dot: cannot tell the format of {} from its extension (.svg, .png, .pdf, .dot or .gv)", path);
  render(dot_text, ext, path);
}

}  // namespace kiln::cli
