// The public opcode predicates of <uroce/wr.h>, read from the stack's one
// table of send opcodes (kWrOps in qp.h), so that they say what post_send and
// the requester do.
#include <uroce/wr.h>

#include "stack/transport/qp.h"

namespace uroce {

namespace {

// The opcode's wire::OpFlags class (kSend, kWrite, kRead, kAtomic, kImm, kInv), 0 if not an opcode.
uint32_t op_flags(WrOpcode op) {
  const transport::WrOpInfo* info = transport::find_wr_op(op);
  return info ? info->flags : 0;
}

}  // namespace

bool is_send(WrOpcode op) { return op_flags(op) & wire::kSend; }
bool is_rdma_write(WrOpcode op) { return op_flags(op) & wire::kWrite; }
bool is_rdma_read(WrOpcode op) { return op_flags(op) & wire::kRead; }
bool is_atomic(WrOpcode op) { return op_flags(op) & wire::kAtomic; }
bool is_rd_atomic(WrOpcode op) { return transport::find_wr_op(op) && transport::is_rd_atomic_op(op); }
bool has_imm(WrOpcode op) { return op_flags(op) & wire::kImm; }
bool needs_remote_addr(WrOpcode op) { return op_flags(op) & (wire::kWrite | wire::kRead | wire::kAtomic); }
bool consumes_recv(WrOpcode op) { return (op_flags(op) & wire::kSend) || has_imm(op); }

}  // namespace uroce
