// The device lock: recursive, and free of atomic read-modify-write
// instructions for the one thread that takes it most (a biased lock, as
// JVMs once biased their monitors; the asymmetric barrier is Linux's
// membarrier(2)).
//
// Why: a verbs call is short, and a mutex's locked instructions (an
// exchange to take it, another to give it back) wait for every store the
// call made to drain, and the call's last stores are to the memif ring that
// the peer's core reads. In stock ib_write_bw's client thread they were
// 8.5 % of the samples, about 23 ns a message (docs/VERBS.md); a spinlock
// released with a plain store only moved the wait to its next exchange.
//
// How: a thread that takes the lock kBiasAfter times in a row, no other
// thread taking it in between, gets the bias. It then enters and leaves
// with plain stores: inside_ = itself, a look at owner_, and inside_ = 0.
// Any other thread takes mutex_, clears owner_, and runs membarrier(2)'s
// barrier on every running thread of the process, so either the owner's
// store to inside_ is seen (it waits for it to leave) or the owner sees
// owner_ cleared and takes mutex_ from then on. This is Dekker's handshake
// with one side's fence paid for by the other, which only the rare
// revocation pays (a system call and an IPI).
// Where membarrier's private expedited barrier is missing (Linux before
// 4.14, or a seccomp filter), no thread gets the bias: a recursive mutex.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace uroce::ibv {

class BiasedLock {
 public:
  BiasedLock();
  BiasedLock(const BiasedLock&) = delete;
  BiasedLock& operator=(const BiasedLock&) = delete;

  void lock() {
    if (!enter_fast(pthread_self())) lock_slow();
  }
  bool try_lock() { return enter_fast(pthread_self()) || try_lock_slow(); }
  void unlock() {
    if (inside_.load(std::memory_order_relaxed) == pthread_self()) {
      if (--fast_depth_ == 0) inside_.store(0, std::memory_order_release);
      return;
    }
    unlock_slow();
  }

  /// The thread with the bias (0: none), for tests and diagnostics.
  pthread_t owner() const { return owner_.load(std::memory_order_relaxed); }

  /// Outermost acquisitions in a row by one thread that earn it the bias.
  static constexpr uint32_t kBiasAfter = 4096;

 private:
  /// The owner's way in: true if the calling thread holds the lock now
  /// without mutex_ (again, if it did already).
  bool enter_fast(pthread_t me) {
    if (inside_.load(std::memory_order_relaxed) == me) {  // only `me` writes `me` there
      ++fast_depth_;
      return true;
    }
    if (owner_.load(std::memory_order_relaxed) != me) return false;
    inside_.store(me, std::memory_order_relaxed);
    // The store above and the load below are ordered by the revoker's
    // membarrier, not by a fence here; only the compiler must keep them apart.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (owner_.load(std::memory_order_relaxed) == me) {
      fast_depth_ = 1;
      return true;
    }
    inside_.store(0, std::memory_order_release);  // revoked meanwhile
    return false;
  }
  void lock_slow();
  bool try_lock_slow();
  void unlock_slow();
  /// Ends the bias (mutex_ held) and waits for its owner to be out of the
  /// fast path: true once it is; with wait false, false at once if it is in.
  bool revoke(bool wait);

  const bool barrier_ok_;               // membarrier's private expedited barrier is ours
  std::atomic<pthread_t> owner_{0};     // the thread with the bias; 0: none (written with mutex_ held)
  std::atomic<pthread_t> inside_{0};    // the owner, while it holds the lock by the fast path
  uint32_t fast_depth_ = 0;             // the owner's recursion on the fast path
  std::mutex mutex_;
  std::atomic<pthread_t> holder_{0};    // the thread that holds mutex_
  uint32_t depth_ = 0;                  // its recursion (mutex_ held)
  pthread_t last_ = 0;                  // the thread of the last outermost slow acquisition
  uint32_t run_ = 0;                    // ... and how many in a row
};

}  // namespace uroce::ibv
