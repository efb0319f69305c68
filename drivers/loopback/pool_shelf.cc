#include "drivers/loopback/pool_shelf.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include <rte_mempool.h>

#include <uroce/eal.h>

namespace uroce::loopback {
namespace {

// Never destroyed: at exit EAL may be gone, and its memory goes with the process.
struct Shelf {
  std::mutex mu;
  std::vector<rte_mempool*> pools;
};

Shelf& shelf() {
  static Shelf* s = new Shelf;
  return *s;
}

void free_all(Shelf& s) {  // s.mu held
  for (rte_mempool* mp : s.pools) rte_mempool_free(mp);
  s.pools.clear();
}

}  // namespace

Result<rte_mempool*> take_frame_pool(const std::string& name, uint32_t n) {
  Shelf& s = shelf();
  const std::lock_guard<std::mutex> g(s.mu);
  const auto kept = std::find_if(s.pools.begin(), s.pools.end(), [n](const rte_mempool* mp) { return mp->size == n; });
  if (kept != s.pools.end()) {
    rte_mempool* mp = *kept;
    s.pools.erase(kept);
    return mp;
  }
  Result<rte_mempool*> pool = create_frame_pool(name, n);
  if (pool.ok() || s.pools.empty()) return pool;
  free_all(s);
  return create_frame_pool(name, n);
}

void give_back_frame_pool(rte_mempool* mp) {
  if (!mp) return;
  Shelf& s = shelf();
  const std::lock_guard<std::mutex> g(s.mu);
  if (rte_mempool_full(mp) && s.pools.size() < kKeptPools) {
    s.pools.push_back(mp);
  } else {
    rte_mempool_free(mp);
  }
}

size_t kept_frame_pools() {
  Shelf& s = shelf();
  const std::lock_guard<std::mutex> g(s.mu);
  return s.pools.size();
}

void free_kept_frame_pools() {
  Shelf& s = shelf();
  const std::lock_guard<std::mutex> g(s.mu);
  free_all(s);
}

}  // namespace uroce::loopback
