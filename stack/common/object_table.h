// Owner of a device's verbs objects of one kind (PDs, CQs, SRQs, AHs, QPs):
// a fixed number of slots, created and destroyed on the control path. Slot
// indices are stable for an object's lifetime (a QP's QPN is derived from its).
#pragma once

#include <cstdint>
#include <memory_resource>
#include <vector>

#include "stack/common/state_memory.h"

namespace uroce {

template <typename T>
class ObjectTable {
 public:
  void init(uint32_t max) {
    slots_.resize(max);
    generations_.resize(max);
  }

  /// Creates an object in a free slot, searching from after the last one used
  /// so that a freed slot (and its QPN) is not reused at once. nullptr if full.
  T* add(uint32_t* index = nullptr) {
    for (size_t n = 0; n < slots_.size(); ++n) {
      const size_t i = (next_ + n) % slots_.size();
      if (slots_[i]) continue;
      slots_[i] = make_state_object<T>();
      ++generations_[i];
      next_ = uint32_t(i + 1);
      if (index) *index = uint32_t(i);
      return slots_[i].get();
    }
    return nullptr;
  }
  /// Destroys p if this table owns it; false otherwise.
  bool remove(const T* p) {
    for (auto& s : slots_) {
      if (s && s.get() == p) {
        s.reset();
        return true;
      }
    }
    return false;
  }
  T* at(uint32_t i) const { return i < slots_.size() ? slots_[i].get() : nullptr; }
  uint32_t capacity() const { return uint32_t(slots_.size()); }
  /// How many objects slot i has held: tells a new object from an earlier one in the same slot.
  uint32_t generation(uint32_t i) const { return generations_[i]; }

 private:
  std::pmr::vector<StateBox<T>> slots_{state_memory()};
  std::pmr::vector<uint32_t> generations_{state_memory()};
  uint32_t next_ = 0;
};

}  // namespace uroce
