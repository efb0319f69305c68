// Process pieces every `uroce` command shares: the one stop flag that
// SIGINT/SIGTERM set (every command's loops poll g_stop), printf into a
// std::string, re-passing the options a user gave, writing a text file with
// its errors reported, and the launcher that runs a server and a client
// child on a memif socket and reaps both.
// Control path.
#pragma once

#include <csignal>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "apps/common/args.h"

namespace uroce::apps {

/// Set by SIGINT/SIGTERM once install_stop_handlers() has run; loops poll it.
extern volatile std::sig_atomic_t g_stop;
void install_stop_handlers();

/// printf into a std::string (at most 511 characters).
[[gnu::format(printf, 1, 2)]] std::string strf(const char* f, ...);

/// The options of `options` that the user gave in `args`, as "--name=value"
/// ("--name" for flags), except those named in `skip`: what a launcher hands
/// on to both child endpoints.
std::vector<std::string> given_options(const Args& args, std::span<const OptSpec> options,
                                       std::initializer_list<std::string_view> skip);

/// True if eal names the lcores itself (-l..., -c..., --lcores...), so a
/// launcher must not add its own list.
bool eal_has_lcores(const std::vector<std::string>& eal);

/// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> split_list(std::string_view s);

/// A TCP port free on host (IPv4 text) at the time of the call (18515 if none could be had).
uint16_t free_tcp_port(const std::string& host);

/// Pins the calling thread to one CPU (sched_setaffinity on thread 0: safe in
/// a child between fork and exec); false if the system refuses (no such CPU).
bool pin_to_cpu(int cpu);

/// Creates (truncates) path and writes it with write(f); false after printing
/// "uroce <tool>: PATH: <errno text>" if it could not be created or wholly
/// written (a full disk shows only when the buffers are flushed at close).
bool write_text_file(std::string_view tool, const std::string& path, const std::function<void(std::FILE*)>& write);

/// A new private directory /tmp/uroce-<tool>-XXXXXX for a launcher's sockets
/// and outputs; "" after printing "uroce <tool>: mkdtemp: ..." if none could be made.
std::string make_temp_dir(std::string_view tool);

struct PairLaunch {
  std::string_view tool;              ///< "demo": messages say "uroce demo: ..."
  std::string sock;                   ///< memif socket the server creates; the client starts once it exists (empty: at once)
  std::vector<std::string> argv[2];   ///< server, client: arguments after the executable path
  std::string output[2];              ///< server, client: file for the child's stdout and stderr (empty: inherited)
  int cpu[2] = {-1, -1};              ///< server, client: pin the child to this CPU (-1: inherit the affinity)
  std::string exe;                    ///< the program to run (empty: /proc/self/exe, i.e. uroce)
  int grace_s = 30;                   ///< once one child has exited, the other gets this long
  int deadline_s = 0;                 ///< whole run limit (0: none)
  std::string remove_dir;             ///< removed with all it holds once both children are done (empty: none)
  std::string file_prefix[2];         ///< server, client: the EAL --file-prefix the launcher gave the child (empty: none)
};

/// Runs exe (/proc/self/exe) with each argv (server first), waits for both, passes
/// SIGINT on by PID when g_stop is set, then SIGTERM and SIGKILL once the grace
/// period or deadline has passed, then removes remove_dir and the file_prefix
/// runtime folders (EAL leaves them behind, empty after a clean exit, 3 MB of
/// files after a kill). Installs the stop handlers. Returns kExitOk only if
/// both exited 0.
int run_pair(const PairLaunch& p);

}  // namespace uroce::apps
