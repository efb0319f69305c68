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
  if (barrier_ok_ && run_ >= kBiasAfter) owner_.store(slot_of(me), std::memory_order_release);  // its next lock is fast (none: slots full)
  holder_.store(0, std::memory_order_relaxed);
  mutex_.unlock();
}

bool BiasedLock::revoke(bool wait) {
  if (Slot* s = owner_.load(std::memory_order_relaxed)) {
    owner_.store(nullptr, std::memory_order_relaxed);
    revoked_ = s;
    // Every running thread of the process passes a full barrier: the
    // owner's flag is seen below, or its second look at owner_ comes after
    // this store (enter_fast).
    (void)membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  }
  // Also a bias taken back before: a try_lock that revoked it may have left
  // its owner inside.
  if (revoked_ == nullptr) return true;
  for (uint32_t spins = 0; revoked_->inside.load(std::memory_order_acquire); ++spins) {
    if (!wait) return false;
    if (spins < 64) {
      rte_pause();
    } else {
      sched_yield();  // the owner may need this CPU to finish its call
    }
  }
  revoked_ = nullptr;
  return true;
}

BiasedLock::Slot* BiasedLock::slot_of(pthread_t me) {
  for (Slot& s : slots_) {
    if (s.thread == me) return &s;
  }
  if (slots_used_ == kSlots) return nullptr;
  Slot& s = slots_[slots_used_++];
  s.thread = me;
  return &s;
}

}  // namespace uroce::ibv
