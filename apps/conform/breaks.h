// The broken variants of uroce that `uroce conform`'s self-test runs each case
// against (docs/CONFORMANCE.md): a PacketIo wrapper between the target
// helper's device and its port that makes uroce misbehave on the wire in the
// way a stack bug would. Only the helper started with --self-test-breaks
// installs it; the stack itself has no fault branch. Frames it changes get a
// fresh ICRC (wire::finish_frame), so the peer's parser accepts them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include <rte_mbuf.h>

#include <uroce/packet_io.h>

namespace uroce::apps::conform {

/// The Q_Key of the uroce target helper's UD QPs.
inline constexpr uint32_t kConformQkey = 0x11111111;

#define UROCE_CONFORM_BREAKS(X)                                                                       \
  X(kNone, "none", "uroce as it is")                                                                  \
  X(kRxAcceptBadIcrc, "rx_accept_bad_icrc", "takes frames with a wrong ICRC (their ICRC is fixed)")   \
  X(kRxAcceptAnyPkey, "rx_accept_any_pkey", "takes frames of any P_Key (set to the default)")         \
  X(kTxNakAsAck, "tx_nak_as_ack", "answers ACK where it NAKs (a responder that does not check)")      \
  X(kTxNakTwice, "tx_nak_twice", "sends every PSN sequence error NAK twice (a NAK per packet)")       \
  X(kTxFirstAnswerOnly, "tx_first_answer_only", "sends only its first RoCE frame of a case (no re-ACK, no READ replay)") \
  X(kTxRnrTimerZero, "tx_rnr_timer_zero", "puts timer code 0 in its RNR NAKs, not the QP's min_rnr_timer") \
  X(kTxNoRetransmit, "tx_no_retransmit", "never sends a request PSN twice (no retry after a timeout, RNR NAK or NAK)") \
  X(kRxGhostAckTaken, "rx_ghost_ack_taken", "takes an ACK for a PSN never sent as one for the last PSN sent")     \
  X(kRxAckPsnEarly, "rx_ack_psn_early", "reads the PSN of every ACK and PSN sequence error NAK one too low")     \
  X(kRxAnyService, "rx_any_service", "takes UC opcodes on an RC QP (as the RC opcode of the same operation)")    \
  X(kRxRnrTimerShort, "rx_rnr_timer_short", "reads every RNR NAK's timer as code 1 (0.01 ms)")                    \
  X(kRxNakAsAck, "rx_nak_as_ack", "takes NAKs and reserved AETH syndromes for ACKs (no error completion)")      \
  X(kRxNoAckReq, "rx_no_ack_req", "reads every AckReq bit as 0 (answers no request that asks for an ACK)")      \
  X(kRxAnyQkey, "rx_any_qkey", "takes UD datagrams of any Q_Key (set to the QP's)")                          \
  X(kTxRejConsumer, "tx_rej_consumer", "gives every REJ reason 28 (consumer defined), whatever the cause")      \
  X(kTxNoCmAnswer, "tx_no_cm_answer", "sends no CM MAD at all (drops what QP1 sends)")                       \
  X(kRxPadUnchecked, "rx_pad_unchecked", "takes a request's payload as its bytes less the pad count, whatever they are (the frame re-padded to match)") \
  X(kRxCnpIgnored, "rx_cnp_ignored", "drops every CNP it receives (a reaction point that ignores them)")         \
  X(kTxResendEarly, "tx_resend_early", "sends every new request again 1 ms later (a local ACK timer far too short)") \
  X(kTxAckCreditsOverstated, "tx_ack_credits_overstated", "puts credit code 30 (32768 receives) in every ACK it sends")

enum class Break : uint8_t {
#define UROCE_ENUM(e, s, h) e,
  UROCE_CONFORM_BREAKS(UROCE_ENUM)
#undef UROCE_ENUM
};

std::string_view break_name(Break b);
std::string_view break_help(Break b);
std::optional<Break> break_from_name(std::string_view name);

/// Wraps io (which must outlive this); passes every burst through until set()
/// names a break. Frames of more than one segment pass unchanged. Test-only:
/// with a break set, frames go to the port one at a time.
class BreakIo final : public PacketIoWrapper {
 public:
  explicit BreakIo(PacketIo& io) : PacketIoWrapper(io) {}
  ~BreakIo() override { drop_early(); }
  /// The break from now on (the helper sets it at each case's setup).
  void set(Break b);

  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override;
  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override;

 private:
  /// Changes a received frame in place. Returns false to drop it.
  bool rx_one(rte_mbuf* m);
  /// kRxPadUnchecked: re-pads a RoCEv2 request whose pad count does not fit
  /// its bytes (IPv4, no VLAN) so that it parses. False if it is not one.
  bool repad(rte_mbuf* m);
  /// kTxResendEarly: sends the copies that are due; drop_early frees them all.
  void send_early();
  void drop_early();
  /// Changes a frame to send in place. Returns how many times to send it:
  /// 0 (drop), 1, or 2 (kTxNakTwice).
  int tx_one(rte_mbuf* m);

  Break brk_ = Break::kNone;
  bool answered_ = false;  // kTxFirstAnswerOnly: a RoCE frame went out since set()
  bool sent_any_ = false;  // a request went out since set()
  uint32_t last_sent_ = 0;  // the highest request PSN sent since set()
  struct Early {
    rte_mbuf* m = nullptr;
    uint64_t due_ns = 0;
  };
  std::array<Early, 16> early_{};  // kTxResendEarly: copies of new requests to send again
};

}  // namespace uroce::apps::conform
