// Completer rules (stack/transport/completer.cc; IBA 9.7.5.1, 9.7.6): RNR
// waits and retries, local ACK timeout and retry exhaustion, implied NAKs,
// the ACK timer on duplicate and out-of-sequence responses, and runs of WQEs
// completed by one packet.
#include <cstring>
#include <string>

#include "stack/transport/qp.h"  // local_ack_timeout_ns
#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using wire::PacketDesc;
using Completer = Pair;

// Receive: RNR NAK (no receive WQE), then the receiver posts one.
// Expect: IBA 9.7.5.2.8: the requester waits the RNR timer, resends, succeeds.
TEST_F(Completer, RnrNakWaitRetrySuccess) {
  PairOptions o;
  o.min_rnr_timer = 14;  // 0.96 ms
  open(o);
  fill(a->buf, 0, 64, 1);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  ASSERT_TRUE(run_until([&] { return a->count(Counter::rcvd_rnr_err) == 1; }));
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge, 0x20 | 14), 1u);
  const uint64_t nak_at = now;
  ASSERT_TRUE(b->post_recv(9, 0, 64).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_GE(now - nak_at, wire::rnr_timer_ns(14));  // not resent before the timer ran out
  EXPECT_EQ(wait_wc(b->rcq).wr_id, 9u);
  EXPECT_EQ(count_sent(a->port.sent, wire::kRcSendOnly), 2u);
  EXPECT_EQ(b->count(Counter::send_rnr_err), 1u);
}

// The devices date the frames of a receive burst by DeviceConfig::clock,
// here 0.5 ms ahead of the time poll is given: the time a thread preempted
// between reading its clock and the burst would have lost.
// Expect: the RNR wait counts from when the NAK was taken (IBA 9.7.5.2.8: at
// least the NAK's time), so the resend comes no sooner than 0.5 ms + the RNR
// timer after the poll that took it; dated by poll's time it came 0.5 ms early.
TEST_F(Completer, RnrWaitCountsFromWhenTheNakWasTaken) {
  static constexpr uint64_t kAhead = 500'000;
  PairOptions o;
  o.min_rnr_timer = 14;  // 0.96 ms
  o.device = [this](DeviceConfig& c) {
    c.clock = [](const void* t) { return *static_cast<const uint64_t*>(t) + kAhead; };
    c.clock_ctx = &now;
  };
  open(o);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  ASSERT_TRUE(run_until([&] { return a->count(Counter::rcvd_rnr_err) == 1; }));
  const uint64_t nak_at = now;
  ASSERT_TRUE(b->post_recv(9, 0, 64).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_GE(count_sent(a->port.sent, wire::kRcSendOnly), 2u);
  EXPECT_GE(now - nak_at, kAhead + wire::rnr_timer_ns(14));
}

// Receive: RNR NAKs forever with rnr_retry 2. Expect: after 3 NAKs the WQE
// completes kRnrRetryExcErr, the next one is flushed, the QP is in ERR.
TEST_F(Completer, RnrRetryExhaustedGoesToErr) {
  PairOptions o;
  o.rnr_retry = 2;
  open(o);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 0, 64).ok());
  const Wc w1 = wait_wc(a->scq);
  EXPECT_EQ(w1.wr_id, 1u);
  EXPECT_EQ(w1.status, WcStatus::kRnrRetryExcErr);
  const Wc w2 = wait_wc(a->scq);
  EXPECT_EQ(w2.wr_id, 2u);
  EXPECT_EQ(w2.status, WcStatus::kWrFlushErr);
  EXPECT_EQ(a->count(Counter::rcvd_rnr_err), 3u);
  EXPECT_EQ(a->count(Counter::retry_rnr_exceeded_err), 1u);
  EXPECT_TRUE(is_err(a->qp));
}

// Receive: RNR NAKs for a long time with rnr_retry 7. Expect: IBA 9.7.5.2.8:
// 7 means retry forever; the SEND succeeds once a WQE is posted.
TEST_F(Completer, RnrRetry7IsInfinite) {
  PairOptions o;
  o.rnr_retry = 7;
  open(o);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  run_for(2'000'000);  // ~100 RNR NAKs at 10 us
  EXPECT_GT(a->count(Counter::rcvd_rnr_err), 50u);
  ASSERT_TRUE(b->post_recv(1, 0, 64).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
}

// Receive: nothing (every request lost). Expect: IBA 9.7.6.1.3: after
// retry_cnt + 1 local ACK timeouts the oldest WQE completes kRetryExcErr, all
// later WQEs (and receive WQEs) are flushed, the QP is in ERR and a WR posted
// afterwards is flushed at once.
TEST_F(Completer, RetryExhaustedGoesToErrAndFlushes) {
  PairOptions o;
  o.retry_cnt = 2;
  open(o);
  a->port.hook = [](const PacketDesc&) { return TestPort::Action::kDrop; };
  ASSERT_TRUE(a->post_recv(77, 0, 64).ok());
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(post(WrOpcode::kSend, i, 0, 64).ok());
  const Wc w1 = wait_wc(a->scq);
  EXPECT_EQ(w1.wr_id, 1u);
  EXPECT_EQ(w1.status, WcStatus::kRetryExcErr);
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kWrFlushErr);
  const Wc r = wait_wc(a->rcq);
  EXPECT_EQ(r.wr_id, 77u);
  EXPECT_EQ(r.status, WcStatus::kWrFlushErr);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 3u);
  EXPECT_EQ(a->count(Counter::retry_exceeded_err), 1u);
  EXPECT_TRUE(is_err(a->qp));
  ASSERT_TRUE(post(WrOpcode::kSend, 4, 0, 64).ok());
  Wc w4;
  ASSERT_EQ(poll_cq(a->scq, 1, &w4), 1);
  EXPECT_EQ(w4.wr_id, 4u);
  EXPECT_EQ(w4.status, WcStatus::kWrFlushErr);
}

// Receive: nothing, with retry_cnt 7. Expect: unlike rnr_retry, 7 is not
// infinite (IBA 9.7.6.1.3; rxe differs): 8 timeouts, then kRetryExcErr.
TEST_F(Completer, RetryCnt7IsNotInfinite) {
  PairOptions o;
  o.retry_cnt = 7;
  o.timeout = 1;  // 8.192 us
  open(o);
  a->port.hook = [](const PacketDesc&) { return TestPort::Action::kDrop; };
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRetryExcErr);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 8u);
  EXPECT_EQ(count_sent(a->port.sent, wire::kRcSendOnly), 8u);
}

// Receive: nothing, and the port takes no frame at all (a memif link whose
// peer died refuses every burst): 100 SENDs fill the transmit stage (64
// frames), so the requester gets no turn to resend. Expect: IBA 9.7.6.1.3:
// the local ACK timer still runs out retry_cnt + 1 times and the oldest WQE
// completes kRetryExcErr, the rest flushed; no hang.
TEST_F(Completer, RetryExhaustedWhileThePortRefusesFrames) {
  PairOptions o;
  o.retry_cnt = 2;
  o.timeout = 1;  // 8.192 us
  o.max_send_wr = 128;
  open(o);
  a->port.tx_accept = 0;
  for (int i = 1; i <= 100; ++i) ASSERT_TRUE(post(WrOpcode::kSend, i, 0, 64).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRetryExcErr);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 3u);
  EXPECT_EQ(a->port.sent.size(), 0u);
}

// Receive: nothing, with timeout 0. Expect: the local ACK timer is off (infinite).
TEST_F(Completer, Timeout0IsInfinite) {
  PairOptions o;
  o.timeout = 0;
  open(o);
  a->port.hook = [](const PacketDesc&) { return TestPort::Action::kDrop; };
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  run_for(20'000'000);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  Wc wc;
  EXPECT_EQ(poll_cq(a->scq, 1, &wc), 0);
}

// Receive: the ACK of a SEND posted after a READ, while the READ's responses
// were lost. Expect: an implied NAK (an ACK of a later request NAKs the READ, as qib's do_rc_ack
// and rxe's completer check_psn treat it): the READ is requested again, then both complete.
TEST_F(Completer, ImpliedNakRetriesSkippedRead) {
  open();
  fill(b->buf, 4096, 512, 4);
  bool dropped = false;
  b->port.hook = [&](const PacketDesc& d) {
    if (d.opcode != wire::kRcReadResponseOnly || dropped) return TestPort::Action::kPass;
    dropped = true;
    return TestPort::Action::kDrop;
  };
  ASSERT_TRUE(b->post_recv(1, 0, 64).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 512, 4096).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 8192, 64).ok());
  EXPECT_EQ(wait_wc(a->scq).wr_id, 1u);
  EXPECT_EQ(wait_wc(a->scq).wr_id, 2u);
  EXPECT_EQ(a->count(Counter::implied_nak_seq_err), 1u);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 4096, 512), 0);
}

// Receive: the responses of an 8-packet READ lose their first packet; the
// other seven arrive one every half local ACK timeout (a responder that
// finishes the READ it started before it serves the re-request, as rxe does),
// for longer than retry_cnt + 1 timeouts; then the whole READ arrives again.
// Expect: IBA 9.7.5.1.1: one re-request from the missing PSN for the rest of
// the READ; IBA 9.7.6.1.3: responses to the outstanding READ show a live
// responder, so the local ACK timer restarts on each and never expires; the
// READ completes with the right data.
TEST_F(Completer, ReadResponsesAfterAGapRestartTheAckTimer) {
  PairOptions o;
  o.retry_cnt = 1;
  open(o);
  const uint32_t len = 8 * 1024;  // 8 packets at path MTU 1024
  fill(b->buf, 0, len, 7);
  b->port.keep_bytes = true;
  b->port.hook = [](const PacketDesc& d) {  // b's responses reach a only as the test injects them
    return d.opcode >= wire::kRcReadResponseFirst && d.opcode <= wire::kRcReadResponseOnly ? TestPort::Action::kDrop
                                                                                          : TestPort::Action::kPass;
  };
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, len, 0).ok());
  ASSERT_TRUE(run_until([&] { return b->port.sent_bytes.size() == 8; }));
  const std::vector<std::vector<uint8_t>> resp = b->port.sent_bytes;
  const uint64_t timeout_ns = transport::local_ack_timeout_ns(o.timeout);
  const uint64_t step = timeout_ns / 2;
  for (size_t i = 1; i < resp.size(); ++i) {  // packet 0 is lost
    a->port.inject(resp[i]);
    run_for(step);
  }
  EXPECT_GT(7 * step, (o.retry_cnt + 1u) * timeout_ns);
  EXPECT_EQ(count_sent(a->port.sent, wire::kRcReadRequest), 2u);  // the READ and one re-request
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  for (const auto& f : resp) a->port.inject(f);
  const Wc wc = wait_wc(a->scq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(a->count(Counter::retry_exceeded_err), 0u);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), len), 0);
}

// Receive: a WRITE's ACK is lost; meanwhile a duplicate ACK (of the WRITE
// before it, as a slow responder sends while it works through a backlog of
// resends) arrives every half local ACK timeout, for longer than
// retry_cnt + 1 timeouts; then the duplicates stop.
// Expect: IBA 9.7.6.1.3: duplicates show a live responder, so the timer
// restarts on each and nothing is resent while they arrive; once they stop,
// the timer expires, the WRITE is resent (IBA 9.7.5.1.1), acknowledged and
// completes; retry_cnt is never exhausted.
TEST_F(Completer, DuplicateAcksRestartTheAckTimer) {
  PairOptions o;
  o.retry_cnt = 1;
  open(o);
  fill(a->buf, 0, 128, 7);
  b->port.keep_bytes = true;
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64, 0).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  ASSERT_EQ(b->port.sent_bytes.size(), 1u);
  const std::vector<uint8_t> old_ack = b->port.sent_bytes[0];
  bool lose_acks = true;
  b->port.hook = [&](const PacketDesc& d) {
    return lose_acks && d.opcode == wire::kRcAcknowledge ? TestPort::Action::kDrop : TestPort::Action::kPass;
  };
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 2, 64, 64, 64).ok());
  const uint64_t timeout_ns = transport::local_ack_timeout_ns(o.timeout);
  const uint64_t step = timeout_ns / 2;
  for (int i = 0; i < 7; ++i) {
    a->port.inject(old_ack);
    run_for(step);
  }
  EXPECT_GT(7 * step, (o.retry_cnt + 1u) * timeout_ns);
  EXPECT_EQ(count_sent(a->port.sent, wire::kRcWriteOnly), 2u);  // nothing resent
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 0u);
  EXPECT_EQ(a->count(Counter::duplicate_response), 7u);
  lose_acks = false;
  const Wc wc = wait_wc(a->scq);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 1u);
  EXPECT_EQ(a->count(Counter::retry_exceeded_err), 0u);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 128), 0);
}

// Send: WRITE 1 (signaled), WRITE 2, SEND 3 (signaled), WRITE 4, READ 5
// (signaled), WRITE 6, WRITE 7 (signaled), sq_sig_all off, in one transmit
// turn. The responder answers with the READ response, which acknowledges 1 to
// 4 as well (IBA 9.7.5.1.5), and one coalesced ACK for 6 and 7.
// Expect: completions for 1, 3, 5 and 7 only, in order, no retransmission;
// each run of SENDs and WRITEs that one packet acknowledges completes in one
// step, with one RTT sample (qp_cc.h), not one per WQE: three samples (1 to
// 4, the READ, 6 and 7), not seven. Samples of every WQE would show TIMELY
// RTTs falling by the gaps between the sends.
TEST_F(Completer, OnePacketCompletesARunOfWqesWithOneRttSample) {
  PairOptions o;
  o.sq_sig_all = false;
  open(o);
  fill(b->buf, 4096, 256, 7);
  ASSERT_TRUE(b->post_recv(30, 8192, 64).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64, 0, kSendSignaled).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 2, 64, 64, 64, 0).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 3, 128, 64, 0, kSendSignaled).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 4, 192, 64, 192, 0).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 5, 1024, 256, 4096, kSendSignaled).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 6, 256, 64, 256, 0).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 7, 320, 64, 320, kSendSignaled).ok());
  const auto wcs = drain(a->scq);
  ASSERT_EQ(wcs.size(), 4u);
  const uint64_t ids[] = {1, 3, 5, 7};
  const WcOpcode ops[] = {WcOpcode::kRdmaWrite, WcOpcode::kSend, WcOpcode::kRdmaRead, WcOpcode::kRdmaWrite};
  for (size_t i = 0; i < wcs.size(); ++i) {
    EXPECT_EQ(wcs[i].wr_id, ids[i]);
    EXPECT_EQ(wcs[i].opcode, ops[i]);
    EXPECT_EQ(wcs[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(std::memcmp(a->buf.data() + 1024, b->buf.data() + 4096, 256), 0);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcReadResponseOnly), 1u);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge), 1u);
  EXPECT_EQ(a->count(Counter::cc_rtt_samples), 3u);
  EXPECT_EQ(a->count(Counter::retransmits), 0u);
}

}  // namespace
}  // namespace uroce::test
