// Device counters, declared once in an X-macro that generates the enum and the
// name table so they cannot drift. Names follow rxe's and mlx5's hw_counters
// where those exist (rxe: sent_pkts, rcvd_pkts, duplicate_request, ...).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace uroce {

#define UROCE_COUNTERS(X)                                                                  \
  /* packets */                                                                            \
  X(sent_pkts)                 /* frames handed to the port */                             \
  X(rcvd_pkts)                 /* frames taken from the port */                            \
  X(tx_ring_full)              /* frames the port refused; retried next poll */            \
  X(tx_pool_empty)             /* no mbuf for a frame to send; retried next poll */        \
  X(tx_zero_copy)              /* payload sent from registered memory */       \
  X(tx_copied)                 /* payload copied into the frame */             \
  /* receive drops, one per parse error (rx_drop_<reason>) */                              \
  X(rx_drop_not_roce)          /* ARP, TCP, other UDP: not ours */                         \
  X(rx_to_app)                 /* not RoCE, not ARP/ND/ICMP: handed to the application */  \
  X(rx_drop_app_ring_full)     /* ... but its ring (DeviceConfig::app_rx_ring) was full */ \
  X(rx_drop_short)                                                                         \
  X(rx_drop_bad_ip_version)                                                                \
  X(rx_drop_ip_options)                                                                    \
  X(rx_drop_ip_fragment)                                                                   \
  X(rx_drop_bad_ip_checksum)                                                               \
  X(rx_drop_length_mismatch)                                                               \
  X(rx_drop_bad_bth_tver)                                                                  \
  X(rx_drop_unknown_opcode)                                                                \
  X(rx_drop_bad_pad_count)                                                                 \
  X(rx_drop_bad_icrc)                                                                      \
  X(rx_drop_wrong_mac)         /* destination MAC is not ours */                           \
  X(rx_drop_wrong_gid)         /* destination IP is not in our GID table */                \
  X(rx_drop_unknown_qp)        /* no QP with that number */                                \
  X(rx_drop_wrong_src)         /* RC/UC: source GID is not the QP's peer (IBA 9.6) */      \
  X(rx_drop_qp_state)          /* QP not in a state that receives */                       \
  X(rx_drop_bad_pkey)                                                                      \
  X(rx_drop_bad_qkey)          /* UD Q_Key mismatch (C10-15) */                            \
  X(rx_drop_opcode_mismatch)   /* opcode not valid for the QP type or sequence */          \
  X(rx_drop_multiseg)          /* chained mbuf: the stack takes single-segment frames */   \
  X(rx_drop_no_recv_wqe)       /* UC/UD request with no receive WQE (class D) */           \
  X(rcvd_cnp)                  /* CNPs received (BTH opcode 0x81, A17.9.2) */              \
  X(rp_cnp_handled)            /* CNPs that cut a DCQCN QP's rate (reaction point) */      \
  X(rp_cnp_ignored)            /* CNPs for a QP without DCQCN, or no such QP */            \
  X(np_ecn_marked_roce_packets) /* CE-marked RoCE requests received */                     \
  X(np_cnp_sent)               /* CNPs sent (notification point) */                        \
  X(np_cnp_suppressed)         /* CE marks inside min_time_between_cnps: no CNP */         \
  X(np_cnp_no_room)            /* CNP not sent: transmit burst or pool full */             \
  X(cc_tx_paced)               /* requester held by the pacer (packet waits) */            \
  X(cc_rtt_samples)            /* RTT samples taken from ACKs (TIMELY input) */            \
  /* responder (rxe / mlx5 names) */                                                       \
  X(duplicate_request)         /* C9-104..105: duplicate re-ACKed / replayed */            \
  X(out_of_sequence)           /* PSN beyond expected: PSN sequence error NAK */           \
  X(seq_nak_sent)                                                                          \
  X(send_rnr_err)              /* RNR NAKs sent */                                         \
  X(resp_remote_access_errors) /* NAK remote access error sent */                          \
  X(resp_remote_invalid_request) /* NAK invalid request sent */                            \
  X(resp_remote_operational_error)                                                         \
  X(resp_local_length_error)                                                               \
  X(rdma_sends)                                                                            \
  X(rdma_recvs)                                                                            \
  X(ack_sent)                                                                              \
  X(ack_deferred)              /* ACK coalesced into a later one */                        \
  X(atomic_executed)                                                                       \
  X(read_replayed)                                                                         \
  X(atomic_replayed)                                                                       \
  X(dup_rd_atomic_dropped)     /* duplicate READ/atomic, its resource gone (class D) */    \
  /* requester / completer */                                                              \
  X(retransmits)               /* packets sent again */                                    \
  X(local_ack_timeout_err)     /* local ACK timer expired */                               \
  X(rcvd_seq_err)              /* PSN sequence error NAK received */                       \
  X(rcvd_rnr_err)              /* RNR NAK received */                                      \
  X(implied_nak_seq_err)       /* C9-134: response skipped an outstanding READ/atomic */   \
  X(retry_exceeded_err)                                                                    \
  X(retry_rnr_exceeded_err)                                                                \
  X(req_remote_access_errors)                                                              \
  X(req_remote_invalid_request)                                                            \
  X(duplicate_response)        /* ghost / stale ACK or response dropped */                 \
  X(unsent_psn_response)       /* ACK/response for a PSN never sent: dropped */            \
  X(completer_bad_resp)        /* response that fits no outstanding request */             \
  X(uc_msg_dropped)            /* UC message abandoned after a PSN gap */                  \
  X(cq_overflow)                                                                           \
  X(cq_events)                 /* completion events raised (req_notify_cq) */              \
  X(async_events)              /* asynchronous events raised (IBA 11.6.3) */

/// uroce's extension (QpAttr::ext, docs/LOSS_RECOVERY.md): counted per
/// device only, after the others, so that the per-QP block (QpCounters)
/// stays within the per-QP state budget.
#define UROCE_EXT_COUNTERS(X)                                                              \
  X(sr_sacks_sent)             /* ACKs sent with a SACK block */                           \
  X(sr_sacks_rcvd)             /* ACKs received with a SACK block */                       \
  X(sr_ooo_placed)             /* request packets placed ahead of the expected PSN */      \
  X(sr_dropped_ooo)            /* ahead of the expected PSN, but not placed (resent) */    \
  X(sr_lost)                   /* PSNs the requester found lost on SACK evidence */        \
  X(sr_resent)                 /* lost PSNs sent again */                                  \
  X(sr_probes)                 /* tail-loss probes: the newest PSN sent again, unanswered */ \
  X(paths_down)                /* a sprayed path taken out after consecutive losses */     \
  X(rx_drop_sack)              /* SACK on a QP without selective repeat: dropped */

enum class Counter : uint16_t {
#define UROCE_COUNTER_ENUM(name) name,
  UROCE_COUNTERS(UROCE_COUNTER_ENUM)
  UROCE_EXT_COUNTERS(UROCE_COUNTER_ENUM)
#undef UROCE_COUNTER_ENUM
      kCount
};

#define UROCE_COUNTER_ONE(name) +1
/// The counters a QP's own block holds: all but UROCE_EXT_COUNTERS.
inline constexpr size_t kQpCounterCount = size_t(Counter::kCount) - (0 UROCE_EXT_COUNTERS(UROCE_COUNTER_ONE));
#undef UROCE_COUNTER_ONE

inline constexpr std::array<std::string_view, size_t(Counter::kCount)> kCounterNames = {
#define UROCE_COUNTER_NAME(name) #name,
    UROCE_COUNTERS(UROCE_COUNTER_NAME)
    UROCE_EXT_COUNTERS(UROCE_COUNTER_NAME)
#undef UROCE_COUNTER_NAME
};

/// One block of counter values, indexed by Counter, in words of type T: the
/// first N counters (a counter past them reads 0 and is not counted).
/// Written only by the thread that polls the device; query_counters returns
/// a reference to the live device block (read it on that thread, or accept a
/// snapshot that may be one poll old, as DPDK telemetry does).
template <class T, size_t N = size_t(Counter::kCount)>
struct CounterBlock {
  std::array<T, N> v{};
  void inc(Counter c, uint64_t n = 1) {
    if (size_t(c) < N) v[size_t(c)] += T(n);
  }
  uint64_t get(Counter c) const { return size_t(c) < N ? v[size_t(c)] : 0; }
};

/// The device's counters.
using Counters = CounterBlock<uint64_t>;
/// The per-QP block: the same counters in 32 bits, so that they wrap at 2^32
/// (as a NIC's per-QP counters may). Half the bytes of a Counters block per
/// QP: fewer cache lines touched per packet with thousands of QPs, and the
/// 2 KiB per-QP state budget (docs/PERFORMANCE.md, "Per-QP state").
using QpCounters = CounterBlock<uint32_t, kQpCounterCount>;

}  // namespace uroce
