// render_svg: DOT piped into Graphviz's `dot -Tsvg`.
#include "tools/mirra/svg.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mirra::runner {

graph::Status render_svg(const std::string& dot, const std::string& path) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) {
    return graph::invalid_argument("--svg needs Graphviz's `dot`, which is not installed (Debian: apt install graphviz); "
                                   "--dot prints the DOT text without it");
  }
  if (path.find('\'') != std::string::npos) return graph::invalid_argument("--svg: a path with a quote is not supported: " + path);
  const std::string command = "dot -Tsvg -o '" + path + "'";  // its messages go to stderr
  std::FILE* pipe = ::popen(command.c_str(), "w");
  if (pipe == nullptr) return graph::internal_error(std::string("cannot run dot: ") + std::strerror(errno));
  const bool written = std::fwrite(dot.data(), 1, dot.size(), pipe) == dot.size();
  const int status = ::pclose(pipe);
  if (!written || status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return graph::invalid_argument("dot could not render '" + path + "' (exit status " +
                                   std::to_string(status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  }
  return graph::Status();
}

}  // namespace mirra::runner
