// The device lock's slow paths: mutex_, the bias given and taken back.
#include "apps/libibverbs/biased_lock.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_pause.h>

namespace uroce::ibv {

namespace {

long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

}  // namespace

// Registration is per process (per address space): a forked child's fresh
// lock registers again.
BiasedLock::BiasedLock() : barrier_ok_(membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {}

void BiasedLock::lock_slow() {
  const pthread_t me = pthread_self();
  if (holder_.load(std::memory_order_relaxed) == me) {  // only `me` writes `me` there
    ++depth_;
    return;
  }
  mutex_.lock();
  (void)revoke(true);
  holder_.store(me, std::memory_order_relaxed);
  depth_ = 1;
}

bool BiasedLock::try_lock_slow() {
  const pthread_t me = pthread_self();
  if (holder_.load(std::memory_order_relaxed) == me) {
    ++depth_;
    return true;
  }
  if (!mutex_.try_lock()) return false;
  if (!revoke(false)) {  // the owner is in: the bias is gone, but the lock is its for now
    mutex_.unlock();
    return false;
  }
  holder_.store(me, std::memory_order_relaxed);
  depth_ = 1;
  return true;
}

void BiasedLock::unlock_slow() {
  if (--depth_ != 0) return;
  const pthread_t me = holder_.load(std::memory_order_relaxed);
  run_ = last_ == me ? run_ + 1 : 1;
  last_ = me;
  if (barrier_ok_ && run_ >= kBiasAfter) owner_.store(me, std::memory_order_relaxed);  // its next lock is fast
  holder_.store(0, std::memory_order_relaxed);
  mutex_.unlock();
}

bool BiasedLock::revoke(bool wait) {
  if (owner_.load(std::memory_order_relaxed) != 0) {
    owner_.store(0, std::memory_order_relaxed);
    // Every running thread of the process passes a full barrier: the
    // owner's store to inside_ is seen below, or its look at owner_ comes
    // after this store (enter_fast).
    (void)membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  }
  // Also when the bias was gone already: a try_lock that revoked it may
  // have left its owner inside.
  for (uint32_t spins = 0; inside_.load(std::memory_order_acquire) != 0; ++spins) {
    if (!wait) return false;
    if (spins < 64) {
      rte_pause();
    } else {
      sched_yield();  // the owner may need this CPU to finish its call
    }
  }
  return true;
}

}  // namespace uroce::ibv
