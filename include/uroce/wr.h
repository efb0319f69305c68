// Work requests made short: what each send opcode does (predicates read from
// the stack's own opcode table, so they cannot disagree with what post_send
// does), and builders for the SendWr of each operation (IBA 10.8.3, 11.4.1.1),
// named after the verbs they fill in. A builder fills the fields its opcode
// reads and leaves the rest at their defaults (unsignaled, no next WR); the
// chainable setters on SendWr add flags: `post_send(qp, &wr, nullptr)` with
// `SendWr wr = write_wr(1, &sge, raddr, rkey).signaled();`.
//
// Not included by <uroce/verbs.h>: include it where it is used.
#pragma once

#include <cstdint>

#include <uroce/verbs.h>

namespace uroce {

// ---------------------------------------------------------------- opcode predicates

// Pure functions of the opcode, callable from any thread. An opcode value that
// is not a WrOpcode enumerator gives false in each.

/// SEND, SEND with Immediate, SEND with Invalidate (on RC, UC and UD).
bool is_send(WrOpcode op);
/// RDMA WRITE, RDMA WRITE with Immediate.
bool is_rdma_write(WrOpcode op);
/// RDMA READ.
bool is_rdma_read(WrOpcode op);
/// Compare and Swap, Fetch and Add (RC only; 8 bytes at an 8-byte aligned remote address).
bool is_atomic(WrOpcode op);
/// RDMA READ or atomic: the operations of which at most max_rd_atomic are
/// outstanding at a time (IBA 9.7.5.1.4), each completed by its response.
bool is_rd_atomic(WrOpcode op);
/// Carries immediate data (SendWr::imm_data) to the receiver's completion.
bool has_imm(WrOpcode op);
/// Targets remote memory, so SendWr::rdma or SendWr::atomic must name a
/// remote address and R_Key: WRITE, READ and the atomics.
bool needs_remote_addr(WrOpcode op);
/// Consumes a receive WQE at the target: the SENDs and RDMA WRITE with Immediate.
bool consumes_recv(WrOpcode op);

// ---------------------------------------------------------------- builders

// Each takes the work request ID (returned in its Wc) and one scatter/gather
// element `sge`, which the WR points at (so it must live until post_send
// returns; its memory until the completion); nullptr makes a zero-length
// message. For several elements, set sg_list and num_sge afterwards.
// Remote addresses are virtual addresses in the peer's region with R_Key rkey.

/// SEND of the bytes at sge.
inline SendWr send_wr(uint64_t wr_id, Sge* sge) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = sge;
  wr.num_sge = sge ? 1 : 0;
  wr.opcode = WrOpcode::kSend;
  return wr;
}

/// SEND with Immediate: imm (host order) reaches the receiver's Wc::imm_data.
inline SendWr send_imm_wr(uint64_t wr_id, Sge* sge, uint32_t imm) {
  SendWr wr = send_wr(wr_id, sge);
  wr.opcode = WrOpcode::kSendWithImm;
  wr.imm_data = imm;
  return wr;
}

/// SEND with Invalidate: the receiver invalidates its R_Key rkey (IBA 10.6.6).
inline SendWr send_inv_wr(uint64_t wr_id, Sge* sge, uint32_t rkey) {
  SendWr wr = send_wr(wr_id, sge);
  wr.opcode = WrOpcode::kSendWithInv;
  wr.invalidate_rkey = rkey;
  return wr;
}

/// UD SEND to QP remote_qpn behind address handle ah, with Q_Key remote_qkey
/// (IBA 10.2.5: a Q_Key with the high bit set means "use the QP's own").
inline SendWr ud_send_wr(uint64_t wr_id, Sge* sge, Ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  SendWr wr = send_wr(wr_id, sge);
  wr.ud.ah = ah;
  wr.ud.remote_qpn = remote_qpn;
  wr.ud.remote_qkey = remote_qkey;
  return wr;
}

/// RDMA WRITE of the bytes at sge to remote_addr.
inline SendWr write_wr(uint64_t wr_id, Sge* sge, uint64_t remote_addr, uint32_t rkey) {
  SendWr wr = send_wr(wr_id, sge);
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.rdma.remote_addr = remote_addr;
  wr.rdma.rkey = rkey;
  return wr;
}

/// RDMA WRITE with Immediate: as write_wr, and imm (host order) completes a
/// receive WQE at the target.
inline SendWr write_imm_wr(uint64_t wr_id, Sge* sge, uint64_t remote_addr, uint32_t rkey, uint32_t imm) {
  SendWr wr = write_wr(wr_id, sge, remote_addr, rkey);
  wr.opcode = WrOpcode::kRdmaWriteWithImm;
  wr.imm_data = imm;
  return wr;
}

/// RDMA READ of sge->length bytes at remote_addr into the bytes at sge.
inline SendWr read_wr(uint64_t wr_id, Sge* sge, uint64_t remote_addr, uint32_t rkey) {
  SendWr wr = write_wr(wr_id, sge, remote_addr, rkey);
  wr.opcode = WrOpcode::kRdmaRead;
  return wr;
}

/// Compare and Swap on the 8 bytes at remote_addr: if they equal compare they
/// become swap. The original value lands in the 8 bytes at sge.
inline SendWr cmp_swap_wr(uint64_t wr_id, Sge* sge, uint64_t remote_addr, uint32_t rkey, uint64_t compare,
                          uint64_t swap) {
  SendWr wr = send_wr(wr_id, sge);
  wr.opcode = WrOpcode::kAtomicCmpAndSwp;
  wr.atomic.remote_addr = remote_addr;
  wr.atomic.rkey = rkey;
  wr.atomic.compare_add = compare;
  wr.atomic.swap = swap;
  return wr;
}

/// Fetch and Add: adds add to the 8 bytes at remote_addr (modulo 2^64). The
/// original value lands in the 8 bytes at sge.
inline SendWr fetch_add_wr(uint64_t wr_id, Sge* sge, uint64_t remote_addr, uint32_t rkey, uint64_t add) {
  SendWr wr = cmp_swap_wr(wr_id, sge, remote_addr, rkey, add, 0);
  wr.opcode = WrOpcode::kAtomicFetchAndAdd;
  return wr;
}

/// LOCAL_INV: invalidates the local region key rkey, in order with the WRs
/// before it (IBA 10.6.6.1). Sends nothing.
inline SendWr local_inv_wr(uint64_t wr_id, uint32_t rkey) {
  SendWr wr = send_wr(wr_id, nullptr);
  wr.opcode = WrOpcode::kLocalInv;
  wr.invalidate_rkey = rkey;
  return wr;
}

}  // namespace uroce
