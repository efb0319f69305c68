// Receive queues (IBA 10.8.4) and shared receive queues (IBA 10.2.9): a ring
// of receive WQEs, each with up to max_sge scatter entries in a parallel array.
#pragma once

#include <memory>

#include <uroce/verbs.h>

#include "stack/common/state_memory.h"
#include "stack/common/ring.h"

namespace uroce::transport {

struct RecvWqe {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  uint32_t length = 0;  // sum of the SGE lengths
};

struct RecvQueue {
  Ring<RecvWqe> ring;
  StateArray<Sge> sges;
  uint32_t max_sge = 0;

  void init(uint32_t max_wr, uint32_t max_sge_per_wqe);
  const Sge* sges_of(uint32_t index) const { return &sges[ring.slot(index) * max_sge]; }
  /// Appends the chain at wr (data path). On failure *bad_wr is the first WR not posted.
  Status post(RecvWr* wr, RecvWr** bad_wr);
};

struct SrqImpl : Srq {
  RecvQueue rq;
  uint32_t refs = 0;   // QPs attached
  uint32_t limit = 0;  // IBA 10.2.9.3: the armed SRQ limit; 0 not armed
};

inline SrqImpl& impl(Srq* srq) { return *static_cast<SrqImpl*>(srq); }

}  // namespace uroce::transport
