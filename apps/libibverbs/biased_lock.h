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
// thread taking it in between, gets the bias: owner_ points to its Slot.
// It then enters and leaves with plain stores: its slot's `inside` flag
// set, a second look at owner_, the flag cleared. Any other thread takes
// mutex_, clears owner_, and runs membarrier(2)'s barrier on every running
// thread of the process, so either the owner's flag is seen set (it waits
// for it to clear) or the owner's second look sees owner_ cleared and it
// takes mutex_ from then on. This is Dekker's handshake with one side's
// fence paid for by the other, which only the rare revocation pays (a
// system call and an IPI).
//
// The flag is the owner's own: no other thread ever writes it. A first
// version (af35705) kept one shared word naming the thread inside, and a
// former owner preempted between its look at owner_ and its store there
// wrote over the current owner's name and then cleared it: a revoker then
// found nobody inside and went in beside the owner (docs/VERBS.md, "the
// biased lock's race"). Now such a thread sets and clears only its own
// slot's flag, which no revoker waits on any more. The slots live as long
// as the lock, one per thread that ever had the bias (a thread ID that
// comes back with a new thread gets its slot again: the old thread, gone,
// left its flag clear).
//
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
    if (!enter_fast()) lock_slow();
  }
  bool try_lock() { return enter_fast() || try_lock_slow(); }
  void unlock() {
    if (fast_holder_.load(std::memory_order_relaxed) == pthread_self()) {  // only the holder writes its ID there
      if (--fast_depth_ == 0) {
        fast_holder_.store(0, std::memory_order_relaxed);
        fast_slot_->inside.store(false, std::memory_order_release);
      }
      return;
    }
    unlock_slow();
  }

  /// The thread with the bias (0: none), for tests and diagnostics.
  pthread_t owner() const {
    const Slot* s = owner_.load(std::memory_order_acquire);
    return s ? s->thread : 0;
  }

  /// Outermost acquisitions in a row by one thread that earn it the bias.
  static constexpr uint32_t kBiasAfter = 4096;

  /// Test builds (tests/unit/apps) call test_pause in the owner's fast path
  /// between its first look at owner_ and its flag's store, where a thread
  /// preempted broke af35705's lock, so that a test can hold one there.
#ifdef UROCE_BIASED_LOCK_TEST
  static inline void (*test_pause)() = nullptr;
  static void pause_for_test() {
    if (test_pause) test_pause();
  }
#else
  static void pause_for_test() {}
#endif

 private:
  struct alignas(64) Slot {  // a line of its own: revokers poll `inside`
    pthread_t thread = 0;  // set once, mutex_ held, before owner_ first points here
    std::atomic<bool> inside{false};  // written by `thread` only
  };
  /// Threads that can hold the bias in a lock's life; the next ones take
  /// mutex_ always. A fixed array: no allocation on the lock's paths (a
  /// signal handler that calls exit() may interrupt malloc, and the exit
  /// handler's unlock then waited for malloc's lock: verbs_fork_exit hung).
  static constexpr uint32_t kSlots = 16;

  /// The owner's way in: true if the calling thread holds the lock now
  /// without mutex_ (again, if it did already).
  bool enter_fast() {
    const pthread_t me = pthread_self();
    if (fast_holder_.load(std::memory_order_relaxed) == me) {
      ++fast_depth_;
      return true;
    }
    Slot* s = owner_.load(std::memory_order_acquire);
    if (s == nullptr || s->thread != me) return false;
    pause_for_test();
    s->inside.store(true, std::memory_order_relaxed);
    // The store above and the load below are ordered by the revoker's
    // membarrier, not by a fence here; only the compiler must keep them apart.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (owner_.load(std::memory_order_acquire) != s) {  // revoked meanwhile
      s->inside.store(false, std::memory_order_relaxed);
      return false;
    }
    fast_slot_ = s;
    fast_depth_ = 1;
    fast_holder_.store(me, std::memory_order_relaxed);
    return true;
  }
  void lock_slow();
  bool try_lock_slow();
  void unlock_slow();
  /// Ends the bias (mutex_ held) and waits for its owner to be out of the
  /// fast path: true once it is; with wait false, false at once if it is in.
  bool revoke(bool wait);
  /// The calling thread's slot (mutex_ held), made on its first bias.
  Slot* slot_of(pthread_t me);

  const bool barrier_ok_;                    // membarrier's private expedited barrier is ours
  std::atomic<Slot*> owner_{nullptr};        // the slot of the thread with the bias (written with mutex_ held)
  // The fast path's holder, written only by the thread inside by it:
  std::atomic<pthread_t> fast_holder_{0};    // its ID, while it is inside
  Slot* fast_slot_ = nullptr;                // its slot
  uint32_t fast_depth_ = 0;                  // its recursion
  // mutex_ and what it guards:
  std::mutex mutex_;
  std::atomic<pthread_t> holder_{0};         // the thread that holds mutex_ (written only by it)
  uint32_t depth_ = 0;                       // its recursion
  pthread_t last_ = 0;                       // the thread of the last outermost slow acquisition
  uint32_t run_ = 0;                         // ... and how many in a row
  Slot* revoked_ = nullptr;                  // a slot whose bias is gone and whose thread may still be inside
  Slot slots_[kSlots];
  uint32_t slots_used_ = 0;
};

}  // namespace uroce::ibv
