// A page-aligned byte buffer for the memory a tool registers (the tools
// align it as perftest does, with its pages). One place for the pairing of
// aligned new[] with aligned delete[]: a plain unique_ptr<uint8_t[]> would
// free it with the unaligned operator delete[], a mismatch ASan reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace uroce::apps {

inline constexpr size_t kPageBytes = 4096;

struct PageDelete {
  void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(kPageBytes)); }
};
using PageBuffer = std::unique_ptr<uint8_t[], PageDelete>;

/// bytes of uninitialised memory starting on a page boundary.
inline PageBuffer page_buffer(size_t bytes) { return PageBuffer(new (std::align_val_t(kPageBytes)) uint8_t[bytes]); }

}  // namespace uroce::apps
