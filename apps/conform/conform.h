// `uroce conform`: the case model (docs/CONFORMANCE.md). A case is a scripted
// sequence of frames, each built with the stack's encoder (wire::build) with
// one chosen deviation, sent to the target from the tester's bare port; its
// check compares the target's answer with the rule it cites. The Tester
// (tester.cc) owns the port, the control channel to the target helper and the
// per-case capture; cases_*.cc hold the cases, one file per role under test.
// Control path only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <uroce/addr.h>
#include <uroce/verbs.h>

#include "apps/common/oob.h"
#include "apps/conform/breaks.h"
#include "drivers/io_port.h"
#include "stack/wire/packet.h"
#include "stack/wire/pcap.h"

namespace uroce::apps::conform {

/// kError: the case could not run (the helper or the port failed); not a
/// verdict on the target, and it fails the run.
enum class Verdict : uint8_t { kConforms, kDeviates, kNotApplicable, kError };
std::string_view verdict_name(Verdict v);

/// The target's side of one case, as its helper reported it after setup.
struct TargetSide {
  MacAddr mac{};
  Gid gid{};
  uint32_t qpn = 0;
  uint32_t psn = 0;        ///< the first PSN of the target's requests
  uint32_t rkey = 0;       ///< a region with every remote access right
  uint64_t va = 0;         ///< its first byte
  uint32_t len = 0;        ///< its length, bytes
  uint32_t recv_len = 0;   ///< bytes of each receive the helper posted
  uint32_t mtu = 0;        ///< path MTU, bytes
  uint8_t rnr_timer = 0;   ///< the min_rnr_timer code the target's QP was given
  uint32_t qkey = 0;       ///< a UD QP's Q_Key
  uint16_t cm_port = 0;    ///< an rdma_cm listener's TCP port (0: none)
  uint32_t ro_rkey = 0;    ///< the region again, remote read only (0: none)
  uint32_t pd2_rkey = 0;   ///< the region again, every right, in another PD than the QP's (0: none)
  std::string cc = "unknown";  ///< the target's congestion control: dcqcn, timely, none or unknown
};

/// What the helper saw of the case at the target: its QP's state and the
/// completions (send and receive) since the setup, in order.
struct TargetState {
  std::string qp_state;               ///< "RTS", "ERR", ...
  std::vector<WcStatus> completions;
  int conn_requests = -1;  ///< connection requests the listener's consumer got since setup (-1: not reported)
};

/// One frame the target sent the tester (to our QP of the case, or to QP1), decoded by wire::parse.
struct Reply {
  wire::PacketDesc d;
  std::vector<uint8_t> payload;
  uint64_t time_ns = 0;  ///< when the tester received it (steady clock)
};

/// The target's frames in a line: "Acknowledge psn=0xfffffd ACK; Acknowledge
/// psn=0xfffffe NAK PSN Sequence Error; ..." or "nothing".
std::string describe(std::span<const Reply> replies);

/// What a case asks of the helper before its script runs.
struct Setup {
  uint32_t recvs = 8;  ///< receives to post on the target's QP
  std::string_view type = "rc";  ///< the target's QP: rc or ud
  uint8_t timeout = 14;    ///< RC: its local ACK timeout code (4.096 us * 2^N)
  uint8_t retry_cnt = 7;   ///< RC
  uint8_t rnr_retry = 7;   ///< RC (7: retry for ever)
};

struct Outcome {
  Verdict verdict = Verdict::kDeviates;
  std::string seen;  ///< what the target did (for every verdict); the reason for not applicable
};

class Tester;

struct Case {
  std::string_view name;    ///< "resp.psn_ahead_one_nak"
  std::string_view group;   ///< the role under test: responder, requester, cm, ud
  std::string_view rule;    ///< IBA section / compliance statement
  std::string_view expect;  ///< what the rule requires, in a line
  Setup setup;
  Break brk;                ///< the broken variant of uroce the case must flag (self-test)
  Outcome (*run)(Tester& t);
};

/// The cases of each role, in the order they run.
std::span<const Case> responder_cases();
std::span<const Case> requester_cases();
std::span<const Case> ud_cases();
std::span<const Case> cm_cases();

/// The result of one case, for the report.
struct CaseResult {
  const Case* c = nullptr;
  Outcome out;
  std::string pcap;  ///< the case's capture ("" without --report-dir)
  double ms = 0;     ///< how long the case took
};

/// The tester: a bare port (no stack but ARP replies for its address), the
/// control channel to the target helper, and the addresses, PSNs and capture
/// of the case that runs.
class Tester {
 public:
  struct Config {
    drivers::IoPort* port = nullptr;
    TcpChannel* helper = nullptr;
    Gid gid{};                 ///< our GID (--ip)
    uint32_t wait_ms = 20;     ///< quiet period that ends a collection
    uint32_t answer_ms = 1000; ///< how long a collection waits for the answers it wants
    uint32_t timeout_s = 10;   ///< helper answers
  };
  explicit Tester(const Config& cfg) : cfg_(cfg) {}

  /// Sets up the target for c (break: the broken variant to ask for, or
  /// kNone) and runs it. pcap: the capture file ("" for none).
  CaseResult run_case(const Case& c, uint32_t index, Break brk, const std::string& pcap);
  /// Ends the helper's session.
  void quit();

  // ---- for the cases
  const TargetSide& target() const { return target_; }
  /// The next PSN the target expects from us.
  uint32_t psn() const { return psn_; }
  void set_psn(uint32_t p) { psn_ = p; }
  /// A request to the target's QP at psn() with AckReq set, from our QP,
  /// with every address field filled in.
  wire::PacketDesc req(uint8_t opcode) const;
  /// Builds d with payload (wire::build: headers, pad, ICRC).
  std::vector<uint8_t> frame(const wire::PacketDesc& d, std::span<const uint8_t> payload = {}) const;
  /// Sends frame bytes as they are, and captures them.
  void send_raw(std::span<const uint8_t> frame);
  void send(const wire::PacketDesc& d, std::span<const uint8_t> payload = {}) { send_raw(frame(d, payload)); }
  /// The target's RoCE frames to us: until want of them have come (or
  /// answer_ms has passed), then until wait_ms passes without another (so
  /// that extra answers are seen too). want 0: until wait_ms of quiet.
  std::vector<Reply> collect(size_t want);
  /// The target's RoCE frames to us that have come by now (no wait).
  std::vector<Reply> take();
  /// Has every poll of the port (collections, waits for the helper) call f
  /// first; an empty f ends that. For a case that must keep sending while it waits.
  void on_poll(std::function<void()> f) { on_poll_ = std::move(f); }
  /// The helper's view of the target: QP state and completions so far.
  bool state(TargetState& out, std::string& err);
  /// Polls state() until it holds n completions or answer_ms has passed
  /// (then out holds what there was). False only if the helper failed.
  bool wait_completions(size_t n, TargetState& out, std::string& err);
  /// Has the target post count signaled WRs (op "send", "write" or "read";
  /// WRITEs and READs at a made-up region of ours) of len bytes each.
  bool post(std::string_view op, uint32_t len, uint32_t count, std::string& err);
  /// Sends the 256-byte MAD to the target's QP1 from our QP1 (UD SEND Only,
  /// Q_Key 0x80010000, IBA 13.5.1); the target's MADs come back to QP1 and
  /// collect() returns them too.
  void send_mad(std::span<const uint8_t> mad);
  /// Sends the target an ACK-opcode frame at psn with AETH syndrome and msn.
  /// Returns the time just before it was handed to the port (steady clock,
  /// ns; Reply::time_ns's clock): no earlier than the target can have it.
  uint64_t answer(uint32_t psn, uint8_t syndrome, uint32_t msn);
  /// Our QPN in this case.
  uint32_t our_qpn() const { return our_qpn_; }
  /// --answer-ms.
  uint32_t answer_ms() const { return cfg_.answer_ms; }

 private:
  bool setup(const Case& c, uint32_t index, Break brk, std::string& refused, std::string& err);
  bool exchange(const std::string& msg, std::string& reply, std::string& err);
  /// Takes what the port has received: captured, and the target's frames to
  /// our QP kept in pending_ for collect(). Returns how many were kept.
  size_t pump_rx();
  /// Replies to an ARP request for our address in frame f.
  void answer_arp(std::span<const uint8_t> f);

  Config cfg_;
  TargetSide target_;
  uint32_t our_qpn_ = 0;
  uint32_t psn_ = 0;
  wire::PcapWriter pcap_;
  std::vector<Reply> pending_;  // the target's frames received and not collected yet
  std::function<void()> on_poll_;
};

/// The steady clock in ns (Reply::time_ns's).
uint64_t steady_now_ns();

}  // namespace uroce::apps::conform
