// Tests for include/uroce/wr.h: the opcode predicates against the stack's
// table (stack/transport/qp.h, kWrOps) and the IBA operation classes
// (IBA 9.4, 10.8.3), for every opcode value; and that each builder fills
// exactly the fields its verb reads.
#include <uroce/wr.h>

#include <gtest/gtest.h>

#include "stack/transport/qp.h"

namespace uroce {
namespace {

using Op = WrOpcode;

// Every predicate for every value of the opcode byte: the enumerators as IBA
// classes them, and false for values that are no opcode (8, 10..255).
TEST(WrOpcodes, PredicatesForEveryOpcodeValue) {
  struct Row {
    Op op;
    bool send, write, read, atomic, imm, recv;
  };
  const Row kRows[] = {
      {Op::kRdmaWrite, false, true, false, false, false, false},
      {Op::kRdmaWriteWithImm, false, true, false, false, true, true},
      {Op::kSend, true, false, false, false, false, true},
      {Op::kSendWithImm, true, false, false, false, true, true},
      {Op::kRdmaRead, false, false, true, false, false, false},
      {Op::kAtomicCmpAndSwp, false, false, false, true, false, false},
      {Op::kAtomicFetchAndAdd, false, false, false, true, false, false},
      {Op::kLocalInv, false, false, false, false, false, false},
      {Op::kSendWithInv, true, false, false, false, false, true},
  };
  for (const Row& r : kRows) {
    SCOPED_TRACE(int(r.op));
    EXPECT_EQ(is_send(r.op), r.send);
    EXPECT_EQ(is_rdma_write(r.op), r.write);
    EXPECT_EQ(is_rdma_read(r.op), r.read);
    EXPECT_EQ(is_atomic(r.op), r.atomic);
    EXPECT_EQ(is_rd_atomic(r.op), r.read || r.atomic);
    EXPECT_EQ(has_imm(r.op), r.imm);
    EXPECT_EQ(needs_remote_addr(r.op), r.write || r.read || r.atomic);
    EXPECT_EQ(consumes_recv(r.op), r.recv);
  }
  for (int v = 0; v < 256; ++v) {
    const auto op = Op(v);
    if (transport::find_wr_op(op)) {
      EXPECT_EQ(is_rd_atomic(op), transport::is_rd_atomic_op(op)) << v;  // the stack's own rule
      continue;
    }
    EXPECT_FALSE(is_send(op) || is_rdma_write(op) || is_rdma_read(op) || is_atomic(op) || is_rd_atomic(op) ||
                 has_imm(op) || needs_remote_addr(op) || consumes_recv(op))
        << v;
  }
}

TEST(WrBuilders, EachFillsItsVerbsFields) {
  Sge g{0x1000, 64, 0x77};
  const SendWr s = send_wr(1, &g);
  EXPECT_EQ(s.wr_id, 1u);
  EXPECT_EQ(s.opcode, Op::kSend);
  EXPECT_EQ(s.sg_list, &g);
  EXPECT_EQ(s.num_sge, 1);
  EXPECT_EQ(s.send_flags, 0u);
  EXPECT_EQ(s.next, nullptr);
  EXPECT_EQ(send_wr(1, nullptr).num_sge, 0);

  const SendWr si = send_imm_wr(2, &g, 0xdeadbeef);
  EXPECT_EQ(si.opcode, Op::kSendWithImm);
  EXPECT_EQ(si.imm_data, 0xdeadbeefu);
  const SendWr sv = send_inv_wr(3, &g, 0x1234);
  EXPECT_EQ(sv.opcode, Op::kSendWithInv);
  EXPECT_EQ(sv.invalidate_rkey, 0x1234u);

  Ah* ah = reinterpret_cast<Ah*>(uintptr_t(0x40));  // only stored, never followed
  const SendWr u = ud_send_wr(4, &g, ah, 0x99, 0x11111111);
  EXPECT_EQ(u.opcode, Op::kSend);
  EXPECT_EQ(u.ud.ah, ah);
  EXPECT_EQ(u.ud.remote_qpn, 0x99u);
  EXPECT_EQ(u.ud.remote_qkey, 0x11111111u);

  const SendWr w = write_wr(5, &g, 0xabc000, 0x55);
  EXPECT_EQ(w.opcode, Op::kRdmaWrite);
  EXPECT_EQ(w.rdma.remote_addr, 0xabc000u);
  EXPECT_EQ(w.rdma.rkey, 0x55u);
  EXPECT_EQ(w.atomic.rkey, 0u);
  const SendWr wi = write_imm_wr(6, &g, 0xabc000, 0x55, 7);
  EXPECT_EQ(wi.opcode, Op::kRdmaWriteWithImm);
  EXPECT_EQ(wi.imm_data, 7u);
  EXPECT_EQ(wi.rdma.rkey, 0x55u);
  const SendWr r = read_wr(7, &g, 0xabc000, 0x56);
  EXPECT_EQ(r.opcode, Op::kRdmaRead);
  EXPECT_EQ(r.rdma.remote_addr, 0xabc000u);
  EXPECT_EQ(r.rdma.rkey, 0x56u);

  const SendWr cs = cmp_swap_wr(8, &g, 0xabc008, 0x57, 5, 9);
  EXPECT_EQ(cs.opcode, Op::kAtomicCmpAndSwp);
  EXPECT_EQ(cs.atomic.remote_addr, 0xabc008u);
  EXPECT_EQ(cs.atomic.rkey, 0x57u);
  EXPECT_EQ(cs.atomic.compare_add, 5u);
  EXPECT_EQ(cs.atomic.swap, 9u);
  EXPECT_EQ(cs.rdma.rkey, 0u);
  const SendWr fa = fetch_add_wr(9, &g, 0xabc008, 0x57, 23);
  EXPECT_EQ(fa.opcode, Op::kAtomicFetchAndAdd);
  EXPECT_EQ(fa.atomic.compare_add, 23u);
  EXPECT_EQ(fa.atomic.swap, 0u);

  const SendWr li = local_inv_wr(10, 0x4242);
  EXPECT_EQ(li.opcode, Op::kLocalInv);
  EXPECT_EQ(li.invalidate_rkey, 0x4242u);
  EXPECT_EQ(li.num_sge, 0);
}

TEST(WrBuilders, ChainedSettersAddFlags) {
  Sge g{0x1000, 64, 0x77};
  const SendWr w = send_wr(1, &g).signaled().solicited().fenced().inlined();
  EXPECT_EQ(w.send_flags, uint32_t(kSendSignaled | kSendSolicited | kSendFence | kSendInline));
  SendWr v = send_wr(2, &g);
  v.signaled();
  EXPECT_EQ(v.send_flags, uint32_t(kSendSignaled));
}

}  // namespace
}  // namespace uroce
