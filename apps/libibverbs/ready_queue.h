// What a program's channel fd stands for: the items ready for it (CQs with a
// completion event, rdma_cm events, a context's asynchronous events),
// counted on an eventfd so that poll() on the fd says whether there is one.
// The count equals the number of items whenever the device lock is free:
// push, take and erase change both under the lock, so a read of the fd there
// never blocks, and an item dropped (its CQ or id destroyed) never leaves a
// count that would wake a poll() for nothing and then block its read.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>

#include "apps/libibverbs/provider.h"

namespace uroce::ibv {

/// A channel's fd: blocking, as a kernel channel's; the program may set
/// O_NONBLOCK on it. -1 with errno on failure.
inline int make_channel_fd() { return eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE); }

template <class T>
class ReadyQueue {
 public:
  /// Adds v (the lock held).
  void push(int fd, T v) {
    items_.push_back(v);
    const uint64_t one = 1;
    if (write(fd, &one, sizeof one) != sizeof one) std::abort();  // an eventfd counts to 2^64-2
  }

  /// Drops the items pred selects (the lock held).
  template <class Pred>
  void erase_if(int fd, Pred pred) {
    for (auto it = items_.begin(); it != items_.end();) {
      if (pred(*it)) {
        it = items_.erase(it);
        uncount(fd);
      } else {
        ++it;
      }
    }
  }

  /// The items left, for their owner to free (the lock held).
  std::deque<T>& items() { return items_; }

  /// Waits for an item and takes it: 0, or -1 with errno EAGAIN (the fd is
  /// O_NONBLOCK and nothing is ready), EINTR, or EBADF (the fd was closed
  /// before the call). The engine keeps stepping while the caller waits
  /// (Provider::Waiting). The caller is counted and holds a duplicate of fd
  /// before it takes the device lock, so a program that destroys the channel
  /// while a thread is in here (rping does so at exit, its CM thread on its
  /// way back into rdma_get_cm_event) leaves that thread waiting, as a read
  /// of a kernel fd that another thread closes waits on.
  /// on_take(out) runs under the lock once the item is taken (to count it
  /// against its object before anyone can destroy that).
  template <class OnTake>
  int take(Provider& p, int fd, T& out, OnTake on_take) {
    waiters_.fetch_add(1, std::memory_order_relaxed);
    const int mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    struct Leave {  // also when a cancelled thread unwinds out of poll()
      ~Leave() {
        Guard g(p.lock());
        q.waiters_.fetch_sub(1, std::memory_order_relaxed);
        if (mine >= 0) ::close(mine);
      }
      Provider& p;
      ReadyQueue& q;
      int mine;
    } leave{p, *this, mine};
    if (mine < 0) return -1;  // errno from fcntl: EBADF
    for (;;) {
      bool gone;  // the channel was destroyed: wait on, nothing will come
      {
        Guard g(p.lock());
        gone = closed_;
        if (!gone && pop(mine, out)) {
          on_take(out);
          return 0;
        }
      }
      if (!gone && (fcntl(mine, F_GETFL) & O_NONBLOCK)) {
        errno = EAGAIN;
        return -1;
      }
      Provider::Waiting w(p);
      pollfd pfd{mine, POLLIN, 0};
      if (poll(&pfd, 1, -1) < 0) return -1;  // errno: EINTR
    }
  }

  int take(Provider& p, int fd, T& out) {
    return take(p, fd, out, [](const T&) {});
  }

  /// The owner destroys the channel (the lock held): nothing comes any more,
  /// and the threads in take() wait on.
  void close() { closed_ = true; }
  /// No thread is in take() (the lock held).
  bool idle() const { return waiters_.load(std::memory_order_relaxed) == 0; }

 private:
  bool pop(int fd, T& out) {
    if (items_.empty()) return false;
    out = items_.front();
    items_.pop_front();
    uncount(fd);
    return true;
  }

  // The lock held and the count >= 1, so this read does not block.
  static void uncount(int fd) {
    uint64_t one;
    if (read(fd, &one, sizeof one) != sizeof one) std::abort();
  }

  std::deque<T> items_;
  std::atomic<int> waiters_{0};  // threads in take(), counted before they take the lock
  bool closed_ = false;
};

/// A channel the program destroyed (closed, the lock held) is freed by
/// release only after kRetiredChannels more have been destroyed, its fd open
/// until then. A thread on its way into take() when another thread destroys
/// the channel (rping's CM thread, as rping exits) then waits there on a
/// channel nothing fills, as a read of a kernel fd closed under it waits,
/// instead of finding a closed fd or freed memory.
/// Those still kept at exit stay as they are (reachable, so no leak), their
/// fds open until the process is gone: a thread on its way in as the
/// process exits must not find them closed either.
inline void retire(std::function<void()> release) {
  constexpr size_t kRetiredChannels = 16;
  static auto* const kept = new std::deque<std::function<void()>>;
  kept->push_back(std::move(release));
  if (kept->size() <= kRetiredChannels) return;
  const std::function<void()> oldest = std::move(kept->front());
  kept->pop_front();
  oldest();
}

}  // namespace uroce::ibv
