// The state memory pool (state_memory.h): a synchronized pool over chunks
// that are huge-page aligned and marked MADV_HUGEPAGE once they are big
// enough to fill huge pages.
#include "stack/common/state_memory.h"

#include <sys/mman.h>

#include <atomic>
#include <new>

namespace uroce {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

// The pool's chunks: anonymous mappings, so the state never mixes with the
// malloc heap. From one huge page up they are aligned to the huge page size
// and rounded up to whole huge pages, which the kernel backs with huge pages
// at first touch; a pool's first chunks are smaller and stay on small pages.
class HugePageChunks final : public std::pmr::memory_resource {
 public:
  static constexpr size_t kHugePageBytes = size_t(2) << 20;  // x86-64 and arm64 (4 KiB granule) PMD size

 private:
  static size_t mapped_len(size_t bytes) {
    const size_t unit = bytes < kHugePageBytes ? size_t(4096) : kHugePageBytes;
    return (bytes + unit - 1) & ~(unit - 1);
  }

  void* do_allocate(size_t bytes, size_t align) override {
    if (align > kHugePageBytes) throw std::bad_alloc();
    const size_t len = mapped_len(bytes);
    if (len < kHugePageBytes) {  // page-aligned, which suffices for any smaller align
      void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      return p;
    }
    // Map one huge page more than needed and trim to an aligned start.
    void* raw = mmap(nullptr, len + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t start = uintptr_t(raw);
    const uintptr_t aligned = (start + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t end = start + len + kHugePageBytes;
    if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
    // Fails harmlessly (EINVAL) where THP is compiled out or set to "never".
    madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
    return reinterpret_cast<void*>(aligned);
  }

  void do_deallocate(void* p, size_t bytes, size_t /*align*/) override { munmap(p, mapped_len(bytes)); }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }
};

// The front: counts what the stack holds (state_memory_bytes).
class Counted final : public std::pmr::memory_resource {
 public:
  explicit Counted(std::pmr::memory_resource* upstream) : upstream_(upstream) {}
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  void* do_allocate(size_t bytes, size_t align) override {
    void* p = upstream_->allocate(bytes, align);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return p;
  }
  void do_deallocate(void* p, size_t bytes, size_t align) override {
    upstream_->deallocate(p, bytes, align);
    bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  std::pmr::memory_resource* upstream_;
  std::atomic<size_t> bytes_{0};
};

Counted& counted() {
  // Leaked on purpose (state_memory.h). Blocks up to 1 MiB are pooled, so
  // thousands of QPs' objects and rings share huge-page chunks; larger ones
  // (per-device tables sized by max_qp) get chunks of their own.
  static auto* const c = new Counted(
      kAsan ? std::pmr::new_delete_resource()
            : new std::pmr::synchronized_pool_resource(
                  std::pmr::pool_options{.max_blocks_per_chunk = 0, .largest_required_pool_block = size_t(1) << 20},
                  new HugePageChunks));
  return *c;
}

}  // namespace

std::pmr::memory_resource* state_memory() { return &counted(); }

size_t state_memory_bytes() { return counted().bytes(); }

}  // namespace uroce
