// The states of the three roles' state machines (STYLE rule 2), each listed
// once in an X-macro that makes both the enum and its constexpr name table
// (stack/common/enum_name.h: kChkPsn -> "chk_psn"), so they cannot drift.
// The handler of each state, one function per state, sits in its role's
// file: requester.cc (IBA 9.7.4, 9.7.5.1), responder.cc (IBA 9.7.5.2,
// 9.9.3), completer.cc (IBA 9.7.5.1, 9.9.2). The names are what the state
// trace prints (include/uroce/trace.h, set_qp_trace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "stack/common/enum_name.h"

namespace uroce::transport {

/// Requester: from a send WQE to request packets (requester_tx).
#define UROCE_REQ_STATES(X)                                                     \
  X(kGetWqe)      /* the next WQE to work on, if the QP may send */             \
  X(kChkFence)    /* IBA 10.8.3.3: a fenced WQE waits for earlier READs */       \
  X(kChkRdAtomic) /* IBA 9.7.5.1.4: at most max_rd_atomic outstanding */         \
  X(kChkLocal)    /* IBA 10.6.3: the L_Keys of the scatter/gather list */        \
  X(kExecLocal)   /* LOCAL_INV, executed in order (IBA 10.6.6.1) */              \
  X(kStartWqe)    /* the message gets its PSNs */                                \
  X(kChkWindow)   /* the window of unacknowledged PSNs */                        \
  X(kChkPacer)    /* congestion control: may the next packet leave now */        \
  X(kSendPacket)  /* builds the packet at req_psn */                             \
  X(kNextPacket)  /* moves req_psn on, to the next WQE after the last packet */  \
  X(kErrLocal)    /* a local error ends the WQE (IBA 10.3.1.10) */               \
  X(kDone)

/// Responder: one inbound request packet (responder_rx), the checks in the
/// order of IBA 9.7.5.2 and rxe, then the error states that do_error maps to
/// the IBA error classes of 9.9.3.
#define UROCE_RESP_STATES(X)                                                    \
  X(kChkPsn)                /* C9-104..111: expected, duplicate or beyond */     \
  X(kChkOpSeq)              /* IBA 9.8.2.2: First/Middle/Last sequence */         \
  X(kChkOpValid)            /* the QP's access flags; UD: the Q_Key */            \
  X(kChkResource)           /* a receive WQE or a responder resource */           \
  X(kChkLength)             /* PMTU and message length */                         \
  X(kChkRkey)               /* R_Key, PD, access, bounds; atomic alignment */     \
  X(kExecute)               /* places data, executes READ/atomic */               \
  X(kComplete)              /* the receive completion */                          \
  X(kAcknowledge)           /* the coalesced ACK if AckReq */                     \
  X(kDuplicate)             /* C9-105: re-ACK or replay from a resource */        \
  X(kDone)                                                                      \
  X(kErrPsnOutOfSeq)        /* class B: PSN sequence error NAK */                 \
  X(kErrRnr)                /* class B: RNR NAK (no receive WQE) */               \
  X(kErrMissingOpcodeFirst) /* class C: invalid request */                        \
  X(kErrMissingOpcodeLast)                                                      \
  X(kErrUnsupportedOpcode)                                                      \
  X(kErrMisalignedAtomic)                                                       \
  X(kErrTooManyRdAtomic)                                                        \
  X(kErrLength)                                                                 \
  X(kErrInvalidateRkey)                                                         \
  X(kErrRkeyViolation)      /* class C: remote access error */                    \
  X(kErrMalformedWqe)       /* class A: remote operational error */               \
  X(kErrCqOverflow)         /* class G */

/// Completer: one response packet (completer_rx): ACK, NAK, READ response or
/// atomic ACK, matched to the oldest outstanding WQE.
#define UROCE_COMP_STATES(X)                                                    \
  X(kGetWqe)     /* the oldest started WQE */                                    \
  X(kChkPsn)     /* stale, implied NAK (IBA 9.7.5.1.5), gap, or in sequence */   \
  X(kChkAck)     /* the AETH syndrome, or the response's opcode */               \
  X(kRead)       /* places READ response data */                                 \
  X(kAtomic)     /* places the atomic's original value */                        \
  X(kCompWqe)    /* completes the WQE (and later ones the packet ACKs) */        \
  X(kUpdateComp) /* restarts the ACK timer, reschedules the requester */         \
  X(kRetry)      /* go-back-N (IBA 9.7.5.1.1), against retry_cnt */              \
  X(kRnr)        /* RNR NAK: wait, then resend (IBA 9.7.5.2.8) */                \
  X(kBadResp)    /* a response that cannot be (kBadRespErr) */                   \
  X(kErr)        /* ends the WQE with an error; the QP to ERR */                 \
  X(kDrop)       /* a duplicate or ghost response */                             \
  X(kDone)

enum class ReqState : uint8_t { UROCE_REQ_STATES(UROCE_ENUMERATOR) };
enum class RespState : uint8_t { UROCE_RESP_STATES(UROCE_ENUMERATOR) };
enum class CompState : uint8_t { UROCE_COMP_STATES(UROCE_ENUMERATOR) };

inline constexpr auto kReqStateNames = UROCE_ENUM_NAMES(UROCE_REQ_STATES);
inline constexpr auto kRespStateNames = UROCE_ENUM_NAMES(UROCE_RESP_STATES);
inline constexpr auto kCompStateNames = UROCE_ENUM_NAMES(UROCE_COMP_STATES);

/// The state's name as the trace prints it: "get_wqe", "chk_psn", "err_rnr", ...
constexpr std::string_view req_state_name(ReqState s) { return kReqStateNames[size_t(s)]; }
constexpr std::string_view resp_state_name(RespState s) { return kRespStateNames[size_t(s)]; }
constexpr std::string_view comp_state_name(CompState s) { return kCompStateNames[size_t(s)]; }

static_assert(req_state_name(ReqState::kChkRdAtomic) == "chk_rd_atomic");
static_assert(resp_state_name(RespState::kErrPsnOutOfSeq) == "err_psn_out_of_seq");
static_assert(comp_state_name(CompState::kUpdateComp) == "update_comp");

}  // namespace uroce::transport
