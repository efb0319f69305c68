// The verbs library's device lock (apps/libibverbs/biased_lock.h): mutual
// exclusion while the bias is given, taken back by lock and by try_lock,
// and given again; recursion on both paths. The critical sections use
// plain memory only, so a lock that lets two threads in loses increments
// or sees the other's mark, on two CPUs or one.
#include "apps/libibverbs/biased_lock.h"

#include <atomic>
#include <cstdint>
#include <thread>

#include <gtest/gtest.h>

namespace uroce::ibv {
namespace {

TEST(BiasedLock, RecursiveOnBothPaths) {
  BiasedLock l;
  l.lock();  // slow path: no bias yet
  l.lock();
  EXPECT_TRUE(l.try_lock());
  l.unlock();
  l.unlock();
  l.unlock();
  for (uint32_t i = 0; i < BiasedLock::kBiasAfter; ++i) {
    l.lock();
    l.unlock();
  }
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
