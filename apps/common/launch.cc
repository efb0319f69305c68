#include "apps/common/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include <uroce/eal.h>

namespace uroce::apps {

volatile std::sig_atomic_t g_stop = 0;

namespace {
void on_stop_signal(int) { g_stop = 1; }
}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

std::string strf(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

std::vector<std::string> given_options(const Args& args, std::span<const OptSpec> options,
                                       std::initializer_list<std::string_view> skip) {
  std::vector<std::string> out;
  for (const OptSpec& o : options) {
    if (!args.given(o.name) || std::find(skip.begin(), skip.end(), o.name) != skip.end()) continue;
    const std::string name(o.name);
    switch (o.kind) {
      case OptKind::kFlag: out.push_back("--" + name); break;
      case OptKind::kUint: out.push_back(strf("--%s=%llu", name.c_str(), (unsigned long long)args.get_uint(o.name))); break;
      case OptKind::kDouble: out.push_back(strf("--%s=%.17g", name.c_str(), args.get_double(o.name))); break;
      case OptKind::kString:
      case OptKind::kChoice: out.push_back("--" + name + "=" + std::string(args.get_str(o.name))); break;
    }
  }
  return out;
}

bool eal_has_lcores(const std::vector<std::string>& eal) {
  return std::any_of(eal.begin(), eal.end(), [](const std::string& a) {
    return a.starts_with("-l") || a.starts_with("-c") || a.starts_with("--lcores");
  });
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t c = s.find(',');
    if (c != 0) out.emplace_back(s.substr(0, c));
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return out;
}

uint16_t free_tcp_port(const std::string& host) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  socklen_t len = sizeof(a);
  uint16_t port = 18515;
  if (s >= 0 && ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  if (s >= 0) ::close(s);
  return port;
}

bool pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

bool write_text_file(std::string_view tool, const std::string& path, const std::function<void(std::FILE*)>& write) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f) {
    write(f);
    const bool bad = std::ferror(f) != 0;
    if (std::fclose(f) == 0 && !bad) return true;
  }
  std::fprintf(stderr, "uroce %.*s: %s: %s\n", int(tool.size()), tool.data(), path.c_str(), std::strerror(errno));
  return false;
}

std::string make_temp_dir(std::string_view tool) {
  std::string tmpl = "/tmp/uroce-" + std::string(tool) + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) {
    std::fprintf(stderr, "uroce %.*s: mkdtemp: %s\n", int(tool.size()), tool.data(), std::strerror(errno));
    return "";
  }
  return tmpl;
}

int run_pair(const PairLaunch& p) {
  using Clock = std::chrono::steady_clock;
  install_stop_handlers();
  const auto tool = std::string(p.tool);
  pid_t pids[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    const std::string exe = p.exe.empty() ? "/proc/self/exe" : p.exe;
    std::vector<std::string> av = {exe};
    av.insert(av.end(), p.argv[i].begin(), p.argv[i].end());
    std::vector<char*> argv;
    for (auto& a : av) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      if (!p.output[i].empty()) {
        const int fd = open(p.output[i].c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) _exit(127);
      }
      if (p.cpu[i] >= 0) pin_to_cpu(p.cpu[i]);
      execvp(exe.c_str(), argv.data());
      std::fprintf(stderr, "uroce %s: exec: %s\n", tool.c_str(), std::strerror(errno));
      _exit(127);
    }
    if (pid < 0) {
      std::fprintf(stderr, "uroce %s: fork: %s\n", tool.c_str(), std::strerror(errno));
      break;
    }
    pids[i] = pid;
    // A memif client only connects to a socket that exists: start it once the server has made it.
    // The server is not reaped here (WNOWAIT): the loop below collects its status.
    auto exited = [pid] {
      siginfo_t si{};
      return waitid(P_PID, id_t(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
    };
    const auto until = Clock::now() + std::chrono::seconds(p.grace_s);
    while (i == 0 && !p.sock.empty() && !std::filesystem::exists(p.sock) && !g_stop && Clock::now() < until &&
           !exited()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (i == 0 && exited()) break;  // the server failed to start: no client
  }

  // Ctrl-C reaches both children too (one process group); a signal sent to
  // this process alone is passed on by PID. Once a child has exited, or the
  // deadline passes, the other gets the grace period, then SIGTERM, then SIGKILL.
  int status[2] = {-1, -1};
  bool forwarded = false;
  int kills = 0;
  std::optional<Clock::time_point> grace;
  if (p.deadline_s) grace = Clock::now() + std::chrono::seconds(p.deadline_s);
  for (int live = (pids[0] > 0) + (pids[1] > 0); live > 0;) {
    int st = 0;
    const pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (int i = 0; i < 2; ++i) {
        if (pid != pids[i]) continue;
        status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        pids[i] = -1;
        --live;
        const auto g = Clock::now() + std::chrono::seconds(p.grace_s);
        if (!grace || g < *grace) grace = g;
      }
      continue;
    }
    if (g_stop && !forwarded) {
      for (pid_t c : pids) {
        if (c > 0) kill(c, SIGINT);
      }
      forwarded = true;
      grace = Clock::now() + std::chrono::seconds(10);
    }
    if (grace && Clock::now() > *grace) {
      for (pid_t c : pids) {
        if (c > 0) kill(c, kills == 0 ? SIGTERM : SIGKILL);
      }
      ++kills;
      grace = Clock::now() + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<std::string> leftovers = {p.remove_dir};
  for (const std::string& prefix : p.file_prefix) {
    if (!prefix.empty()) leftovers.push_back(eal_runtime_dir(prefix));
  }
  for (const std::string& dir : leftovers) {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  if (status[0] != 0 || status[1] != 0) {
    std::fprintf(stderr, "uroce %s: server exit %d, client exit %d\n", tool.c_str(), status[0], status[1]);
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace uroce::apps
