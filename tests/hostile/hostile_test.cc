// Hostile-peer tests: crafted frames from an attacker on the fabric against a
// victim device's RC and UD QPs (harness: hostile.h). Each case checks
//   - the spec's answer (NAK code, or silence where the spec drops),
//   - the victim's counter for it,
//   - that no byte of registered memory the attack names changed (and, in
//     TearDown, that every canary around every region is intact; the guard
//     pages make an overrun fault),
//   - that the honest peer's verified traffic on another QP runs before,
//     during and after the attack.
// Receive: ... / Expect: ... comments follow tests/unit.
#include <rte_mempool.h>

#include <cstring>
#include <random>

#include "stack/wire/aeth.h"
#include "tests/hostile/hostile.h"

namespace uroce::hostile {
namespace {

using wire::PacketDesc;
constexpr int kNakInvReq = int(wire::NakCode::kInvalidRequest);
constexpr int kNakRemAccess = int(wire::NakCode::kRemoteAccessError);

std::vector<uint8_t> bytes(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

int count_nak(const std::vector<Reply>& rs, int code) {
  int n = 0;
  for (const Reply& r : rs) n += nak_code(r) == code;
  return n;
}
int count_op(const std::vector<Reply>& rs, uint8_t op) {
  int n = 0;
  for (const Reply& r : rs) n += r.d.opcode == op;
  return n;
}

class Attack : public Hostile {
 protected:
  // Honest round 0 before the attack, round 1 while `attack` runs (it is
  // called at every engine step until it returns; once_ makes single-frame
  // attacks fire on the first step), round 2 after.
  template <typename F>
  void honest_around(F&& attack) {
    ASSERT_TRUE(honest_round(0)) << "honest traffic before the attack";
    ASSERT_TRUE(honest_round_under(1, attack)) << "honest traffic during the attack";
    ASSERT_TRUE(honest_round(2)) << "honest traffic after the attack";
    EXPECT_EQ(state(vh_), QpState::kRts);
    const Counters& hc = query_qp_counters(vh_);
    EXPECT_EQ(hc.get(Counter::resp_remote_access_errors) + hc.get(Counter::resp_remote_invalid_request) +
                  hc.get(Counter::out_of_sequence) + hc.get(Counter::duplicate_request),
              0u)
        << "the attack reached the honest QP";
  }
  /// honest_around with an attack that runs once, at the first step.
  template <typename F>
  void honest_around_once(F&& attack) {
    bool done = false;
    honest_around([&] {
      if (done) return;
      done = true;
      attack();
    });
  }

  /// One bad request to vx; returns the victim's replies, checking that the
  /// honest QP is untouched around it.
  std::vector<Reply> one_bad(const PacketDesc& d, std::span<const uint8_t> payload = {}) {
    honest_around_once([&] { send(d, payload); });
    // The victim's answers wait in the attacker's receive ring.
    return replies(100'000);
  }

  /// A request `opcode` (RDMA WRITE or READ) from the attacker naming
  /// [va, va + len) under rkey.
  PacketDesc rdma(uint8_t opcode, uint64_t va, uint32_t rkey, uint32_t len) {
    PacketDesc d = req(opcode);
    d.reth_va = va;
    d.reth_rkey = rkey;
    d.reth_len = len;
    return d;
  }
  /// An atomic request `opcode` from the attacker on the 8 bytes at va under rkey.
  PacketDesc atomic(uint8_t opcode, uint64_t va, uint32_t rkey, uint64_t swap_add) {
    PacketDesc d = req(opcode);
    d.atomic_va = va;
    d.atomic_rkey = rkey;
    d.atomic_swap_add = swap_add;
    return d;
  }

  // Class C responder errors (IBA 9.9.3.1.2, responder side of 9.7.5.2.x):
  // sends d (one_bad) and checks one NAK with `code`, counter c up by exactly
  // one, the QP to ERR. Returns the replies for the case's own checks (memory
  // unchanged, no READ response or atomic ACK).
  std::vector<Reply> expect_class_c(const PacketDesc& d, std::span<const uint8_t> payload, int code, Counter c) {
    const uint64_t before = count(c);
    std::vector<Reply> rs = one_bad(d, payload);
    EXPECT_EQ(count_nak(rs, code), 1) << "NAK code " << code;
    EXPECT_EQ(count(c) - before, 1u) << kCounterNames[size_t(c)];
    EXPECT_EQ(state(vx_), QpState::kErr);
    return rs;
  }
  /// expect_class_c with NAK remote access error, counted as resp_remote_access_errors.
  std::vector<Reply> expect_nak_remote_access(const PacketDesc& d, std::span<const uint8_t> payload = {}) {
    return expect_class_c(d, payload, kNakRemAccess, Counter::resp_remote_access_errors);
  }
  /// expect_class_c with NAK invalid request, counted as resp_remote_invalid_request.
  std::vector<Reply> expect_nak_invalid_request(const PacketDesc& d, std::span<const uint8_t> payload = {}) {
    return expect_class_c(d, payload, kNakInvReq, Counter::resp_remote_invalid_request);
  }

  /// Posts one receive WQE wr_id on qp: len bytes at the start of local_.
  void post_local_recv(Qp* qp, uint64_t wr_id, uint32_t len) {
    Sge s{local_.addr(0), len, local_mr_->lkey};
    RecvWr rwr;
    rwr.wr_id = wr_id;
    rwr.sg_list = &s;
    rwr.num_sge = 1;
    ASSERT_TRUE(post_recv(qp, &rwr, nullptr).ok());
  }
};

// ---------------------------------------------------------------- R_Key and bounds

// Receive: RDMA WRITE Only of 64 bytes whose last 32 lie past the end of the
// region the R_Key names.
// Expect: IBA 9.7.5.2: the range [VA, VA+len) must lie inside the
// region, else NAK remote access error (class C); nothing is written, not
// even the part inside the region.
TEST_F(Attack, WriteBeyondRegionEnd_NakRemoteAccess) {
  expect_nak_remote_access(rdma(wire::kRcWriteOnly, rw_.addr(kMrBytes - 32), rw_mr_->rkey, 64), bytes(64, 0xee));
  EXPECT_TRUE(rw_.unchanged());
}

// Receive: RDMA WRITE Only starting 8 bytes before the region.
// Expect: IBA 9.7.5.2: NAK remote access error; nothing written.
TEST_F(Attack, WriteBeforeRegionStart_NakRemoteAccess) {
  expect_nak_remote_access(rdma(wire::kRcWriteOnly, rw_.addr() - 8, rw_mr_->rkey, 16), bytes(16, 0xee));
  EXPECT_TRUE(rw_.unchanged());
}

// Receive: a multi-packet RDMA WRITE (First inside the region, length past
// its end).
// Expect: IBA 9.7.5.2: the whole range is checked at the First packet: NAK
// remote access error there; the Middle/Last that follow are dropped (the
// QP is in ERR); nothing written.
TEST_F(Attack, MultiPacketWriteOverrunningRegion_NakAtFirst) {
  PacketDesc d = rdma(wire::kRcWriteFirst, rw_.addr(kMrBytes - 1024), rw_mr_->rkey, 3072);
  d.ack_req = false;
  const uint64_t c0 = count(Counter::resp_remote_access_errors);
  send(d, bytes(1024, 0xee));
  PacketDesc m = req(wire::kRcWriteMiddle);
  m.psn = xpsn_ + 1;
  m.ack_req = false;
  send(m, bytes(1024, 0xee));
  PacketDesc l = req(wire::kRcWriteLast);
  l.psn = xpsn_ + 2;
  send(l, bytes(1024, 0xee));
  auto rs = replies();
  EXPECT_EQ(count_nak(rs, kNakRemAccess), 1);
  EXPECT_EQ(rs.size(), 1u);
  EXPECT_EQ(count(Counter::resp_remote_access_errors) - c0, 1u);
  EXPECT_EQ(state(vx_), QpState::kErr);
  EXPECT_TRUE(rw_.unchanged());
  ASSERT_TRUE(honest_round(0));
}

// Receive: RDMA READ of 200 bytes, the last 100 past the region's end.
// Expect: IBA 9.7.5.2: NAK remote access error and no READ response at
// all (not even the bytes inside the region: no data leaves).
TEST_F(Attack, ReadBeyondRegionEnd_NakRemoteAccessNoData) {
  auto rs = expect_nak_remote_access(rdma(wire::kRcReadRequest, ro_.addr(kMrBytes - 100), ro_mr_->rkey, 200));
  for (uint8_t op : {wire::kRcReadResponseOnly, wire::kRcReadResponseFirst, wire::kRcReadResponseLast}) {
    EXPECT_EQ(count_op(rs, op), 0);
  }
}

// Receive: FETCH_ADD at the first 8-byte word past the region.
// Expect: IBA 9.7.5.2: NAK remote access error; nothing added anywhere.
TEST_F(Attack, AtomicBeyondRegionEnd_NakRemoteAccess) {
  auto rs = expect_nak_remote_access(
      atomic(wire::kRcFetchAdd, rw_.addr(kMrBytes), rw_mr_->rkey, 0x0101010101010101ull));
  EXPECT_EQ(count_op(rs, wire::kRcAtomicAcknowledge), 0);
  EXPECT_TRUE(rw_.unchanged());
}

// Receive: RDMA WRITE with an R_Key that differs from a valid one in the key bits.
// Expect: IBA 9.7.5.2 / 10.6.3.1: an R_Key that names no valid region is
// an R_Key violation: NAK remote access error; nothing written.
TEST_F(Attack, WriteWithWrongRkey_NakRemoteAccess) {
  expect_nak_remote_access(rdma(wire::kRcWriteOnly, rw_.addr(0), rw_mr_->rkey ^ 0x00100000u, 64), bytes(64, 0xee));
  EXPECT_TRUE(rw_.unchanged());
}

// Receive: RDMA WRITE and RDMA READ with the R_Key of a region that allows
// remote access but belongs to another protection domain of the victim.
// Expect: IBA 10.2.3 / 9.7.5.2: the region's PD must be the QP's: NAK
// remote access error; nothing written, nothing read.
TEST_F(Attack, WriteWithRkeyOfAnotherPd_NakRemoteAccess) {
  expect_nak_remote_access(rdma(wire::kRcWriteOnly, pd2_.addr(0), pd2_mr_->rkey, 64), bytes(64, 0xee));
  EXPECT_TRUE(pd2_.unchanged());
}

TEST_F(Attack, ReadWithRkeyOfAnotherPd_NakRemoteAccess) {
  auto rs = expect_nak_remote_access(rdma(wire::kRcReadRequest, pd2_.addr(0), pd2_mr_->rkey, 64));
  EXPECT_EQ(count_op(rs, wire::kRcReadResponseOnly), 0);
}

// Receive: RDMA WRITE to a region registered remote-read only.
// Expect: IBA 10.6.3.1 / 9.7.5.2: access not granted: NAK remote access
// error; nothing written.
TEST_F(Attack, WriteWithoutRemoteWriteAccess_NakRemoteAccess) {
  expect_nak_remote_access(rdma(wire::kRcWriteOnly, ro_.addr(0), ro_mr_->rkey, 64), bytes(64, 0xee));
  EXPECT_TRUE(ro_.unchanged());
}

// Receive: RDMA READ from a region registered local-write only (the key is
// the L_Key the victim uses for its own receive buffers).
// Expect: IBA 10.6.3.1: NAK remote access error, no READ response.
TEST_F(Attack, ReadWithoutRemoteReadAccess_NakRemoteAccess) {
  auto rs = expect_nak_remote_access(rdma(wire::kRcReadRequest, local_.addr(0), local_mr_->lkey, 64));
  EXPECT_EQ(count_op(rs, wire::kRcReadResponseOnly), 0);
}

// Receive: COMPARE_SWAP on a region without remote atomic access.
// Expect: IBA 10.6.3.1: NAK remote access error; nothing swapped.
TEST_F(Attack, AtomicWithoutRemoteAtomicAccess_NakRemoteAccess) {
  PacketDesc d = atomic(wire::kRcCompareSwap, ro_.addr(64), ro_mr_->rkey, 0xdeadbeefdeadbeefull);
  std::memcpy(&d.atomic_compare, ro_.data() + 64, 8);
  expect_nak_remote_access(d);
  EXPECT_TRUE(ro_.unchanged());
}

// Receive: RDMA WRITE with the R_Key of a region the victim has deregistered.
// Expect: IBA 11.2.8.5 / 9.7.5.2: the key names no region: NAK remote
// access error; the memory that was the region is unchanged.
TEST_F(Attack, WriteToDeregisteredRegion_NakRemoteAccess) {
  GuardedBuf gone(4096);
  gone.fill(9);
  Mr* mr = reg_mr(vpd_, gone.data(), gone.size(), kAllRemote).value();
  const uint32_t rkey = mr->rkey;
  ASSERT_TRUE(dereg_mr(mr).ok());
  expect_nak_remote_access(rdma(wire::kRcWriteOnly, gone.addr(0), rkey, 64), bytes(64, 0xee));
  EXPECT_TRUE(gone.unchanged());
  EXPECT_TRUE(gone.canaries_intact());
}

// Receive: RDMA WRITE with the R_Key of a region the victim invalidated
// with a LOCAL_INV work request.
// Expect: IBA 10.6.6: an invalidated key is in the Invalid state and every
// access with it fails: NAK remote access error; nothing written.
TEST_F(Attack, WriteToInvalidatedRegion_NakRemoteAccess) {
  GuardedBuf inv(4096);
  inv.fill(10);
  Mr* mr = reg_mr(vpd_, inv.data(), inv.size(), kAllRemote).value();
  SendWr w = local_inv_wr(77, mr->rkey).signaled();
  ASSERT_TRUE(post_send(vh_, &w, nullptr).ok());
  Wc wc{};
  for (int i = 0; i < 1000 && poll_cq(vcq_, 1, &wc) == 0; ++i) step();
  ASSERT_EQ(wc.wr_id, 77u);
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  expect_nak_remote_access(rdma(wire::kRcWriteOnly, inv.addr(0), mr->rkey, 64), bytes(64, 0xee));
  EXPECT_TRUE(inv.unchanged());
  EXPECT_TRUE(inv.canaries_intact());
  ASSERT_TRUE(dereg_mr(mr).ok());
}

// Receive: SEND with Invalidate naming the R_Key of a plain registered region
// (reg_mr), then an RDMA WRITE to it on another QP.
// Expect: IBA 10.6.6: remote invalidation applies only to keys
// created for it (fast registration, memory windows); a region from
// reg_mr cannot be invalidated by a peer: NAK invalid request, and the
// region stays valid for its owner's other connections.
TEST_F(Attack, SendWithInvalidateOfPlainRegion_NakInvalidRequest) {
  ASSERT_NO_FATAL_FAILURE(post_local_recv(vx_, 5, 256));
  PacketDesc d = req(wire::kRcSendOnlyInv);
  d.ieth_rkey = vhon_mr_->rkey;  // the honest connection's region
  expect_nak_invalid_request(d, bytes(16, 0xee));
  ASSERT_TRUE(honest_round(3)) << "the honest peer's region was revoked";
}

// ---------------------------------------------------------------- atomics, wrap, length

// Receive: FETCH_ADD at VA 4 bytes into a region (not 8-byte aligned).
// Expect: IBA 9.7.5.2: atomic VAs must be naturally aligned; a
// misaligned one is an invalid request: NAK invalid request; nothing added.
TEST_F(Attack, MisalignedAtomic_NakInvalidRequest) {
  expect_nak_invalid_request(atomic(wire::kRcFetchAdd, rw_.addr(4), rw_mr_->rkey, 1));
  EXPECT_TRUE(rw_.unchanged());
}

// Receive: RDMA WRITE and RDMA READ with a valid R_Key and VA = 2^64 - 32,
// length 64: VA + length wraps past 2^64 into low memory.
// Expect: IBA 9.7.5.2: the range is not inside the region (a check done
// as "va + len <= end" without the wrap test would pass it): NAK remote
// access error, nothing written or read.
TEST_F(Attack, WriteWithVaPlusLengthWrapping_NakRemoteAccess) {
  expect_nak_remote_access(rdma(wire::kRcWriteOnly, ~uint64_t(0) - 31, rw_mr_->rkey, 64), bytes(64, 0xee));
  EXPECT_TRUE(rw_.unchanged());
}

TEST_F(Attack, ReadWithVaPlusLengthWrapping_NakRemoteAccess) {
  auto rs = expect_nak_remote_access(rdma(wire::kRcReadRequest, ~uint64_t(0) - 31, ro_mr_->rkey, 1u << 30));
  EXPECT_EQ(count_op(rs, wire::kRcReadResponseFirst), 0);
}

// Receive: RDMA WRITE First with DMA length 2^31 + 1 (over the 2^31 message limit).
// Expect: IBA 9.7.5.2 / a length the responder cannot accept is an
// invalid request: NAK invalid request.
TEST_F(Attack, WriteLongerThanMaxMessage_NakInvalidRequest) {
  expect_nak_invalid_request(rdma(wire::kRcWriteFirst, rw_.addr(0), rw_mr_->rkey, 0x80000001u), bytes(1024, 0xee));
  EXPECT_TRUE(rw_.unchanged());
}

// ---------------------------------------------------------------- PSNs

// Receive: 100 RDMA WRITEs with PSNs 2^22 ahead of the expected one (far
// out of the window, but in the "ahead" half of the 24-bit space).
// Expect: IBA 9.7.5.2 (C9-111): a PSN sequence error NAK naming the
// expected PSN, one for the whole gap (no NAK storm); nothing written; the
// QP stays in RTS and a request with the right PSN then executes.
TEST_F(Attack, PsnFarAhead_OneSeqNakNothingWritten) {
  const uint64_t c0 = count(Counter::out_of_sequence);
  int sent = 0;
  honest_around([&] {
    for (; sent < 100; ++sent) {
      PacketDesc d = req(wire::kRcWriteOnly);
      d.psn = (xpsn_ + 0x400000 + uint32_t(sent)) & 0xffffff;
      d.reth_va = rw_.addr(0);
      d.reth_rkey = rw_mr_->rkey;
      d.reth_len = 64;
      send(d, bytes(64, 0xee));
    }
  });
  auto rs = replies();
  EXPECT_EQ(count(Counter::out_of_sequence) - c0, 100u);
  EXPECT_EQ(count(Counter::seq_nak_sent), 1u);
  EXPECT_TRUE(rw_.unchanged());
  EXPECT_EQ(state(vx_), QpState::kRts);
  // Now the expected PSN: accepted and ACKed.
  PacketDesc ok = req(wire::kRcWriteOnly);
  ok.reth_va = rw_.addr(128);
  ok.reth_rkey = rw_mr_->rkey;
  ok.reth_len = 8;
  send(ok, bytes(8, 0x42));
  auto acks = replies();
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back().d.opcode, wire::kRcAcknowledge);
  EXPECT_EQ(nak_code(acks.back()), -1);
  EXPECT_EQ(rw_.data()[128], 0x42);
}

// Receive: an RDMA WRITE and an RDMA READ with PSNs 2^22 behind the expected
// one (in the "behind" half: duplicates of requests long gone).
// Expect: IBA 9.7.5.2 (C9-104..106): a duplicate WRITE is acknowledged
// again but not executed; a duplicate READ with no responder resource left
// is dropped silently (no data leaves); the QP stays in RTS.
TEST_F(Attack, PsnFarBehind_DuplicateNotExecuted) {
  PacketDesc w = req(wire::kRcWriteOnly);
  w.psn = (xpsn_ - 0x400000) & 0xffffff;
  w.reth_va = rw_.addr(0);
  w.reth_rkey = rw_mr_->rkey;
  w.reth_len = 64;
  PacketDesc r = req(wire::kRcReadRequest);
  r.psn = (xpsn_ - 0x400000 + 1) & 0xffffff;
  r.reth_va = ro_.addr(0);
  r.reth_rkey = ro_mr_->rkey;
  r.reth_len = 64;
  honest_around_once([&] {
    send(w, bytes(64, 0xee));
    send(r);
  });
  auto rs = replies();
  EXPECT_EQ(count(Counter::duplicate_request), 2u);
  EXPECT_EQ(count(Counter::dup_rd_atomic_dropped), 1u);
  EXPECT_TRUE(rw_.unchanged());
  EXPECT_EQ(state(vx_), QpState::kRts);
}

// Receive: an ACK for PSN kVPsn + 1000 while the victim's SEND at kVPsn is
// outstanding toward the attacker; then a PSN-sequence NAK and an RNR NAK
// for PSNs never sent.
// Expect: IBA 9.7.5.1: responses must answer requests that were sent; these
// are invalid and silently dropped (counted): the SEND is not completed by
// them and the QP stays in RTS; the real ACK then completes it.
TEST_F(Attack, AckForPsnNeverSent_Dropped) {
  Sge s{rw_.addr(0), 64, rw_mr_->lkey};
  SendWr w = send_wr(9, &s).signaled();
  ASSERT_TRUE(post_send(vx_, &w, nullptr).ok());
  auto out = replies(50'000);
  ASSERT_EQ(count_op(out, wire::kRcSendOnly), 1);
  const uint64_t c0 = count(Counter::unsent_psn_response);
  honest_around_once([&] {
    PacketDesc a = req(wire::kRcAcknowledge);
    a.ack_req = false;
    a.psn = kVPsn + 1000;
    a.aeth_syndrome = wire::aeth_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid);
    send(a);
    a.psn = kVPsn + 1;  // the next PSN, also never sent
    send(a);
    a.aeth_syndrome = wire::aeth_syndrome(wire::AethType::kNak, uint8_t(wire::NakCode::kPsnSequenceError));
    a.psn = kVPsn + 500;
    send(a);
    a.aeth_syndrome = wire::aeth_syndrome(wire::AethType::kRnrNak, 1);
    send(a);
  });
  EXPECT_EQ(count(Counter::unsent_psn_response) - c0, 4u);
  Wc wc;
  EXPECT_EQ(poll_cq(vcq_, 1, &wc), 0) << "a forged ACK completed the SEND";
  EXPECT_EQ(state(vx_), QpState::kRts);
  PacketDesc a = req(wire::kRcAcknowledge);
  a.ack_req = false;
  a.psn = kVPsn;
  a.aeth_syndrome = wire::aeth_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid);
  send(a);
  run_for(20'000);
  ASSERT_EQ(poll_cq(vcq_, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
}

// Receive: a READ response and an atomic ACK with nothing outstanding.
// Expect: IBA 9.7.5.1: a response that matches no request is dropped
// (counted); no memory changes (there is no WQE to scatter into).
TEST_F(Attack, UnsolicitedResponses_Dropped) {
  const uint64_t c0 = count(Counter::duplicate_response) + count(Counter::unsent_psn_response);
  honest_around_once([&] {
    PacketDesc r = req(wire::kRcReadResponseOnly);
    r.ack_req = false;
    r.psn = kVPsn;
    r.aeth_syndrome = wire::aeth_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid);
    send(r, bytes(64, 0xee));
    PacketDesc a = req(wire::kRcAtomicAcknowledge);
    a.ack_req = false;
    a.psn = kVPsn - 1;
    a.aeth_syndrome = r.aeth_syndrome;
    a.atomic_ack_orig = 0xeeeeeeeeeeeeeeeeull;
    send(a);
  });
  EXPECT_EQ(count(Counter::duplicate_response) + count(Counter::unsent_psn_response) - c0, 2u);
  EXPECT_EQ(state(vx_), QpState::kRts);
  EXPECT_TRUE(rw_.unchanged() && local_.unchanged());
}

// ---------------------------------------------------------------- headers, addressing

// Receive: a valid SEND Only frame with its BTH opcode replaced by each of
// the 256 values the opcode table marks reserved.
// Expect: IBA 9.6 (BTH checks; Table 38 reserved opcodes): silently
// dropped, counted as unknown opcode, no reply.
TEST_F(Attack, ReservedOpcodes_SilentlyDropped) {
  PacketDesc d = req(wire::kRcSendOnly);
  d.payload_len = 16;
  std::vector<uint8_t> f(wire::frame_len(d));
  ASSERT_GT(wire::build(d, bytes(16, 0xee), f), 0u);
  const size_t bth = 14 + 20 + 8;
  int reserved = 0;
  honest_around_once([&] {
    for (int op = 0; op < 256; ++op) {
      if (wire::kOpcodes[size_t(op)].flags & wire::kValid) continue;
      f[bth] = uint8_t(op);
      send_raw(f);
      ++reserved;
    }
  });
  auto rs = replies();
  EXPECT_GT(reserved, 100);
  EXPECT_EQ(count(Counter::rx_drop_unknown_opcode), uint64_t(reserved));
  EXPECT_TRUE(rs.empty());
  EXPECT_EQ(state(vx_), QpState::kRts);
}

// Receive: valid opcodes of the wrong transport service for the RC QP: a UD
// SEND Only and a UC RDMA WRITE Only.
// Expect: IBA 9.6 (BTH opcode must match the QP's service type): silently
// dropped and counted; the QP stays in RTS; nothing written.
TEST_F(Attack, OpcodeOfAnotherService_SilentlyDropped) {
  honest_around_once([&] {
    PacketDesc u = req(wire::kUdSendOnly);
    u.deth_qkey = kQkey;
    send(u, bytes(16, 0xee));
    PacketDesc w = req(wire::kUcWriteOnly);
    w.reth_va = rw_.addr(0);
    w.reth_rkey = rw_mr_->rkey;
    w.reth_len = 16;
    send(w, bytes(16, 0xee));
  });
  EXPECT_TRUE(replies().empty());
  EXPECT_EQ(count(Counter::rx_drop_opcode_mismatch), 2u);
  EXPECT_EQ(state(vx_), QpState::kRts);
  EXPECT_TRUE(rw_.unchanged());
}

// Receive: RDMA WRITEs to a QPN the victim does not have, and to the honest
// peer's QP (whose number and PSN the attacker has guessed) from the
// attacker's address.
// Expect: IBA 9.6 (destination QP must exist; a connected QP takes only
// its peer's packets): silently dropped and counted; the honest QP is
// neither written nor NAKed nor moved out of RTS.
TEST_F(Attack, WrongDestinationQp_SilentlyDropped) {
  honest_around_once([&] {
    PacketDesc d = req(wire::kRcWriteOnly);
    d.dest_qp = 0xabcde;
    d.reth_va = rw_.addr(0);
    d.reth_rkey = rw_mr_->rkey;
    d.reth_len = 16;
    send(d, bytes(16, 0xee));
    // The honest QP, with PSNs around where its peer is.
    for (uint32_t k = 0; k < 16; ++k) {
      PacketDesc h = req(wire::kRcWriteOnly);
      h.dest_qp = vh_->qp_num;
      h.psn = 0x400 + k;
      h.reth_va = vhon_.addr(0);
      h.reth_rkey = vhon_mr_->rkey;
      h.reth_len = 16;
      send(h, bytes(16, 0xee));
    }
  });
  EXPECT_TRUE(replies().empty());
  EXPECT_EQ(count(Counter::rx_drop_unknown_qp), 1u);
  EXPECT_EQ(count(Counter::rx_drop_wrong_src), 16u);
  EXPECT_TRUE(rw_.unchanged());
}

// Receive: a CNP (RoCEv2 BTH opcode 0x81) from the attacker to the honest
// peer's QP, and one to the QP connected to the attacker.
// Expect: A17.9.2 / IBA 9.6: a CNP comes from the connected peer's
// notification point; one from another source is dropped before it reaches
// congestion control (rx_drop_wrong_src), the peer's own is taken.
TEST_F(Attack, ForgedCnpToAnotherConnection_Dropped) {
  honest_around_once([&] {
    PacketDesc c = req(wire::kCnp);
    c.ack_req = false;
    c.psn = 0;
    c.dest_qp = vh_->qp_num;
    send(c);
  });
  EXPECT_EQ(count(Counter::rcvd_cnp), 1u);
  EXPECT_EQ(count(Counter::rx_drop_wrong_src), 1u);
  EXPECT_EQ(count(Counter::rp_cnp_handled) + count(Counter::rp_cnp_ignored), 0u);
  EXPECT_EQ(query_qp_counters(vh_).get(Counter::rcvd_cnp), 0u);
  PacketDesc own = req(wire::kCnp);
  own.ack_req = false;
  own.psn = 0;
  send(own);
  run_for(20'000);
  EXPECT_EQ(count(Counter::rcvd_cnp), 2u);
  EXPECT_EQ(count(Counter::rx_drop_wrong_src), 1u);
  EXPECT_EQ(query_qp_counters(vx_).get(Counter::rcvd_cnp), 1u);
}

// Receive: UD SEND Only to the victim's UD QP with a wrong Q_Key, then with
// the right one.
// Expect: C10-15: a Q_Key mismatch drops the datagram silently
// (counted) and consumes no receive WQE; the right Q_Key is delivered.
TEST_F(Attack, UdWrongQkey_SilentlyDropped) {
  ASSERT_NO_FATAL_FAILURE(post_local_recv(vud_, 55, 1024));
  PacketDesc u = req(wire::kUdSendOnly);
  u.dest_qp = vud_->qp_num;
  u.ack_req = false;
  u.deth_src_qp = 0x99;
  u.deth_qkey = kQkey ^ 1;
  honest_around_once([&] {
    send(u, bytes(32, 0xee));
  });
  EXPECT_EQ(count(Counter::rx_drop_bad_qkey), 1u);
  EXPECT_TRUE(other_wcs_.empty());
  Wc wc;
  EXPECT_EQ(poll_cq(vrcq_, 1, &wc), 0);
  EXPECT_TRUE(local_.unchanged());
  u.deth_qkey = kQkey;
  send(u, bytes(32, 0x42));
  run_for(20'000);
  ASSERT_EQ(poll_cq(vrcq_, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 55u);
  EXPECT_EQ(wc.byte_len, 40u + 32u);
  EXPECT_EQ(local_.data()[40], 0x42);
}

// Receive: 20,000 invalid frames (random bytes; bad ICRC; unknown QPN; bad
// P_Key; another host's IP; PSN far ahead) 16 per microsecond while
// the honest peer runs 10 verified rounds.
// Expect: every class silently dropped and counted exactly (IBA 9.6,
// 9.7.5.2: one PSN NAK for the whole gap), no reply beyond that NAK, no
// mbuf lost, every honest round verified.
TEST_F(Attack, FloodOfInvalidFrames_HonestTrafficUnaffected) {
  std::mt19937_64 rng(7);
  PacketDesc good = req(wire::kRcWriteOnly);
  good.reth_va = rw_.addr(0);
  good.reth_rkey = rw_mr_->rkey;
  good.reth_len = 64;
  good.payload_len = 64;
  std::vector<uint8_t> gf(wire::frame_len(good));
  ASSERT_GT(wire::build(good, bytes(64, 0xee), gf), 0u);
  uint64_t sent[6] = {};
  int total = 0;
  auto attack = [&] {
    for (int i = 0; i < 16 && total < 20000; ++i, ++total) {
      const int kind = int(rng() % 6);
      ++sent[kind];
      std::vector<uint8_t> f = gf;
      switch (kind) {
        case 0:  // random bytes after a valid Ethernet header (not even IP)
          for (size_t k = 12; k < f.size(); ++k) f[k] = uint8_t(rng());
          f[12] = 0x88;  // an EtherType that is neither IPv4 nor IPv6
          break;
        case 1: f[14 + 20 + 8 + 12 + uint8_t(rng() % 16)] ^= uint8_t(1 + rng() % 255); break;  // bad ICRC
        case 2: {
          PacketDesc d = good;
          d.dest_qp = 0x100000 + uint32_t(rng() % 0x10000);
          wire::build(d, bytes(64, 0xee), f);
          break;
        }
        case 3: {
          PacketDesc d = good;
          d.pkey = 0x1234;
          wire::build(d, bytes(64, 0xee), f);
          break;
        }
        case 4: {
          PacketDesc d = good;
          const uint8_t other[4] = {10, 7, 0, 99};
          d.dgid = Gid::from_ipv4(other);
          wire::build(d, bytes(64, 0xee), f);
          break;
        }
        case 5: {
          PacketDesc d = good;
          d.psn = (xpsn_ + 1000 + uint32_t(rng() % 100000)) & 0xffffff;
          wire::build(d, bytes(64, 0xee), f);
          break;
        }
      }
      send_raw(f);
    }
  };
  ASSERT_TRUE(honest_round(0));
  for (int k = 1; k <= 10 && total < 20000; ++k) ASSERT_TRUE(honest_round_under(k, attack)) << "round " << k;
  while (total < 20000) step(), attack();
  auto rs = replies(500'000);
  ASSERT_TRUE(honest_round(11));
  EXPECT_EQ(total, 20000);
  EXPECT_EQ(count(Counter::rx_drop_not_roce), sent[0]);
  EXPECT_EQ(count(Counter::rx_drop_bad_icrc), sent[1]);
  EXPECT_EQ(count(Counter::rx_drop_unknown_qp), sent[2]);
  EXPECT_EQ(count(Counter::rx_drop_bad_pkey), sent[3]);
  EXPECT_EQ(count(Counter::rx_drop_wrong_gid), sent[4]);
  EXPECT_EQ(count(Counter::out_of_sequence), sent[5]);
  EXPECT_EQ(count(Counter::seq_nak_sent), 1u);
  EXPECT_LE(rs.size(), 1u);
  EXPECT_TRUE(rw_.unchanged());
  EXPECT_EQ(state(vx_), QpState::kRts);
  EXPECT_EQ(vport_->counters().get(loopback::PortCounter::drop_rx_ring_full), 0u)
      << "the flood outran the ring: counts above would not be exact";
  // Every frame of the flood was freed by the victim: no mbuf of any port is held.
  run_for(100'000);
  for (loopback::Port* p : {vport_, hport_, xport_}) {
    EXPECT_EQ(rte_mempool_in_use_count(p->tx_pool()), 0u) << "port " << p->index();
  }
}

}  // namespace
}  // namespace uroce::hostile
