// `uroce run [EAL args] -- [port options] COMMAND [ARGS...]`: runs an
// unmodified verbs or rdma_cm program on uroce. It puts uroce's libibverbs.so.1
// and librdmacm.so.1 first in the program's library path and hands the port
// settings over as the UROCE_* variables (docs/VERBS.md), then execs the
// program: no root, nothing changed outside the program's own environment.
// `--device-files` (root) first gives the program a private mount namespace
// with the /dev and sysfs files of a kernel verbs device that UCX reads
// (device_files.cc).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "apps/commands.h"
#include "apps/common/args.h"
#include "apps/libibverbs/gid_layout.h"
#include "apps/run/device_files.h"

namespace uroce::apps {

namespace {

constexpr OptSpec kRunOptions[] = {
    {.name = "dev", .kind = OptKind::kString, .def = "0", .help = "the port: an ethdev probed from the EAL args (name or port id) or a device spec", .meta = "SPEC"},
    {.name = "ip", .kind = OptKind::kString, .def = "", .help = "our IPv4 address (GID indexes 2 and 3: RoCEv1, RoCEv2)", .meta = "A.B.C.D"},
    {.name = "ip6", .kind = OptKind::kString, .def = "", .help = "our IPv6 address (the next two GID indexes)", .meta = "ADDR"},
    {.name = "mac", .kind = OptKind::kString, .def = "", .help = "our MAC (the port's if empty)", .meta = "MAC"},
    {.name = "port-mtu", .kind = OptKind::kUint, .def = "1500", .help = "Ethernet MTU to set on the port", .min = 576, .max = 9600},
    {.name = "pcap", .kind = OptKind::kString, .def = "", .help = "capture every frame of the port to FILE", .meta = "FILE"},
    {.name = "drop-rate", .kind = OptKind::kDouble, .def = "0", .help = "lose this fraction of the frames sent and received (fault injection)", .min = 0, .max = 1},
    {.name = "drop-seed", .kind = OptKind::kUint, .def = "1", .help = "seed of the --drop-rate draws"},
    {.name = "counters", .kind = OptKind::kString, .def = "", .help = "at exit, write the device counters to FILE ('stderr': there)", .meta = "FILE"},
    {.name = "progress", .kind = OptKind::kChoice, .def = "auto", .help = "auto: inline while one thread posts and polls, an engine thread once a second one does; inline: the program's verbs calls step the engine (a background thread while it is away); thread: an engine thread of its own", .choices = "auto|inline|thread"},
    {.name = "cc", .kind = OptKind::kChoice, .def = "none", .help = "the congestion control of every RC/UC QP", .choices = "none|dcqcn|timely"},
    // Last: the one option that is not a port setting (no variable).
    {.name = "device-files", .kind = OptKind::kFlag, .help = "(root) run COMMAND in a private mount namespace whose /dev and /sys/class have a kernel verbs device's infiniband/uverbs0 and GID types, which UCX reads; nothing changes outside it"},
};

// The variable each port option sets (docs/VERBS.md). Only an option on the
// command line sets its variable: one the caller's environment already has
// holds otherwise, and the library's default (the option's) applies where
// neither says.
constexpr struct {
  std::string_view option;
  const char* variable;
} kVariables[] = {
    {"dev", "UROCE_DEV"},
    {"ip", "UROCE_IP"},
    {"ip6", "UROCE_IP6"},
    {"mac", "UROCE_MAC"},
    {"port-mtu", "UROCE_PORT_MTU"},
    {"pcap", "UROCE_PCAP"},
    {"drop-rate", "UROCE_DROP_RATE"},
    {"drop-seed", "UROCE_DROP_SEED"},
    {"counters", "UROCE_COUNTERS"},
    {"progress", "UROCE_PROGRESS"},
    {"cc", "UROCE_CC"},
};
static_assert(std::size(kVariables) == std::size(kRunOptions) - 1, "a variable for each port option (all but --device-files)");

constexpr CommandSpec kRunCommand = {
    .name = "run",
    .positional = "COMMAND [ARGS...]",
    .summary = "runs an unmodified verbs or rdma_cm program (perftest, ibv_*_pingpong, rping, ...) on uroce's libibverbs.so.1 and librdmacm.so.1",
    .options = kRunOptions,
    .min_positional = 1,
    .details = "The options end at the first argument that is not one of them: COMMAND.\n"
               "Without \"--\" EAL gets uroce's defaults (no hugepages, no PCI).\n"
               "Each option given sets its UROCE_* variable (docs/VERBS.md) for COMMAND; an option\n"
               "not given leaves the variable as the environment has it, and the library takes\n"
               "the default shown above where neither sets it. --device-files sets none: it is for\n"
               "UCX, which lists a verbs device only with those files (docs/MIDDLEWARE.md).\n"
               "Example: uroce run -- --dev net_memif0,role=server,socket=/tmp/m.sock,socket-abstract=no \\\n"
               "           --ip 10.0.0.1 ibv_rc_pingpong -g 3\n",
};

/// Index of COMMAND in argv: the first argument after the options and their values.
int command_index(int argc, char** argv) {
  int i = 1;
  while (i < argc && std::strncmp(argv[i], "--", 2) == 0 && argv[i][2]) {
    const char* name = argv[i] + 2;
    bool takes_value = false;
    for (const OptSpec& o : kRunOptions) {
      if (o.name == name) takes_value = o.kind != OptKind::kFlag;
    }
    i += (takes_value && !std::strchr(name, '=')) ? 2 : 1;
  }
  return i;
}

/// The directories of uroce's libibverbs.so.1 and librdmacm.so.1, as a
/// library path: UROCE_LIB_DIR, else the build tree's (next to this
/// executable, one folder each), else the installed one (both in one).
std::string library_path() {
  if (const char* d = std::getenv("UROCE_LIB_DIR"); d && *d) return d;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    std::string dir(self);
    dir.resize(dir.rfind('/'));
    if (access((dir + "/libibverbs/libibverbs.so.1").c_str(), R_OK) == 0) {
      return dir + "/libibverbs:" + dir + "/librdmacm";
    }
  }
  return UROCE_INSTALLED_LIB_DIR;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  // [EAL args] -- : everything before the first "--" that stands alone.
  int first = 1;
  std::string eal;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      for (int j = 1; j < i; ++j) eal += std::string(j > 1 ? " " : "") + argv[j];
      first = i + 1;
      break;
    }
  }
  // The port options, parsed as a command of their own up to COMMAND.
  const int n_opts = command_index(argc - first + 1, argv + first - 1) - 1;
  std::vector<char*> opts(argv + first, argv + first + n_opts);
  opts.insert(opts.begin(), argv[0]);
  const int cmd = first + n_opts;
  if (cmd < argc) opts.push_back(argv[cmd]);  // COMMAND, for the positional count
  Args args;
  if (auto rc = parse_command_line(kRunCommand, int(opts.size()), opts.data(), args)) return *rc;

  if (!eal.empty()) setenv("UROCE_EAL", eal.c_str(), 1);
  for (const auto& [option, variable] : kVariables) {
    if (args.given(option)) setenv(variable, std::string(args.text(option)).c_str(), 1);
  }
  if (args.flag("device-files")) {
    // One pair of GID entries per address: the link-local one, UROCE_IP, UROCE_IP6.
    uint32_t addresses = 1;
    for (const char* v : {"UROCE_IP", "UROCE_IP6"}) addresses += std::getenv(v) && *std::getenv(v);
    if (!make_device_files(addresses * uint32_t(std::size(ibv::kGidTypesPerAddress)))) return 1;
  }
  std::string path = library_path();
  if (const char* old = std::getenv("LD_LIBRARY_PATH"); old && *old) path += std::string(":") + old;
  setenv("LD_LIBRARY_PATH", path.c_str(), 1);
  execvp(argv[cmd], argv + cmd);
  std::fprintf(stderr, "uroce run: %s: %s\n", argv[cmd], std::strerror(errno));
  return 127;
}

}  // namespace uroce::apps
