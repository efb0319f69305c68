// The observable state machines (STYLE rule 2, stack/transport/states.h and
// include/uroce/trace.h): every state of the requester, responder, completer
// and CM has a unique name from its X-macro; a traced QP reports each step of
// its roles in order, NAK paths included (IBA 9.7.5.2.8, 9.9.3.1.2); an
// untraced QP reports nothing.
#include <uroce/trace.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "stack/cm/agent.h"
#include "stack/transport/states.h"
#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using transport::CompState;
using transport::ReqState;
using transport::RespState;
using wire::PacketDesc;
using Trace = Pair;

// Every enumerator from 0 to last has a name, and no two are the same.
template <typename E, typename F>
void expect_named(E last, F name) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i <= size_t(last); ++i) {
    const std::string_view n = name(E(i));
    EXPECT_FALSE(n.empty()) << "enumerator " << i;
    EXPECT_TRUE(seen.insert(n).second) << "duplicate name " << n;
    EXPECT_EQ(n.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string_view::npos) << n;
  }
}

// Walks each enum to its last value (the last line of its X-macro).
TEST(StateNames, Rule2_EveryStateHasAUniqueName) {
  expect_named(ReqState::kDone, transport::req_state_name);
  expect_named(RespState::kErrCqOverflow, transport::resp_state_name);
  expect_named(CompState::kDone, transport::comp_state_name);
  expect_named(cm::CmState::kError, cm::cm_state_name);
  // The tables hold exactly the enumerators.
  EXPECT_EQ(transport::kReqStateNames.size(), size_t(ReqState::kDone) + 1);
  EXPECT_EQ(transport::kRespStateNames.size(), size_t(RespState::kErrCqOverflow) + 1);
  EXPECT_EQ(transport::kCompStateNames.size(), size_t(CompState::kDone) + 1);
  EXPECT_EQ(cm::kCmStateNames.size(), size_t(cm::CmState::kError) + 1);
}

TEST(StateNames, Rule2_NamesAreTheEnumeratorsInSnakeCase) {
  static_assert(transport::resp_state_name(RespState::kChkPsn) == "chk_psn");  // usable at compile time
  EXPECT_EQ(transport::req_state_name(ReqState::kGetWqe), "get_wqe");
  EXPECT_EQ(transport::req_state_name(ReqState::kSendPacket), "send_packet");
  EXPECT_EQ(transport::resp_state_name(RespState::kChkOpSeq), "chk_op_seq");
  EXPECT_EQ(transport::resp_state_name(RespState::kErrRnr), "err_rnr");
  EXPECT_EQ(transport::resp_state_name(RespState::kErrCqOverflow), "err_cq_overflow");
  EXPECT_EQ(transport::comp_state_name(CompState::kCompWqe), "comp_wqe");
  EXPECT_EQ(transport::comp_state_name(CompState::kDone), "done");
  EXPECT_EQ(cm::cm_state_name(cm::CmState::kIdle), "idle");
  EXPECT_EQ(cm::cm_state_name(cm::CmState::kEstablished), "established");
  EXPECT_EQ(cm::cm_state_name(cm::CmState::kSidrReqRcvd), "sidr_req_rcvd");
}

// Collects the lines of the QPs it is set on, prefixed with a side's tag, in
// the order they happen (one list for both sides).
struct Capture : TraceSink {
  Capture(std::vector<std::string>* out, std::string tag) : lines(out), prefix(std::move(tag)) {}
  void on_step(const TraceRecord& rec) override {
    char buf[256];
    ASSERT_LT(format_trace_record(rec, buf, sizeof(buf)), sizeof(buf));
    lines->push_back(prefix + buf);
    if (std::getenv("UROCE_TRACE_PRINT")) std::printf("%s\n", lines->back().c_str());  // for docs/TRACE.md
  }
  std::vector<std::string>* lines;
  std::string prefix;
};

class TracedPair : public Trace {
 protected:
  void trace_both() {
    ASSERT_TRUE(set_qp_trace(a->qp, &ta).ok());
    ASSERT_TRUE(set_qp_trace(b->qp, &tb).ok());
  }
  bool has(const std::string& line) const { return std::find(lines.begin(), lines.end(), line) != lines.end(); }

  std::vector<std::string> lines;
  Capture ta{&lines, "a: "}, tb{&lines, "b: "};
};

// Expect: the lines `want` occur in `got` in this order (others may come between).
void expect_in_order(const std::vector<std::string>& got, const std::vector<std::string>& want) {
  size_t at = 0;
  for (const auto& w : want) {
    const auto it = std::find(got.begin() + at, got.end(), w);
    ASSERT_NE(it, got.end()) << "missing, or out of order: " << w;
    at = size_t(it - got.begin()) + 1;
  }
}

// Send: one 64-byte RDMA WRITE on a traced RC pair. Expect: a's requester
// builds it (IBA 9.7.4), b's responder runs every check of IBA 9.7.5.2 on it
// and ACKs it, a's completer completes the WQE with that ACK (IBA 9.7.5.1),
// each step one line, in that order.
TEST_F(TracedPair, Rule2_RcWriteWalksEveryRoleInOrder) {
  open();
  trace_both();
  fill(a->buf, 0, 64, 1);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64, 4096).ok());
  ASSERT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  const std::vector<std::string> want = {
      "a: qp 0x11 requester get_wqe -> chk_fence",
      "a: qp 0x11 requester chk_fence -> chk_rd_atomic",
      "a: qp 0x11 requester chk_rd_atomic -> chk_local",
      "a: qp 0x11 requester chk_local -> start_wqe",
      "a: qp 0x11 requester start_wqe -> chk_window",
      "a: qp 0x11 requester chk_window psn=256 -> chk_pacer",
      "a: qp 0x11 requester chk_pacer psn=256 -> send_packet",
      "a: qp 0x11 requester send_packet psn=256 op=rc_rdma_write_only -> next_packet",
      "a: qp 0x11 requester next_packet psn=256 -> get_wqe",
      "a: qp 0x11 requester get_wqe -> done",
      "b: qp 0x11 responder chk_psn psn=256 op=rc_rdma_write_only -> chk_op_seq",
      "b: qp 0x11 responder chk_op_seq psn=256 op=rc_rdma_write_only -> chk_op_valid",
      "b: qp 0x11 responder chk_op_valid psn=256 op=rc_rdma_write_only -> chk_resource",
      "b: qp 0x11 responder chk_resource psn=256 op=rc_rdma_write_only -> chk_length",
      "b: qp 0x11 responder chk_length psn=256 op=rc_rdma_write_only -> chk_rkey",
      "b: qp 0x11 responder chk_rkey psn=256 op=rc_rdma_write_only -> execute",
      "b: qp 0x11 responder execute psn=256 op=rc_rdma_write_only -> complete",
      "b: qp 0x11 responder complete psn=256 op=rc_rdma_write_only -> acknowledge",
      "b: qp 0x11 responder acknowledge psn=256 op=rc_rdma_write_only -> done",
      "b: qp 0x11 requester get_wqe -> done",  // b's transmit turn: the ACK, then no request
      "a: qp 0x11 completer get_wqe psn=256 op=rc_acknowledge -> chk_psn",
      "a: qp 0x11 completer chk_psn psn=256 op=rc_acknowledge -> chk_ack",
      "a: qp 0x11 completer chk_ack psn=256 op=rc_acknowledge -> comp_wqe",
      "a: qp 0x11 completer comp_wqe psn=256 op=rc_acknowledge -> update_comp",
      "a: qp 0x11 completer update_comp psn=256 op=rc_acknowledge -> done",
      "a: qp 0x11 requester get_wqe -> done",  // the turn update_comp scheduled: nothing more to send
  };
  EXPECT_EQ(lines, want);
}

// Send: a 2-packet RDMA READ (MTU 1024) on a traced pair. Expect: the request
// takes both PSNs at the requester (IBA 9.7.5.1.1 counts a READ's responses),
// the responder executes it with no receive WQE, and the completer places the
// First and Last responses in turn (IBA 9.7.5.1), completing at the Last.
TEST_F(TracedPair, Rule2_RcReadPlacesEachResponse) {
  open();
  trace_both();
  fill(b->buf, 8192, 2048, 3);
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 2048, 8192).ok());
  ASSERT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  expect_in_order(lines, {
      "a: qp 0x11 requester send_packet psn=256 op=rc_rdma_read_request -> next_packet",
      "a: qp 0x11 requester next_packet psn=256 -> get_wqe",
      "b: qp 0x11 responder chk_rkey psn=256 op=rc_rdma_read_request -> execute",
      "b: qp 0x11 responder execute psn=256 op=rc_rdma_read_request -> done",
      "a: qp 0x11 completer chk_ack psn=256 op=rc_rdma_read_response_first -> read",
      "a: qp 0x11 completer read psn=256 op=rc_rdma_read_response_first -> update_comp",
      "a: qp 0x11 completer chk_ack psn=257 op=rc_rdma_read_response_last -> read",
      "a: qp 0x11 completer read psn=257 op=rc_rdma_read_response_last -> comp_wqe",
      "a: qp 0x11 completer comp_wqe psn=257 op=rc_rdma_read_response_last -> update_comp",
  });
  EXPECT_FALSE(has("b: qp 0x11 responder execute psn=256 op=rc_rdma_read_request -> complete"));
}

// Send: a 3-packet WRITE (MTU 256) whose 2nd packet is lost once.
// Expect: the responder's PSN check sends the 3rd to err_psn_out_of_seq
// (class B: a PSN sequence error NAK for the expected PSN); the
// completer takes the NAK to retry (go-back-N, IBA 9.7.5.1.1), and the
// requester resends from PSN 257.
TEST_F(TracedPair, PsnSequenceErrorShowsTheErrorState) {
  PairOptions o;
  o.mtu = Mtu::k256;
  open(o);
  bool lost = false;
  a->port.hook = [&](const PacketDesc& d) {
    if (d.psn != o.a_sq_psn + 1 || lost) return TestPort::Action::kPass;
    lost = true;
    return TestPort::Action::kDrop;
  };
  trace_both();
  fill(a->buf, 0, 768, 4);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 768, 4096).ok());
  ASSERT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  expect_in_order(lines, {
      "a: qp 0x11 requester send_packet psn=257 op=rc_rdma_write_middle -> next_packet",
      "b: qp 0x11 responder chk_psn psn=256 op=rc_rdma_write_first -> chk_op_seq",
      "b: qp 0x11 responder chk_psn psn=258 op=rc_rdma_write_last -> err_psn_out_of_seq",
      "b: qp 0x11 responder err_psn_out_of_seq psn=258 op=rc_rdma_write_last -> done",
      "a: qp 0x11 completer chk_ack psn=257 op=rc_acknowledge -> retry",
      "a: qp 0x11 completer retry psn=257 op=rc_acknowledge -> update_comp",
      "a: qp 0x11 requester send_packet psn=257 op=rc_rdma_write_middle -> next_packet",
      "b: qp 0x11 responder chk_psn psn=257 op=rc_rdma_write_middle -> chk_op_seq",
      "b: qp 0x11 responder acknowledge psn=258 op=rc_rdma_write_last -> done",
      "a: qp 0x11 completer chk_ack psn=258 op=rc_acknowledge -> comp_wqe",
  });
}

// Send: a SEND with no receive WQE posted at b. Expect: the responder's
// resource check goes to err_rnr (class B, an RNR NAK), the completer to rnr
// (IBA 9.7.5.2.8: wait the RNR timer); once b posts a receive the resend passes.
TEST_F(TracedPair, RnrNakShowsErrRnrAndTheCompletersWait) {
  open();
  trace_both();
  fill(a->buf, 0, 64, 5);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  ASSERT_TRUE(run_until([&] { return a->count(Counter::rcvd_rnr_err) == 1; }));
  ASSERT_TRUE(b->post_recv(9, 0, 64).ok());
  ASSERT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  expect_in_order(lines, {
      "b: qp 0x11 responder chk_resource psn=256 op=rc_send_only -> err_rnr",
      "b: qp 0x11 responder err_rnr psn=256 op=rc_send_only -> done",
      "a: qp 0x11 completer chk_ack psn=256 op=rc_acknowledge -> rnr",
      "a: qp 0x11 completer rnr psn=256 op=rc_acknowledge -> done",
      "a: qp 0x11 requester send_packet psn=256 op=rc_send_only -> next_packet",
      "b: qp 0x11 responder chk_resource psn=256 op=rc_send_only -> chk_length",
      "b: qp 0x11 responder complete psn=256 op=rc_send_only -> acknowledge",
      "a: qp 0x11 completer comp_wqe psn=256 op=rc_acknowledge -> update_comp",
  });
}

// Send: WRITEs with only b traced, then with tracing turned off again.
// Expect: no record from a's roles at all; none from b once its sink is
// removed (set_qp_trace(qp, nullptr)); a null QP is an invalid argument.
TEST_F(TracedPair, UntracedQpProducesNoRecords) {
  open();
  ASSERT_TRUE(set_qp_trace(b->qp, &tb).ok());
  fill(a->buf, 0, 64, 6);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64, 4096).ok());
  ASSERT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_FALSE(lines.empty());
  for (const auto& l : lines) EXPECT_EQ(l.rfind("b: ", 0), 0u) << l;
  EXPECT_NE(std::find(lines.begin(), lines.end(), "b: qp 0x11 responder acknowledge psn=256 op=rc_rdma_write_only -> done"),
            lines.end());
  const size_t n = lines.size();
  ASSERT_TRUE(set_qp_trace(b->qp, nullptr).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 2, 0, 64, 4096).ok());
  ASSERT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(lines.size(), n);
  EXPECT_EQ(set_qp_trace(nullptr, &ta).code(), StatusCode::kInvalidArgument);
}

// The ready sink prints format_trace_record's line, one per record.
TEST(FileTraceSink, PrintsOneLinePerStep) {
  char* text = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&text, &len);
  ASSERT_NE(f, nullptr);
  FileTraceSink sink(f);
  TraceRecord r{0x11, TraceRole::kResponder, "chk_psn", "chk_op_seq", 5, wire::kRcWriteOnly, true, true};
  sink.on_step(r);
  r = TraceRecord{0x12, TraceRole::kRequester, "get_wqe", "done"};
  sink.on_step(r);
  r = TraceRecord{0x13, TraceRole::kCompleter, "chk_psn", "drop", 7, 0xff, true, true};  // an unnamed opcode
  sink.on_step(r);
  std::fclose(f);
  EXPECT_EQ(std::string(text, len),
            "qp 0x11 responder chk_psn psn=5 op=rc_rdma_write_only -> chk_op_seq\n"
            "qp 0x12 requester get_wqe -> done\n"
            "qp 0x13 completer chk_psn psn=7 op=0xff -> drop\n");
  std::free(text);
  // Like snprintf: the whole length, the line cut to the buffer.
  char small[8];
  const size_t full = format_trace_record(r, nullptr, 0);
  EXPECT_EQ(full, std::string("qp 0x13 completer chk_psn psn=7 op=0xff -> drop").size());
  EXPECT_EQ(format_trace_record(r, small, sizeof(small)), full);
  EXPECT_EQ(std::string(small), "qp 0x13");
}

}  // namespace
}  // namespace uroce::test
