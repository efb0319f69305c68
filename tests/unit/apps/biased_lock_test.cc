// The verbs library's device lock (apps/libibverbs/biased_lock.h): mutual
// exclusion while the bias is given, taken back by lock and by try_lock,
// and given again; recursion on both paths; and a former owner held between
// its look at the owner and its flag's store (built with
// UROCE_BIASED_LOCK_TEST, which puts that pause in). The critical sections
// use plain memory only, so a lock that lets two threads in loses
// increments or sees the other's mark, on two CPUs or one.
#include "apps/libibverbs/biased_lock.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include <gtest/gtest.h>

namespace uroce::ibv {
namespace {

void take_bias(BiasedLock& l) {
  for (uint32_t i = 0; i < BiasedLock::kBiasAfter; ++i) {
    l.lock();
    l.unlock();
  }
}

TEST(BiasedLock, RecursiveOnBothPaths) {
  BiasedLock l;
  l.lock();  // slow path: no bias yet
  l.lock();
  EXPECT_TRUE(l.try_lock());
  l.unlock();
  l.unlock();
  l.unlock();
  take_bias(l);
  ASSERT_EQ(l.owner(), pthread_self()) << "no bias after kBiasAfter acquisitions in a row";
  l.lock();  // fast path
  l.lock();
  EXPECT_TRUE(l.try_lock());
  l.unlock();
  l.unlock();
  l.unlock();
  // Another thread gets it once the owner is out, and takes the bias.
  std::thread other([&] {
    l.lock();
    l.unlock();
    EXPECT_TRUE(l.try_lock());
    l.unlock();
  });
  other.join();
  EXPECT_EQ(l.owner(), pthread_t(0));
}

// A thread whose bias was taken away after its look at the owner, and that
// runs again only once another thread has the bias and is inside, must
// wait for that thread. In af35705's lock its store named itself in the one
// word a revoker checks and then cleared it, and it went in beside the
// owner (the SIGSEGV of the fourteenth session's CI, docs/VERBS.md).
std::atomic<pthread_t> hold_thread{0};  // the thread test_pause holds, once
std::atomic<bool> held{false};
std::atomic<bool> release{false};

void hold_here() {
  if (hold_thread.load() != pthread_self()) return;
  hold_thread = 0;
  held = true;
  while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(BiasedLock, AFormerOwnerHeldAfterItsLookWaitsForTheNewOwner) {
  BiasedLock l;
  BiasedLock::test_pause = hold_here;
  std::atomic<bool> main_inside{false};
  std::atomic<bool> former_inside{false};
  std::atomic<uint32_t> overlaps{0};
  std::thread former([&] {
    take_bias(l);
    EXPECT_EQ(l.owner(), pthread_self());
    hold_thread = pthread_self();
    l.lock();  // held in test_pause, its bias about to go
    former_inside.store(true, std::memory_order_relaxed);
    if (main_inside.load(std::memory_order_relaxed)) ++overlaps;
    former_inside.store(false, std::memory_order_relaxed);
    l.unlock();
  });
  for (int ms = 0; !held.load() && ms < 10'000; ++ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!held.load()) {  // it did not take the fast path: nothing to test
    release = true;
    former.join();
    FAIL() << "the former owner never reached test_pause";
  }
  take_bias(l);  // the first revokes the former owner's bias (it is not inside)
  l.lock();      // ... and then this thread has it
  EXPECT_EQ(l.owner(), pthread_self());
  main_inside.store(true, std::memory_order_relaxed);
  release = true;
  // The former owner runs now (two CPUs, or this thread's sleep): it must
  // not get in while this thread is.
  for (int i = 0; i < 200; ++i) {
    if (former_inside.load(std::memory_order_relaxed)) ++overlaps;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  main_inside.store(false, std::memory_order_relaxed);
  l.unlock();
  former.join();
  BiasedLock::test_pause = nullptr;
  EXPECT_EQ(overlaps.load(), 0u);
}

TEST(BiasedLock, ExcludesWhileTheBiasComesAndGoes) {
  BiasedLock l;
  uint64_t count = 0;       // plain: a lost increment shows a broken lock
  volatile int holder = 0;  // the thread in the critical section, by number
  std::atomic<uint64_t> overlaps{0};
  std::atomic<bool> done{false};
  uint64_t biased_rounds = 0;  // the owner's sections taken with the bias (the owner's own: no atomic
                               // instruction in its sections, which would fence its fast path)
  // A long section now and then: a thread let in while the owner is in
  // one overlaps it for long, whatever a revocation's system call takes.
  auto section = [&](int me, int checks) {
    holder = me;
    ++count;
    for (int k = 0; k < checks; ++k) {
      if (holder != me) overlaps.fetch_add(1, std::memory_order_relaxed);
    }
  };
  constexpr uint64_t kOwnerSections = 20'000'000;
  std::atomic<uint64_t> owner_done{0};  // sections the owner has left (a relaxed store: a plain one on x86)
  std::thread owner([&] {
    for (uint64_t i = 0; i < kOwnerSections; ++i) {
      l.lock();
      biased_rounds += l.owner() == pthread_self();
      section(1, i % 1024 == 0 ? 100'000 : 16);
      l.unlock();
      owner_done.store(i + 1, std::memory_order_relaxed);
    }
    done = true;
  });
  // The other thread takes the lock now and then, as the engine thread and a
  // program's second thread do: each time it takes the bias back, and the
  // owner earns it again in between (it waits for 2 kBiasAfter of the owner's
  // sections, so at least half of them are biased at any speed: paced by the
  // clock, a slow owner under ASan on a loaded host hardly ever earned it).
  // Half by lock, half by try_lock.
  uint64_t others = 0;
  for (uint32_t i = 0; !done.load(); ++i) {
    const uint64_t from = owner_done.load(std::memory_order_relaxed);
    while (!done.load() && owner_done.load(std::memory_order_relaxed) < from + 2 * BiasedLock::kBiasAfter) {
      std::this_thread::yield();
    }
    if (i % 2 == 0) {
      l.lock();
    } else if (!l.try_lock()) {
      continue;
    }
    section(2, 1'000);
    ++others;
    l.unlock();
  }
  owner.join();
  EXPECT_EQ(overlaps.load(), 0u);
  EXPECT_EQ(count, kOwnerSections + others);
  EXPECT_GT(others, 10u) << "the other thread hardly ran: the test checked little";
  EXPECT_GT(biased_rounds, kOwnerSections / 4) << "the owner hardly had the bias: the test checked little";
}

}  // namespace
}  // namespace uroce::ibv
