#include <uroce/eal.h>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

namespace uroce {

std::vector<std::string> default_eal_args() {
  return {"--no-huge", "--no-pci", "--no-shconf", "-m", "512", "--log-level=lib.*:error"};
}

Status init_eal(const std::vector<std::string>& args) {
  static bool done = false;
  if (done) return {};
  std::vector<std::string> storage{"uroce"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  if (rte_eal_init(int(storage.size()), argv.data()) < 0) {
    return Status(StatusCode::kUnavailable, "rte_eal_init failed (see EAL messages above)");
  }
  done = true;
  return {};
}

std::string eal_runtime_dir(const std::string& file_prefix) {
  std::string base;
  if (const char* rd = std::getenv("RUNTIME_DIRECTORY")) {
    base = rd;
  } else if (getuid() == 0) {
    base = "/var/run";
  } else {
    const char* x = std::getenv("XDG_RUNTIME_DIR");
    base = x ? x : "/tmp";
  }
  return base + "/dpdk/" + file_prefix;
}

Status init_eal_unpinned(const std::vector<std::string>& args) {
  cpu_set_t cpus;
  const bool had = pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus) == 0;
  const Status st = init_eal(args);
  if (had) pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
  return st;
}

ThreadLcore::ThreadLcore() : registered_(rte_thread_register() == 0 && rte_lcore_id() != LCORE_ID_ANY) {}

ThreadLcore::~ThreadLcore() {
  if (registered_) rte_thread_unregister();
}

Result<rte_mempool*> create_frame_pool(const std::string& name, unsigned n) {
  rte_mempool* mp = rte_pktmbuf_pool_create(name.c_str(), n, n >= 1024 ? 256 : 0, 0,
                                            RTE_PKTMBUF_HEADROOM + kFrameRoomBytes, SOCKET_ID_ANY);
  if (!mp) return Status(StatusCode::kResourceExhausted, "rte_pktmbuf_pool_create failed");
  return mp;
}

}  // namespace uroce
