// uroce's extension (stack/transport/selective*.cc, paths.cc; QpAttr::ext;
// docs/LOSS_RECOVERY.md): selective repeat places SEND/WRITE packets out of
// order and completes in order, resends only what was lost, answers
// duplicates with the current SACK; spraying puts packets on several UDP
// source ports and avoids a blackholed one; a default ext changes nothing.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "stack/device/context.h"
#include "stack/transport/qp.h"
#include "stack/wire/ext_headers.h"
#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using wire::PacketDesc;
PairOptions sr_options(uint16_t paths = 1) {
  PairOptions o;
  o.set_ext = true;
  o.ext.selective_repeat = true;
  o.ext.paths = paths;
  return o;
}

class Selective : public Pair {
 protected:
  // On QPs sprayed over 4 paths, op (a WRITE or READ) moves 32 KB between
  // a.buf[0] and b.buf[0] while every frame the side that sends the data
  // sends on its path 1 is held for 10 us and then delivered in order (a
  // slow FIFO path; the other paths deliver at once). Expects it to complete
  // with the data whole.
  void over_slow_path(WrOpcode op) {
    open(sr_options(4));
    Side& from = op == WrOpcode::kRdmaRead ? *b : *a;
    fill(from.buf, 0, 32768, 12);
    const uint16_t slow = transport::impl(from.qp).ext->paths.sport(1);
    bool holding = true;
    from.port.hook = [&](const PacketDesc& d) {
      return holding && d.udp_sport == slow ? TestPort::Action::kHold : TestPort::Action::kPass;
    };
    EXPECT_TRUE(post(op, 1, 0, 32768, 0).ok());
    run_for(10'000);
    holding = false;
    from.port.release_held_in_order();
    EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
    from.port.hook = nullptr;
    EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 32768), 0);
  }
};

constexpr uint32_t kSeg = 1024 - wire::kPlaceHdrBytes;  // data per packet at MTU 1024 with the placement header

// Drops the first transmission of each PSN in psns sent by port (a request).
std::function<TestPort::Action(const PacketDesc&)> drop_once(std::set<uint32_t> psns) {
  return [psns = std::move(psns)](const PacketDesc& d) mutable {
    if (!(d.op().flags & wire::kReq) || !psns.count(d.psn)) return TestPort::Action::kPass;
    psns.erase(d.psn);
    return TestPort::Action::kDrop;
  };
}

// Drops the first packet with opcode (a response) sent by port; sets dropped.
std::function<TestPort::Action(const PacketDesc&)> drop_first(uint8_t opcode, bool& dropped) {
  return [opcode, &dropped](const PacketDesc& d) {
    if (d.opcode != opcode || dropped) return TestPort::Action::kPass;
    dropped = true;
    return TestPort::Action::kDrop;
  };
}

// A FETCH_AND_ADD of add on b.buf[32768], its result into a.buf[40960]
// (Pair::post sends no add operand).
Status post_fetch_add(Side& a, Side& b, uint64_t wr_id, uint64_t add) {
  Sge g = a.sge(40960, 8);
  SendWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &g;
  wr.num_sge = 1;
  wr.opcode = WrOpcode::kAtomicFetchAndAdd;
  wr.send_flags = kSendSignaled;
  wr.atomic.remote_addr = b.addr(32768);
  wr.atomic.rkey = b.mr->rkey;
  wr.atomic.compare_add = add;
  return post_send(a.qp, &wr, nullptr);
}

size_t sent_with_psn(const std::vector<PacketDesc>& log, uint32_t psn) {
  return size_t(std::count_if(log.begin(), log.end(), [&](const PacketDesc& d) {
    return (d.op().flags & wire::kReq) && d.psn == psn;
  }));
}

// Send: an 8 KB WRITE (9 packets of kSeg data), the second packet dropped once.
// Expect: the packets after it are placed out of order and SACKed; only the
// dropped PSN is sent again, before the ACK timer; the data arrives whole.
TEST_F(Selective, WriteOutOfOrderOnlyLostPsnResent) {
  open(sr_options());
  constexpr uint32_t kLen = 8192;
  fill(a->buf, 0, kLen, 3);
  a->port.hook = drop_once({0x101});
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, kLen, 4096).ok());
  const Wc wc = wait_wc(a->scq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 4096, kLen), 0);
  const uint32_t pkts = (kLen + kSeg - 1) / kSeg;
  EXPECT_EQ(count_sent(a->port.sent, wire::kRcWriteFirst) + count_sent(a->port.sent, wire::kRcWriteMiddle) +
                count_sent(a->port.sent, wire::kRcWriteLast),
            pkts + 1);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x101), 2u);
  EXPECT_EQ(a->count(Counter::retransmits), 1u);
  EXPECT_EQ(a->count(Counter::sr_resent), 1u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  EXPECT_GE(a->count(Counter::sr_sacks_rcvd), 1u);
  EXPECT_EQ(b->count(Counter::sr_ooo_placed), pkts - 2);
  EXPECT_EQ(b->count(Counter::seq_nak_sent), 0u);
}

// Send: a 64-byte WRITE (a round trip measured), then a 3-packet WRITE whose
// Last is dropped once: nothing is sent after it to reveal the loss.
// Expect: the tail-loss probe resends it after two round trips, long before
// the local ACK timeout; nothing else is resent.
TEST_F(Selective, TailLossIsProbedBeforeTheTimeout) {
  open(sr_options());
  fill(a->buf, 0, 2500, 5);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64, 0).ok());  // a round trip measured: the probe's clock
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  a->port.hook = drop_once({0x103});
  const uint64_t t0 = now;
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 2500, 0).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_LT(now - t0, transport::local_ack_timeout_ns(opt.timeout) / 4);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 2500), 0);
  EXPECT_EQ(a->count(Counter::sr_probes), 1u);
  EXPECT_EQ(a->count(Counter::retransmits), 1u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
}

// Send: four 3000-byte SENDs, the first packet of the second and the last of
// the third dropped once. Expect: receive completions in posting order, each
// with its own data and length; the send completions in order too.
TEST_F(Selective, SendsPlacedOutOfOrderCompleteInOrder) {
  open(sr_options());
  constexpr uint32_t kLen = 3000;  // 3 packets each
  for (uint32_t i = 0; i < 4; ++i) {
    fill(a->buf, i * 4096, kLen, uint8_t(10 + i));
    ASSERT_TRUE(b->post_recv(100 + i, 65536 + i * 4096, 4096).ok());
  }
  a->port.hook = drop_once({0x103, 0x107});  // SEND 2's First, SEND 3's Middle (3 packets each)
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(post(WrOpcode::kSend, 1 + i, i * 4096, kLen).ok());
  for (uint32_t i = 0; i < 4; ++i) {
    const Wc r = wait_wc(b->rcq);
    EXPECT_EQ(r.status, WcStatus::kSuccess);
    EXPECT_EQ(r.wr_id, 100 + i);
    EXPECT_EQ(r.byte_len, kLen);
    EXPECT_EQ(std::memcmp(a->buf.data() + i * 4096, b->buf.data() + 65536 + i * 4096, kLen), 0) << i;
  }
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(wait_wc(a->scq).wr_id, 1 + i);
  EXPECT_EQ(a->count(Counter::sr_resent), 2u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  EXPECT_GT(b->count(Counter::sr_ooo_placed), 0u);
}

// Send: WRITE with immediate (3 packets), its Last delivered before the
// Middle (dropped once), then a SEND. Expect: the receive completions in
// order: first the WRITE's with its immediate and length, then the SEND's.
TEST_F(Selective, WriteWithImmediateCompletesInOrder) {
  open(sr_options());
  constexpr uint32_t kLen = 2500;
  fill(a->buf, 0, kLen, 7);
  ASSERT_TRUE(b->post_recv(50, 65536, 64).ok());
  ASSERT_TRUE(b->post_recv(51, 65536 + 4096, 64).ok());
  a->port.hook = drop_once({0x101});
  Sge g = a->sge(0, kLen);
  SendWr wr;
  wr.wr_id = 1;
  wr.sg_list = &g;
  wr.num_sge = 1;
  wr.opcode = WrOpcode::kRdmaWriteWithImm;
  wr.send_flags = kSendSignaled;
  wr.imm_data = 0xabcd1234;
  wr.rdma.remote_addr = b->addr(8192);
  wr.rdma.rkey = b->mr->rkey;
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 0, 32).ok());
  const Wc w1 = wait_wc(b->rcq);
  EXPECT_EQ(w1.wr_id, 50u);
  EXPECT_EQ(w1.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_TRUE(w1.wc_flags & kWcWithImm);
  EXPECT_EQ(w1.imm_data, 0xabcd1234u);
  EXPECT_EQ(w1.byte_len, kLen);
  const Wc w2 = wait_wc(b->rcq);
  EXPECT_EQ(w2.wr_id, 51u);
  EXPECT_EQ(w2.byte_len, 32u);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 8192, kLen), 0);
  EXPECT_EQ(a->count(Counter::sr_resent), 1u);
}

// Send: every request packet twice. Expect: each message executes and
// completes once (duplicates are re-ACKed), the data is right.
TEST_F(Selective, DuplicatesAreAnsweredNotExecuted) {
  open(sr_options());
  a->port.hook = [](const PacketDesc& d) {
    return (d.op().flags & wire::kReq) ? TestPort::Action::kDuplicate : TestPort::Action::kPass;
  };
  fill(a->buf, 0, 5000, 9);
  ASSERT_TRUE(b->post_recv(7, 65536, 8192).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 5000).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 2, 0, 5000, 16384).ok());
  EXPECT_EQ(wait_wc(a->scq).wr_id, 1u);
  EXPECT_EQ(wait_wc(a->scq).wr_id, 2u);
  const std::vector<Wc> rx = drain(b->rcq);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].byte_len, 5000u);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 65536, 5000), 0);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 16384, 5000), 0);
  EXPECT_GT(b->count(Counter::duplicate_request), 0u);
  EXPECT_TRUE(drain(a->scq).empty());
}

// Send: a READ of 8 KB on a selective-repeat QP, one response dropped, and
// an atomic. Expect: both complete in order with the right data (READ and
// atomics run in order at the responder; a response gap is re-requested).
TEST_F(Selective, ReadAndAtomicStillWork) {
  open(sr_options());
  fill(b->buf, 16384, 8192, 5);
  uint64_t v = 40;
  std::memcpy(b->buf.data() + 32768, &v, 8);
  int n = 0;
  b->port.hook = [&n](const PacketDesc& d) {
    return d.opcode == wire::kRcReadResponseMiddle && n++ == 2 ? TestPort::Action::kDrop : TestPort::Action::kPass;
  };
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 8192, 16384).ok());
  ASSERT_TRUE(post(WrOpcode::kAtomicFetchAndAdd, 2, 40960, 8, 32768).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 16384, 8192), 0);
  uint64_t got = 0;
  std::memcpy(&got, a->buf.data() + 40960, 8);
  EXPECT_EQ(got, 40u);
}

// Drops the first transmission of each READ response PSN in psns sent by port.
std::function<TestPort::Action(const PacketDesc&)> drop_responses_once(std::set<uint32_t> psns) {
  return [psns = std::move(psns)](const PacketDesc& d) mutable {
    if (!(d.op().flags & wire::kRead) || (d.op().flags & wire::kReq) || !psns.count(d.psn)) {
      return TestPort::Action::kPass;
    }
    psns.erase(d.psn);
    return TestPort::Action::kDrop;
  };
}

std::vector<PacketDesc> read_requests(const std::vector<PacketDesc>& log) {
  std::vector<PacketDesc> r;
  for (const PacketDesc& d : log) {
    if (d.opcode == wire::kRcReadRequest) r.push_back(d);
  }
  return r;
}

// The READ response opcode IBA 9.7.5.1 puts at PSN psn of a READ over [first, last].
uint8_t response_opcode(uint32_t psn, uint32_t first, uint32_t last) {
  if (psn == first) return psn == last ? wire::kRcReadResponseOnly : wire::kRcReadResponseFirst;
  return psn == last ? wire::kRcReadResponseLast : wire::kRcReadResponseMiddle;
}

// Send: a 16 KB READ (16 responses at MTU 1024, PSNs 0x100..0x10f); the
// responder's responses 0x103, 0x104 and 0x109 are dropped once.
// Expect: the other responses are placed as they come; the requester asks
// again for just the runs lost, each by a READ from the run's first PSN with
// the remote address advanced and the length cut to the run (IBA 9.7.5.1.4);
// the responder answers each with just those responses, each with the opcode
// of its place in the READ; the READ completes whole, without a timeout.
TEST_F(Selective, ReadResponsesOutOfOrderOnlyLostRunsAskedAgain) {
  open(sr_options());
  constexpr uint32_t kLen = 16384;
  fill(b->buf, 16384, kLen, 7);
  const std::set<uint32_t> dropped = {0x103, 0x104, 0x109};
  b->port.hook = drop_responses_once(dropped);
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, kLen, 16384).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 16384, kLen), 0);
  const std::vector<PacketDesc> reads = read_requests(a->port.sent);
  ASSERT_GE(reads.size(), 2u);
  EXPECT_EQ(reads[0].psn, 0x100u);
  EXPECT_EQ(reads[0].reth_len, kLen);
  std::set<uint32_t> asked;
  for (size_t i = 1; i < reads.size(); ++i) {
    const PacketDesc& r = reads[i];
    const uint32_t off = (r.psn - 0x100) * 1024;
    EXPECT_EQ(r.reth_va, b->addr(16384 + off)) << i;
    EXPECT_EQ(r.reth_len % 1024, 0u) << i;
    for (uint32_t p = r.psn; p < r.psn + r.reth_len / 1024; ++p) EXPECT_TRUE(asked.insert(p).second) << p;
  }
  EXPECT_EQ(asked, dropped);  // the runs lost, each once, and nothing else
  EXPECT_LE(reads.size(), 3u);  // 0x103-0x104 is one run
  std::map<uint32_t, int> answered;
  for (const PacketDesc& d : b->port.sent) {
    if (!(d.op().flags & wire::kRead)) continue;
    ++answered[d.psn];
    EXPECT_EQ(d.opcode, response_opcode(d.psn, 0x100, 0x10f)) << d.psn;
  }
  for (uint32_t p = 0x100; p <= 0x10f; ++p) EXPECT_EQ(answered[p], dropped.count(p) ? 2 : 1) << p;
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  EXPECT_EQ(a->count(Counter::sr_resent), 3u);
  EXPECT_GT(a->count(Counter::sr_ooo_placed), 0u);
  EXPECT_EQ(b->count(Counter::dup_rd_atomic_dropped), 0u);
}

// Send: a 4 KB READ, a SEND and an 8-byte fetch-and-add; the READ's first
// response is dropped once, so the SEND's ACK and the atomic ACK overtake
// its responses. Expect: no implied NAK (IBA 9.7.5.1.5 is for in-order
// responders: here the responses are sprayed); the SEND is not sent again;
// the completions come in posting order, each right.
TEST_F(Selective, CompletionsStayInOrderBehindAReadGap) {
  open(sr_options());
  fill(b->buf, 16384, 4096, 9);
  fill(a->buf, 8192, 3000, 4);
  uint64_t v = 70;
  std::memcpy(b->buf.data() + 32768, &v, 8);
  ASSERT_TRUE(b->post_recv(50, 65536, 4096).ok());
  b->port.hook = drop_responses_once({0x100});
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 4096, 16384).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 8192, 3000).ok());
  ASSERT_TRUE(post(WrOpcode::kAtomicFetchAndAdd, 3, 12288, 8, 32768).ok());
  for (uint64_t id = 1; id <= 3; ++id) {
    const Wc wc = wait_wc(a->scq);
    EXPECT_EQ(wc.status, WcStatus::kSuccess) << id;
    EXPECT_EQ(wc.wr_id, id);
  }
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 16384, 4096), 0);
  EXPECT_EQ(std::memcmp(a->buf.data() + 8192, b->buf.data() + 65536, 3000), 0);
  uint64_t got = 0;
  std::memcpy(&got, a->buf.data() + 12288, 8);
  EXPECT_EQ(got, 70u);
  EXPECT_EQ(b->count(Counter::atomic_executed), 1u);
  EXPECT_EQ(a->count(Counter::implied_nak_seq_err), 0u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x104), 1u);  // the SEND's First: never again
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x107), 1u);  // the atomic
  EXPECT_EQ(read_requests(a->port.sent).size(), 2u);
  EXPECT_EQ(read_requests(a->port.sent)[1].reth_len, 1024u);
}

// Send: a 4 KB READ into a.buf[0..), then a fenced SEND of those bytes
// (IBA 10.8.3.3); a middle response of the READ is dropped once.
// Expect: the SEND leaves only after the READ completed, so it carries the
// bytes read, whole; completions in order.
TEST_F(Selective, FencedSendWaitsForTheReadItFollows) {
  open(sr_options());
  fill(b->buf, 16384, 4096, 11);
  fill(a->buf, 0, 4096, 1);  // stale bytes the SEND must not carry
  ASSERT_TRUE(b->post_recv(60, 65536, 4096).ok());
  b->port.hook = drop_responses_once({0x102});
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 4096, 16384).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 0, 4096, 0, kSendSignaled | kSendFence).ok());
  EXPECT_EQ(wait_wc(a->scq).wr_id, 1u);
  EXPECT_EQ(wait_wc(a->scq).wr_id, 2u);
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(b->buf.data() + 65536, b->buf.data() + 16384, 4096), 0);
  // The SEND's first packet went after the run was asked for again.
  size_t rerequest = 0, send = 0;
  for (size_t i = 0; i < a->port.sent.size(); ++i) {
    if (a->port.sent[i].opcode == wire::kRcReadRequest && a->port.sent[i].psn == 0x102) rerequest = i;
    if (a->port.sent[i].opcode == wire::kRcSendFirst && !send) send = i;
  }
  EXPECT_GT(rerequest, 0u);
  EXPECT_GT(send, rerequest);
}

// Spraying over 4 paths, the responder's frames on one path held for 10 us
// and then delivered in order (a slow FIFO path), a 32 KB READ.
// Expect: the responses are sprayed over the 4 ports; the reordering is
// taken for delay, not loss: nothing is asked for again; the data is whole.
TEST_F(Selective, SprayedReadSlowPathIsReorderingNotLoss) {
  over_slow_path(WrOpcode::kRdmaRead);
  EXPECT_GT(a->count(Counter::sr_ooo_placed), 0u);  // the other paths' responses arrived ahead
  std::set<uint16_t> ports;
  for (const PacketDesc& d : b->port.sent) {
    if (d.op().flags & wire::kRead) ports.insert(d.udp_sport);
  }
  EXPECT_EQ(ports.size(), 4u);
  EXPECT_EQ(read_requests(a->port.sent).size(), 1u);
  EXPECT_EQ(a->count(Counter::sr_resent), 0u);
  EXPECT_EQ(a->count(Counter::retransmits), 0u);
}

// Zero-copy on, spraying over 4 paths, a 32 KB READ (32 responses of 1024
// bytes, over the 512-byte threshold).
// Expect: every READ response leaves zero-copy (a chained frame, the port of
// its path written by the header writer, none copied to patch the port), on
// the 4 ports; each arrives with a valid ICRC; the data is whole and no region
// is left referenced.
TEST_F(Selective, SprayedReadResponsesLeaveZeroCopy) {
  PairOptions o = sr_options(4);
  o.device = [](DeviceConfig& c) { c.tx_zero_copy = true; };
  open(o);
  fill(b->buf, 0, 32768, 9);
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 32768, 0).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 32768), 0);
  std::set<uint16_t> ports;
  uint64_t responses = 0;
  for (const PacketDesc& d : b->port.sent) {
    if (!(d.op().flags & wire::kRead)) continue;
    ports.insert(d.udp_sport);
    ++responses;
  }
  EXPECT_EQ(responses, 32u);
  EXPECT_EQ(ports.size(), 4u);
  EXPECT_EQ(b->count(Counter::tx_zero_copy), responses);
  EXPECT_EQ(b->port.chained, responses);
  EXPECT_EQ(b->count(Counter::tx_copied), 0u);
  EXPECT_EQ(a->count(Counter::rx_drop_bad_icrc), 0u);
  EXPECT_EQ(b->ctx->mrs.tx_refs(b->mr->lkey).load(), 0u);
}

// Send: three 2 KB READs; the first READ request is dropped once.
// Expect: the responder holds the two after it (they run only in order) and
// SACKs them; the requester sends the first again well before the local ACK
// timeout, and not the others; all three complete in order with their data.
TEST_F(Selective, ReadRequestAheadIsHeldAndSacked) {
  open(sr_options());
  fill(b->buf, 16384, 6144, 8);
  a->port.hook = drop_once({0x100});
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1 + i, i * 2048, 2048, 16384 + i * 2048).ok());
  for (uint64_t id = 1; id <= 3; ++id) {
    const Wc wc = wait_wc(a->scq);
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(wc.wr_id, id);
  }
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 16384, 6144), 0);
  EXPECT_EQ(b->count(Counter::sr_ooo_placed), 2u);  // the two held
  EXPECT_GE(a->count(Counter::sr_sacks_rcvd), 1u);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x100), 2u);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x102), 1u);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x104), 1u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  EXPECT_EQ(b->count(Counter::read_replayed), 0u);
}

// Receive: a READ asked for again from a middle PSN whose RETH does not name
// that part of the READ (another address). Expect: dropped (class D, as rxe
// drops a duplicate READ outside the original), not answered.
TEST_F(Selective, ReRequestOutsideTheReadIsDropped) {
  open(sr_options());
  fill(b->buf, 16384, 4096, 3);
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 4096, 16384).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  PacketDesc d = read_requests(a->port.sent)[0];
  d.psn = 0x102;
  d.reth_va = b->addr(16384);  // should be + 2048
  d.reth_len = 1024;
  const size_t before = b->port.sent.size();
  b->port.inject(frame_of(d, {}));
  run_for(50'000);
  EXPECT_EQ(b->count(Counter::dup_rd_atomic_dropped), 1u);
  EXPECT_EQ(b->port.sent.size(), before);
}

// Send: a 4 KB READ whose request is dropped once, then an atomic. The
// atomic reaches the responder ahead of its expected PSN and is held there
// (READ and atomics run in order only) and SACKed. Expect: on that evidence
// the requester resends the READ (not the atomic) within a few round trips,
// long before the local ACK timeout, spends no retry_cnt, and the atomic
// executes once, after the READ.
TEST_F(Selective, ReadLostBeforeAnAtomicIsResent) {
  open(sr_options());
  fill(b->buf, 16384, 4096, 6);
  uint64_t v = 40;
  std::memcpy(b->buf.data() + 32768, &v, 8);
  a->port.hook = drop_once({0x100});
  const uint64_t t0 = now;
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 4096, 16384).ok());  // PSNs 0x100..0x103
  ASSERT_TRUE(post_fetch_add(*a, *b, 2, 5).ok());  // PSN 0x104
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_LT(now - t0, transport::local_ack_timeout_ns(opt.timeout) / 4);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 16384, 4096), 0);
  uint64_t got = 0;
  std::memcpy(&got, a->buf.data() + 40960, 8);
  EXPECT_EQ(got, 40u);
  std::memcpy(&got, b->buf.data() + 32768, 8);
  EXPECT_EQ(got, 45u);  // added once
  EXPECT_EQ(b->count(Counter::sr_ooo_placed), 1u);  // the atomic, held
  EXPECT_EQ(b->count(Counter::seq_nak_sent), 0u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x100), 2u);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x104), 1u);
  EXPECT_EQ(transport::impl(a->qp).comp.retry_left, opt.retry_cnt);
}

// Send: a 64-byte WRITE (a round trip measured), then a 1 KB READ whose
// only response is dropped once, then an atomic whose request is dropped
// once: each is the last request in flight, so nothing later can reveal the
// loss. Expect: each is found lost (completion has waited a round trip on
// it; or the probe after two) and sent again, long before the local ACK
// timeout; the READ's data is right and the atomic executes once (its
// resend is its first arrival).
TEST_F(Selective, TailReadAndAtomicAreProbedBeforeTheTimeout) {
  open(sr_options());
  fill(a->buf, 0, 64, 2);
  fill(b->buf, 16384, 1024, 8);
  uint64_t v = 70;
  std::memcpy(b->buf.data() + 32768, &v, 8);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64, 0).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  bool dropped = false;
  b->port.hook = drop_first(wire::kRcReadResponseOnly, dropped);
  const uint64_t t0 = now;
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 2, 4096, 1024, 16384).ok());  // PSN 0x101
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_TRUE(dropped);
  EXPECT_EQ(std::memcmp(a->buf.data() + 4096, b->buf.data() + 16384, 1024), 0);
  a->port.hook = drop_once({0x102});
  ASSERT_TRUE(post_fetch_add(*a, *b, 3, 9).ok());  // PSN 0x102
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_LT(now - t0, transport::local_ack_timeout_ns(opt.timeout) / 4);
  uint64_t got = 0;
  std::memcpy(&got, a->buf.data() + 40960, 8);
  EXPECT_EQ(got, 70u);
  std::memcpy(&got, b->buf.data() + 32768, 8);
  EXPECT_EQ(got, 79u);
  EXPECT_EQ(a->count(Counter::sr_lost) + a->count(Counter::sr_probes), 2u);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x101), 2u);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x102), 2u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
}

// Send: a 64-byte WRITE (a round trip measured), then a 3 KB READ whose
// last response is dropped once: the first two arrive, nothing follows.
// Expect: the rest of the READ (its last PSN only) is asked for again once
// completion has waited a round trip on it (or by the probe two round trips
// after the last response), long before the local ACK timeout.
TEST_F(Selective, ReadWhoseLastResponseIsLostIsProbed) {
  open(sr_options());
  fill(a->buf, 0, 64, 2);
  fill(b->buf, 16384, 3072, 4);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64, 0).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  bool dropped = false;
  b->port.hook = drop_first(wire::kRcReadResponseLast, dropped);
  const uint64_t t0 = now;
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 2, 4096, 3072, 16384).ok());  // PSNs 0x101..0x103
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_TRUE(dropped);
  EXPECT_LT(now - t0, transport::local_ack_timeout_ns(opt.timeout) / 4);
  EXPECT_EQ(std::memcmp(a->buf.data() + 4096, b->buf.data() + 16384, 3072), 0);
  EXPECT_EQ(a->count(Counter::sr_lost) + a->count(Counter::sr_probes), 1u);
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x103), 1u);  // the re-request of the rest
  EXPECT_EQ(sent_with_psn(a->port.sent, 0x101), 1u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
}

// Receive: a SEND out of order whose receive WQE is not posted yet.
// Expect: dropped (not SACKed); at epsn the standard RNR NAK; once the WQE is
// posted the SEND completes.
TEST_F(Selective, SendWithoutReceiveWqeGetsRnrNak) {
  PairOptions o = sr_options();
  o.min_rnr_timer = 1;
  open(o);
  fill(a->buf, 0, 3000, 4);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 3000).ok());
  ASSERT_TRUE(run_until([&] { return a->count(Counter::rcvd_rnr_err) >= 1; }));
  ASSERT_TRUE(b->post_recv(9, 65536, 4096).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.wr_id, 9u);
  EXPECT_EQ(r.byte_len, 3000u);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 65536, 3000), 0);
}

// The SACK block: the parser takes an Acknowledge with exactly one well-formed
// block and refuses other trailing bytes; a QP without selective repeat drops
// an ACK with a SACK block (rx_drop_sack) and completes nothing by it.
TEST_F(Selective, SackBlockParsedAndRefusedByPlainQp) {
  open();
  PacketDesc d;
  d.opcode = wire::kRcAcknowledge;
  d.dest_qp = a->qp->qp_num;
  d.psn = 0x100;
  d.aeth_syndrome = wire::aeth_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid);
  d.src_mac = b->mac;
  d.dst_mac = a->mac;
  d.sgid = b->gid;
  d.dgid = a->gid;
  std::vector<uint8_t> block = {wire::kSackKind, 0, 0, 4, 0x06, 0, 0, 0};  // PSNs 0x102, 0x103
  d.payload_len = uint32_t(block.size());
  std::vector<uint8_t> f = frame_of(d, block);
  PacketDesc got;
  ASSERT_EQ(wire::parse(f, got), wire::ParseError::kOk);
  EXPECT_TRUE(wire::is_sack_block({f.data() + got.payload_off, got.payload_len}));
  std::vector<uint8_t> bad = block;
  bad[0] = 2;  // unknown kind
  EXPECT_EQ(wire::parse(frame_of(d, bad), got), wire::ParseError::kLengthMismatch);
  bad = block;
  bad[3] = 8;  // bitmap length disagrees with the payload
  EXPECT_EQ(wire::parse(frame_of(d, bad), got), wire::ParseError::kLengthMismatch);

  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64).ok());
  a->port.hook = [](const PacketDesc&) { return TestPort::Action::kDrop; };
  run_for(2000);
  a->port.inject(f);
  run_for(2000);
  EXPECT_EQ(a->count(Counter::rx_drop_sack), 1u);
  EXPECT_TRUE(drain(a->scq, 1000).empty());
}

// A default ext (selective repeat off, one path) set with kQpExt: the QP
// gets no extension state and sends the same frames, byte for byte, as a QP
// without kQpExt (but for the RETH's or AtomicETH's remote VA and so the
// ICRC: each run has its own buffers), READs and their recovery included: a
// lost response read again from its PSN to the READ's end, a lost READ
// request resent whole after the atomic ACK behind it, the atomic replayed.
TEST_F(Selective, DefaultExtSendsTheSameFrames) {
  auto run_once = [&](bool set_ext) {
    PairOptions o;
    o.set_ext = set_ext;
    open(o);
    a->port.keep_bytes = b->port.keep_bytes = true;
    fill(a->buf, 0, 6000, 1);
    fill(b->buf, 0, 3000, 2);
    EXPECT_TRUE(b->post_recv(5, 65536, 8192).ok());
    // The READ's second response (PSN 0x10d) lost once: go-back-N reads the
    // rest again from it; then a READ whose request is lost once (resent
    // whole after the timeout), and an atomic.
    b->port.hook = drop_responses_once({0x10d});
    a->port.hook = drop_once({0x10f});
    EXPECT_TRUE(post(WrOpcode::kSend, 1, 0, 6000).ok());
    EXPECT_TRUE(post(WrOpcode::kRdmaWrite, 2, 0, 6000, 8192).ok());
    EXPECT_TRUE(post(WrOpcode::kRdmaRead, 3, 16384, 3000, 0).ok());
    EXPECT_TRUE(post(WrOpcode::kRdmaRead, 4, 20480, 2048, 0).ok());
    EXPECT_TRUE(post(WrOpcode::kAtomicFetchAndAdd, 5, 24576, 8, 4096).ok());
    for (int i = 0; i < 5; ++i) EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
    EXPECT_EQ(a->count(Counter::retransmits), 3u);
    EXPECT_EQ(transport::impl(a->qp).ext, nullptr);
    std::vector<std::vector<uint8_t>> all = a->port.sent_bytes;
    all.insert(all.end(), b->port.sent_bytes.begin(), b->port.sent_bytes.end());
    for (std::vector<uint8_t>& f : all) {
      PacketDesc d;
      EXPECT_EQ(wire::parse(f, d), wire::ParseError::kOk);
      if (!d.op().has(wire::Hdr::kReth) && !d.op().has(wire::Hdr::kAtomicEth)) continue;
      const size_t va = d.payload_off - d.op().hdr_len + 12;  // after the BTH: the RETH's or AtomicETH's VA
      std::fill_n(f.begin() + ptrdiff_t(va), 8, 0);
      std::fill_n(f.begin() + ptrdiff_t(d.payload_off + d.payload_len + d.pad), 4, 0);
    }
    return all;
  };
  const auto plain = run_once(false);
  const auto with_default_ext = run_once(true);
  EXPECT_GE(plain.size(), 22u);
  EXPECT_TRUE(plain == with_default_ext);
}

// Spraying over 4 paths: each request packet on the next of 4 UDP source
// ports (the QP's own first), inside 0xC000..0xFFFF; the responder answers
// each ACK from the port of the request that asked for it.
TEST_F(Selective, SprayUsesEveryPathPerPacket) {
  open(sr_options(4));
  fill(a->buf, 0, 16000, 2);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 16000, 0).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  std::vector<uint16_t> ports;
  for (const PacketDesc& d : a->port.sent) ports.push_back(d.udp_sport);
  ASSERT_GE(ports.size(), 8u);
  const std::set<uint16_t> distinct(ports.begin(), ports.end());
  EXPECT_EQ(distinct.size(), 4u);
  for (uint16_t p : distinct) EXPECT_GE(p, 0xC000);
  for (size_t i = 4; i < ports.size(); ++i) EXPECT_EQ(ports[i], ports[i - 4]);  // round robin
  EXPECT_EQ(ports[0], transport::impl(a->qp).udp_sport);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 16000), 0);
  for (const PacketDesc& ack : b->port.sent) EXPECT_TRUE(distinct.count(ack.udp_sport));
}

// One of 4 paths is a blackhole (every frame from its source port lost).
// Expect: every WRITE completes with its data, in order; the path is taken
// down within the first batch (whose first round trip put a quarter of it
// there), and the second batch sends it only probes.
TEST_F(Selective, BlackholedPathIsAvoided) {
  open(sr_options(4));
  const uint16_t dead = transport::impl(a->qp).ext->paths.sport(1);
  a->port.hook = [dead](const PacketDesc& d) {
    return d.udp_sport == dead ? TestPort::Action::kDrop : TestPort::Action::kPass;
  };
  fill(a->buf, 0, 65536, 6);
  constexpr int kWrites = 16;
  auto batch = [&](int round) {
    a->port.sent.clear();
    for (int i = 0; i < kWrites; ++i) {
      ASSERT_TRUE(post(WrOpcode::kRdmaWrite, uint64_t(i), size_t(i % 4) * 16384, 16384, size_t(i % 4) * 16384).ok());
    }
    for (int i = 0; i < kWrites; ++i) {
      const Wc wc = wait_wc(a->scq);
      ASSERT_EQ(wc.status, WcStatus::kSuccess);
      EXPECT_EQ(wc.wr_id, uint64_t(i));
    }
    EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 65536), 0) << round;
  };
  batch(1);
  EXPECT_GE(a->count(Counter::paths_down), 1u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  batch(2);
  const size_t on_dead = size_t(std::count_if(a->port.sent.begin(), a->port.sent.end(),
                                              [&](const PacketDesc& d) { return d.udp_sport == dead; }));
  EXPECT_LT(on_dead * 20, a->port.sent.size()) << on_dead << " of " << a->port.sent.size();
  EXPECT_FALSE(is_err(a->qp));
}

// Spraying over 4 paths, one of them slow: every frame on it held for 10 us
// and then delivered in order (a FIFO path with more delay), while the others
// deliver at once. Expect: the reordering is taken for delay, not loss:
// nothing is resent, the data arrives whole.
TEST_F(Selective, SlowPathIsReorderingNotLoss) {
  over_slow_path(WrOpcode::kRdmaWrite);
  EXPECT_GT(a->count(Counter::sr_sacks_rcvd), 0u);  // the other paths' packets arrived ahead
  EXPECT_EQ(a->count(Counter::retransmits), 0u);
  EXPECT_EQ(a->count(Counter::sr_resent), 0u);
  EXPECT_GT(b->count(Counter::sr_ooo_placed), 0u);
}

// Flowlets over 4 paths: a burst (one WRITE's packets, sent in one turn)
// stays on one port; after flowlet_gap_ns without a packet the next burst
// moves to another.
TEST_F(Selective, FlowletStaysOnOnePathUntilTheGap) {
  PairOptions o = sr_options(4);
  o.ext.path_mode = PathMode::kFlowlet;
  o.ext.flowlet_gap_ns = 20'000;
  open(o);
  fill(a->buf, 0, 8000, 1);
  std::vector<std::set<uint16_t>> per_write;
  for (int i = 0; i < 3; ++i) {
    a->port.sent.clear();
    ASSERT_TRUE(post(WrOpcode::kRdmaWrite, uint64_t(i), 0, 8000, 0).ok());
    EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
    std::set<uint16_t> ports;
    for (const PacketDesc& d : a->port.sent) ports.insert(d.udp_sport);
    per_write.push_back(ports);
    run_for(50'000);  // longer than the gap
  }
  for (const auto& p : per_write) EXPECT_EQ(p.size(), 1u);
  EXPECT_NE(*per_write[0].begin(), *per_write[1].begin());
  EXPECT_NE(*per_write[1].begin(), *per_write[2].begin());
}

// Spraying with selective repeat off: go-back-N over 4 ports still delivers.
TEST_F(Selective, SprayWithoutSelectiveRepeat) {
  PairOptions o = sr_options(4);
  o.ext.selective_repeat = false;
  open(o);
  fill(a->buf, 0, 20000, 8);
  a->port.hook = drop_once({0x103});
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 20000, 0).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 20000), 0);
  std::set<uint16_t> ports;
  for (const PacketDesc& d : a->port.sent) ports.insert(d.udp_sport);
  EXPECT_EQ(ports.size(), 4u);
  EXPECT_EQ(a->count(Counter::sr_sacks_rcvd), 0u);
}

}  // namespace
}  // namespace uroce::test
