// The verbs-style public API (IBA Vol 1 ch. 11, named after libibverbs so that
// RDMA programmers feel at home: ibv_post_send -> uroce::post_send, struct
// ibv_send_wr -> uroce::SendWr, IBV_WC_RETRY_EXC_ERR -> WcStatus::kRetryExcErr).
// Enumerator values equal libibverbs' where libibverbs defines them.
//
// Threading: a Context and everything created from it belong to one thread at
// a time (the thread that calls poll(), run-to-completion). Objects are owned
// by their Context and returned as plain pointers, as in verbs; destroy_* /
// dealloc_* / dereg_* release them.
//
// Errors: control-path calls return Status / Result. The data path
// (post_send, post_recv, poll_cq, poll) never throws or allocates; protocol
// faults show up as WcStatus values in completions. Status messages are
// static strings (Status::message()); StatusCode names the class of error.
//
// Call classes used below: "control path" calls may allocate and take locks
// (set up before the data path runs, or between polls); "data path" calls do
// neither and are meant for the polling loop. Every call on a Context, and
// on objects created from it, must come from the thread that polls it (an
// application thread on another core uses an EngineChannel instead,
// <uroce/engine_group.h>). DPDK telemetry reads a snapshot from its own thread
// (`uroce stat`, /uroce/* in dpdk-telemetry.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <uroce/addr.h>
#include <uroce/cc.h>
#include <uroce/counters.h>
#include <uroce/status.h>

struct rte_mbuf;

namespace uroce {

class PacketIo;

// ---------------------------------------------------------------- enums

enum class QpType : uint8_t { kRc = 2, kUc = 3, kUd = 4 };  // IBV_QPT_*

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kSqd, kSqe, kErr };  // IBV_QPS_*
/// "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" (the IBA 10.3.1 names).
const char* qp_state_str(QpState s);

/// Path MTU codes (IBV_MTU_*): bytes = 128 << code.
enum class Mtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };
inline constexpr uint32_t mtu_bytes(Mtu m) { return 128u << uint8_t(m); }

enum AccessFlags : uint32_t {  // IBV_ACCESS_*
  kAccessLocalWrite = 1,
  kAccessRemoteWrite = 2,
  kAccessRemoteRead = 4,
  kAccessRemoteAtomic = 8,
  /// uroce extension (no IBV_ACCESS_* equivalent): a peer may invalidate
  /// this region's R_Key with SEND with Invalidate. IBA 10.6.6 allows remote
  /// invalidation only of keys made for it (fast-registered regions, type 2
  /// memory windows), which uroce does not have; without this flag a plain
  /// region cannot be revoked by a peer (as on rxe and mlx5 for ibv_reg_mr).
  kAccessRemoteInvalidate = 1u << 24,
};

enum class WrOpcode : uint8_t {  // IBV_WR_*
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
  kLocalInv = 7,
  kSendWithInv = 9,
};

enum SendFlags : uint32_t {  // IBV_SEND_*
  kSendFence = 1,
  kSendSignaled = 2,
  kSendSolicited = 4,
  kSendInline = 8,
};

enum class WcStatus : uint8_t {  // IBV_WC_*
  kSuccess,
  kLocLenErr,
  kLocQpOpErr,
  kLocEecOpErr,
  kLocProtErr,
  kWrFlushErr,
  kMwBindErr,
  kBadRespErr,
  kLocAccessErr,
  kRemInvReqErr,
  kRemAccessErr,
  kRemOpErr,
  kRetryExcErr,
  kRnrRetryExcErr,
  kLocRddViolErr,
  kRemInvRdReqErr,
  kRemAbortErr,
  kInvEecnErr,
  kInvEecStateErr,
  kFatalErr,
  kRespTimeoutErr,
  kGeneralErr,
};
/// "success", "retry counter exceeded", ... as ibv_wc_status_str words them.
const char* wc_status_str(WcStatus s);

enum class WcOpcode : uint8_t {  // IBV_WC_*
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kLocalInv = 6,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

enum WcFlags : uint32_t {  // IBV_WC_*
  kWcGrh = 1,
  kWcWithImm = 2,
  kWcWithInv = 8,
};

/// Attribute mask bits for modify_qp (IBV_QP_* values).
enum QpAttrMask : uint32_t {
  kQpState = 1u << 0,
  kQpCurState = 1u << 1,
  kQpAccessFlags = 1u << 3,
  kQpPkeyIndex = 1u << 4,
  kQpPort = 1u << 5,
  kQpQkey = 1u << 6,
  kQpAv = 1u << 7,
  kQpPathMtu = 1u << 8,
  kQpTimeout = 1u << 9,
  kQpRetryCnt = 1u << 10,
  kQpRnrRetry = 1u << 11,
  kQpRqPsn = 1u << 12,
  kQpMaxQpRdAtomic = 1u << 13,
  kQpMinRnrTimer = 1u << 15,
  kQpSqPsn = 1u << 16,
  kQpMaxDestRdAtomic = 1u << 17,
  kQpCap = 1u << 19,
  kQpDestQpn = 1u << 20,
  kQpExt = 1u << 31,  ///< uroce's QpAttr::ext (no IBV_QP_* bit; optional at INIT -> RTR of an RC QP)
};

// ---------------------------------------------------------------- objects

struct Context;

/// Protection domain (IBA 10.2.3): MRs, QPs, SRQs and AHs of one PD may be
/// used together. Owned by its Context; released by dealloc_pd.
struct Pd {
  Context* context;
  uint32_t handle;
};

/// Memory region (IBA 10.6): [addr, addr + length) of application memory,
/// registered for local use (lkey, in Sge) and remote access (rkey, given to
/// the peer). The memory stays the application's: it must stay valid until
/// dereg_mr. Owned by its Context.
struct Mr {
  Context* context;
  Pd* pd;
  void* addr;
  size_t length;
  uint32_t access;  ///< AccessFlags
  uint32_t lkey;
  uint32_t rkey;
};

/// Completion queue (IBA 11.4.2): completions of the QPs that name it, reaped
/// with poll_cq. Owned by its Context.
struct Cq {
  Context* context;
  void* cq_context;
  uint32_t cqe;  ///< capacity actually allocated (>= requested)
};

/// Shared receive queue (IBA 10.2.9): receive WQEs shared by the QPs that name it.
struct Srq {
  Context* context;
  Pd* pd;
  void* srq_context;
};

/// Address vector: where a UD send goes, or the path of a connected QP.
struct AhAttr {
  Gid dgid{};
  MacAddr dmac{};            ///< resolved destination MAC
  uint8_t sgid_index = 0;    ///< index into the device's GID table
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0; ///< DSCP << 2 | ECN bits as sent
  uint32_t flow_label = 0;
  uint8_t sl = 0;
  uint8_t port_num = 1;
};

/// Address handle (IBA 10.2.2): the destination of UD sends (SendWr::ud.ah).
struct Ah {
  Context* context;
  Pd* pd;
  AhAttr attr;
};

struct QpCap {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
  uint32_t max_inline_data = 0;
};

struct QpInitAttr {
  void* qp_context = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  QpCap cap;
  QpType qp_type = QpType::kRc;
  bool sq_sig_all = false;
};

/// How a QP that sprays spreads its packets over its paths.
enum class PathMode : uint8_t {
  kPacket,   ///< each packet takes the next live path
  kFlowlet,  ///< a burst stays on one path; the path changes after flowlet_gap_ns without a packet
};

/// uroce's transport extension beyond IBA RoCE (docs/LOSS_RECOVERY.md):
/// selective repeat and multipath spraying on an RC QP. Both ends must set the
/// same ext, which each application learns from its out-of-band exchange (or
/// rdma_cm private data); set at INIT -> RTR with kQpExt. Without it, as with
/// a default QpExt, a QP is plain RoCE: go-back-N on one UDP source port, the
/// same bits on the wire as before the extension existed.
struct QpExt {
  bool selective_repeat = false;  ///< SACKs, per-packet placement, resend only what was lost
  uint16_t paths = 1;             ///< UDP source ports the QP's requests use (1..256)
  PathMode path_mode = PathMode::kPacket;
  uint32_t flowlet_gap_ns = 0;    ///< kFlowlet: idle time that ends a flowlet (0: the stack's default)
};

struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCap cap;
  AhAttr ah_attr;
  uint16_t pkey_index = 0;
  uint8_t max_rd_atomic = 0;       ///< outstanding RDMA READ/atomic as requester
  uint8_t max_dest_rd_atomic = 0;  ///< as responder
  uint8_t min_rnr_timer = 0;       ///< RNR NAK timer code we advertise (IBA Table 45)
  uint8_t port_num = 1;
  uint8_t timeout = 0;             ///< local ACK timeout 4.096 us * 2^timeout; 0 = infinite
  uint8_t retry_cnt = 0;           ///< 0..7
  uint8_t rnr_retry = 0;           ///< 0..7, 7 = infinite
  QpExt ext;                       ///< kQpExt: uroce's extension (RC only)
};

/// Queue pair (IBA 10.2.4, 10.3). qp_num is unique within its device (and
/// its EngineGroup); state mirrors the QP's state after each modify_qp and
/// after the engine moves it to ERR/SQE. Owned by its Context.
struct Qp {
  Context* context;
  void* qp_context;
  Pd* pd;
  Cq* send_cq;
  Cq* recv_cq;
  Srq* srq;
  uint32_t qp_num;
  QpState state;
  QpType qp_type;
};

struct SrqInitAttr {
  void* srq_context = nullptr;
  uint32_t max_wr = 0;
  uint32_t max_sge = 1;
  uint32_t srq_limit = 0;
};

// ---------------------------------------------------------------- work requests

/// Scatter/gather element: length bytes at addr, inside the MR with lkey.
struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

/// A send work request (IBA 10.8.3): opcode, local buffers, and the remote
/// target (rdma / atomic) or destination (ud). wr_id comes back in its Wc.
/// post_send copies what it needs (inline data included); the Sge array and
/// the WR may be reused when it returns, the memory they point at only after
/// the completion.
struct SendWr {
  uint64_t wr_id = 0;
  SendWr* next = nullptr;
  Sge* sg_list = nullptr;
  int num_sge = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;  ///< SendFlags
  uint32_t imm_data = 0;    ///< host order; sent big-endian in ImmDt
  uint32_t invalidate_rkey = 0;  ///< kSendWithInv, kLocalInv
  struct {
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
  } rdma;
  struct {
    uint64_t remote_addr = 0;
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    uint32_t rkey = 0;
  } atomic;
  struct {
    Ah* ah = nullptr;
    uint32_t remote_qpn = 0;
    uint32_t remote_qkey = 0;
  } ud;

  // Chainable setters, for the builders in <uroce/wr.h>:
  // `SendWr wr = send_wr(1, &sge).signaled().solicited();`. Each adds one
  // SendFlags bit and returns this WR (copy it out of a temporary; do not
  // keep a reference to one).
  /// Asks for a completion on the send CQ even without sq_sig_all (kSendSignaled).
  SendWr& signaled() {
    send_flags |= kSendSignaled;
    return *this;
  }
  /// Sets the Solicited Event bit: the receiver's CQ notifies on it (kSendSolicited).
  SendWr& solicited() {
    send_flags |= kSendSolicited;
    return *this;
  }
  /// Waits for earlier READs and atomics to complete before this WR starts (kSendFence).
  SendWr& fenced() {
    send_flags |= kSendFence;
    return *this;
  }
  /// Copies the payload at post_send (kSendInline): the buffers may be reused
  /// when it returns and their L_Key is not checked; at most max_inline_data bytes.
  SendWr& inlined() {
    send_flags |= kSendInline;
    return *this;
  }
};

/// A receive work request: where an incoming SEND's payload goes. The buffers
/// must stay valid until its completion.
struct RecvWr {
  uint64_t wr_id = 0;
  RecvWr* next = nullptr;
  Sge* sg_list = nullptr;
  int num_sge = 0;
};

/// A work completion (IBA 11.4.2.1), as poll_cq returns it.
struct Wc {
  uint64_t wr_id;
  WcStatus status;
  WcOpcode opcode;
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm_data;          ///< host order; valid with kWcWithImm
  uint32_t invalidated_rkey;  ///< valid with kWcWithInv
  uint32_t qp_num;
  uint32_t src_qp;            ///< UD
  uint32_t wc_flags;          ///< WcFlags
  uint16_t pkey_index;
  uint8_t sl;
};

// ---------------------------------------------------------------- device

/// Device parameters for open_device. Table sizes are fixed at open (no
/// allocation on the data path later).
struct DeviceConfig {
  MacAddr mac{};
  Gid gid{};                 ///< GID index 0: IPv4-mapped or IPv6
  uint32_t max_qp = 1024;
  uint32_t max_mr = 4096;
  uint32_t max_cq = 1024;
  uint32_t max_srq = 256;
  uint32_t max_pd = 1024;
  uint32_t max_ah = 4096;
  uint64_t key_seed = 0;     ///< 0: take one from the TSC; fixed for reproducible tests

  // DSCP / ECN / PCP of RoCE data packets (A17.9, RFC 2474, RFC 3168), the
  // device default that an AH's traffic_class refines (stack/net/qos.h).
  uint8_t dscp = 0;          ///< DSCP when the AH asks for none (AH DSCP 0); 0..63
  bool force_dscp = false;   ///< use dscp even where the AH carries one
  /// Send data packets ECN-capable, ECT(0), so that switches mark CE instead
  /// of dropping. Off by default; turn it on with a congestion control that
  /// reacts to CE (cc.algorithm = kDcqcn at the sender, cc.np_enabled at the
  /// receiver): RFC 3168 5, only a transport that responds may claim ECT.
  bool ecn = false;
  uint8_t vlan_pcp = 0;      ///< 802.1p priority of VLAN-tagged frames whose AH has sl 0; 0..7

  /// Zero-copy transmit: where the port takes chained external-buffer mbufs
  /// (IoCaps::tx_multiseg), a packet payload of at least tx_zero_copy_min_bytes
  /// that lies in one registered region is sent from that memory in place
  /// (headers and ICRC in mbufs of their own) instead of being copied. The
  /// memory must then stay unchanged until the port has sent the frame, and
  /// dereg_mr returns kBusy while frames from the region are in the port.
  /// Off by default (counters tx_zero_copy / tx_copied tell which path ran).
  bool tx_zero_copy = false;
  uint32_t tx_zero_copy_min_bytes = 512;

  /// Congestion control of the device's RC/UC QPs: algorithm (none, DCQCN,
  /// TIMELY), line rate, pacer burst, DCQCN NP/RP and TIMELY parameters
  /// (include/uroce/cc.h; ConnectX names and defaults). Checked by open_device.
  CcConfig cc;

  /// Sharing the port with the application (examples/l2fwd_roce): frames
  /// that are not RoCE and that the device's addressing layer does not
  /// consume (ARP, IPv6 ND and ICMP echo addressed to its GIDs are answered
  /// as always) are kept, up to app_rx_ring of them, for rx_non_roce() instead
  /// of being dropped. 0 (the default): drop them, counting rx_drop_not_roce.
  uint32_t app_rx_ring = 0;

  /// The clock whose time the program passes to poll(), for poll to read
  /// again after a receive burst that brought frames: the frames are then
  /// dated when they were taken, not when the program read its clock before
  /// the poll. A thread preempted between the two would otherwise date a
  /// frame that arrived meanwhile too early, and arm its timers early: an RNR
  /// NAK's wait (IBA 9.7.5.2.8: at least the NAK's time) fell 5 ms short in a
  /// loaded run (docs/CONFORMANCE.md). Null (the default): poll's now_ns only,
  /// as tests with a virtual clock want. Called on the polling thread.
  uint64_t (*clock)(const void* clock_ctx) = nullptr;
  const void* clock_ctx = nullptr;
};

/// Destroys a context and everything created from it (QPs, CQs, MRs, ...;
/// pointers to them become invalid), frees the frames it still held and
/// leaves the telemetry registry. Control path; not while the context is
/// being polled. Null is ignored.
void close_device(Context* ctx);
struct ContextDeleter {
  void operator()(Context* ctx) const { close_device(ctx); }
};
using ContextPtr = std::unique_ptr<Context, ContextDeleter>;

/// Opens a device over a packet port. The port must outlive the context.
/// Control path; EAL must be up (init_eal). The context owns its objects and
/// is owned by the returned ContextPtr (close_device on destruction). It is
/// registered with DPDK telemetry (/uroce/*). Errors: kInvalidArgument (table
/// sizes out of range, port without a transmit pool, bad QoS settings or GID),
/// kResourceExhausted.
Result<ContextPtr> open_device(PacketIo& io, const DeviceConfig& cfg);

/// One step of the engine: receive and process a burst, run timers due at
/// now_ns, let requesters transmit, flush the transmit burst. Returns the
/// number of frames received and sent. Time is injected: production passes
/// the TSC in nanoseconds, tests a virtual clock (and DeviceConfig::clock, if
/// set, moves it on after a receive burst).
/// Data path; only the context's polling thread. now_ns must not go backwards.
uint32_t poll(Context* ctx, uint64_t now_ns);

/// Takes up to n frames that poll() received but that are not RoCE (see
/// DeviceConfig::app_rx_ring) into out[0..ret), oldest first. Ownership of
/// each mbuf passes to the caller, who frees it (rte_pktmbuf_free) or sends
/// it on (the port's tx_burst). Data path; same thread as poll(). Frames the
/// ring had no room for were dropped and counted (rx_drop_app_ring_full);
/// frames handed over are counted as rx_to_app.
uint16_t rx_non_roce(Context* ctx, rte_mbuf** out, uint16_t n);

/// Device and per-reason counters (names modelled on rxe and mlx5 hw_counters).
/// The reference stays valid while the context lives; read it on the polling
/// thread (or accept a racy snapshot from another one).
const Counters& query_counters(const Context* ctx);
/// One QP's share of the device counters: what the engine counted while it
/// served this QP (rcvd_pkts: frames dispatched to it; sent_pkts: frames it
/// built; drops, NAKs, retransmits, timeouts). Zero for a new QP. A snapshot,
/// widened from the QP's 32-bit block (QpCounters: each value wraps at 2^32).
Counters query_qp_counters(Qp* qp);

/// Allocates a protection domain. Control path. Errors: kInvalidArgument (null
/// context), kResourceExhausted (max_pd).
Result<Pd*> alloc_pd(Context* ctx);
/// Frees a PD. Errors: kBusy (MRs, QPs, SRQs or AHs still use it), kNotFound,
/// kInvalidArgument.
Status dealloc_pd(Pd* pd);

/// Registers [addr, addr + length) with access (AccessFlags) and draws random
/// keys for it (IBA 10.6.3.1). Control path; the memory is not copied or
/// pinned and must stay valid until dereg_mr. Errors: kInvalidArgument (null
/// or foreign PD, bad flags, remote write/atomic without local write, a
/// region that wraps), kResourceExhausted (max_mr).
Result<Mr*> reg_mr(Pd* pd, void* addr, size_t length, uint32_t access);
/// Deregisters an MR; its keys stop working at once (later requests that use
/// them get a remote access error). Errors: kBusy (zero-copy frames from it
/// are still in the port: poll and retry), kNotFound, kInvalidArgument.
Status dereg_mr(Mr* mr);

/// Creates a CQ with room for at least cqe completions (Cq::cqe says how
/// many). A CQ that overflows moves its QPs to ERR (IBA 11.4.2.1) and counts
/// cq_overflow. Control path. Errors: kInvalidArgument (cqe 0 or too big),
/// kResourceExhausted (max_cq).
Result<Cq*> create_cq(Context* ctx, uint32_t cqe, void* cq_context = nullptr);
/// Errors: kBusy (a QP still uses it), kNotFound, kInvalidArgument.
Status destroy_cq(Cq* cq);
/// Reaps up to num_entries completions into wc; returns how many (data path).
int poll_cq(Cq* cq, int num_entries, Wc* wc);

/// Called from inside poll when an armed CQ gets a completion its arming asks
/// for; the CQ is disarmed first (one event per req_notify_cq).
using CqEventFn = void (*)(Cq* cq, void* arg);
/// Sets (or with nullptr clears) the handler of cq's completion events.
void set_cq_event_handler(Cq* cq, CqEventFn fn, void* arg);
/// Arms cq for one completion event (IBA 11.4.2.2): on the next completion
/// added, or with solicited_only on the next solicited one (a receive of a
/// message whose last packet has the BTH SE bit) or unsuccessful one.
/// Completions already in the CQ do not count: poll after arming. Errors:
/// kInvalidArgument (null cq).
Status req_notify_cq(Cq* cq, bool solicited_only);

/// Asynchronous events (IBA 11.6.3): what the device reports outside any
/// completion, affiliated with a CQ, a QP or an SRQ. Values are libibverbs'
/// IBV_EVENT_*. uroce raises only these:
enum class AsyncEventType : uint8_t {
  /// A completion found its CQ full (IBA 11.4.2.1, CQ overrun): once per CQ.
  kCqErr = 0,
  /// Local Work Queue Catastrophic Error: the QP went to ERR because it could
  /// not write a completion (its CQ overran), as ConnectX reports it.
  kQpFatal = 1,
  /// Invalid Request Local Work Queue Error: an RC responder moved to ERR on
  /// an unsupported opcode or an opcode out of sequence (class C, IBA 9.9.3.1.2).
  kQpReqErr = 2,
  /// Local Access Violation Work Queue Error: an RC responder moved to ERR on
  /// an R_Key violation, a length error, a misaligned atomic, too many READs
  /// or atomics, or an R_Key it may not invalidate (class C).
  kQpAccessErr = 3,
  /// Communication Established: an RC or UC QP in RTR received its first
  /// request (IBA 11.6.3.1; the passive side of a connection may move to RTS
  /// on it before the CM's RTU arrives). Once per RTR.
  kCommEst = 4,
  /// SRQ Limit Reached: a WQE taken left fewer than the SRQ's armed limit
  /// in it (modify_srq; IBA 10.2.9.3). The limit is disarmed: once per arming.
  kSrqLimitReached = 15,
  /// Last WQE Reached: a QP attached to an SRQ went to ERR (any way, modify_qp
  /// too) and will take no more WQEs from the SRQ (IBA 10.2.9.5, 11.6.3.1).
  kQpLastWqeReached = 16,
};

/// One asynchronous event: its type and the object it is affiliated with
/// (qp for the QP events, cq for kCqErr, srq for kSrqLimitReached; the others null).
struct AsyncEvent {
  AsyncEventType type;
  Qp* qp = nullptr;
  Cq* cq = nullptr;
  Srq* srq = nullptr;
};

/// Called from inside poll (or from modify_qp, for kQpLastWqeReached) when
/// the device raises an asynchronous event; ev is valid for the call only.
/// The handler must not destroy the object the event names.
using AsyncEventFn = void (*)(const AsyncEvent& ev, void* arg);
/// Sets (or with nullptr clears) the handler of ctx's asynchronous events.
/// Without one, events are only counted (async_events). Control path.
void set_async_event_handler(Context* ctx, AsyncEventFn fn, void* arg);

/// Creates an SRQ, its limit armed with attr.srq_limit (0: not armed), as
/// rxe does. Control path. Errors: kInvalidArgument (null PD, max_wr or
/// max_sge out of range), kResourceExhausted (max_srq).
Result<Srq*> create_srq(Pd* pd, const SrqInitAttr& attr);
/// Arms srq's limit (IBA 10.2.9.3): once a WQE taken leaves fewer than
/// srq_limit in the SRQ, kSrqLimitReached fires and the limit goes back to 0.
/// 0 disarms. Control path. Errors: kInvalidArgument (null srq, srq_limit
/// above the WQEs the SRQ holds).
Status modify_srq(Srq* srq, uint32_t srq_limit);
/// The SRQ's sizes as allocated (max_wr, max_sge) and its armed limit
/// (srq_limit); srq_context as created. Errors: kInvalidArgument.
Status query_srq(Srq* srq, SrqInitAttr* attr);
/// Errors: kBusy (a QP still uses it), kNotFound, kInvalidArgument.
Status destroy_srq(Srq* srq);
/// Posts receive WRs to an SRQ, as post_recv. Data path.
Status post_srq_recv(Srq* srq, RecvWr* wr, RecvWr** bad_wr);

/// Creates an address handle; attr is copied, and the GID table entry it sends
/// from is pinned (a later change of the table does not affect it). Control
/// path. Errors: kInvalidArgument (null PD, port_num, flow_label or
/// sgid_index out of range), kResourceExhausted (max_ah).
Result<Ah*> create_ah(Pd* pd, const AhAttr& attr);
/// Errors: kNotFound, kInvalidArgument.
Status destroy_ah(Ah* ah);

/// Creates a QP in RESET with its queues allocated (attr.cap, rounded up to
/// powers of two). Control path. Errors: kInvalidArgument (missing PD/CQs,
/// CQ or SRQ of another device, capabilities out of range, unknown type),
/// kResourceExhausted (max_qp). In an EngineGroup use EngineGroup::create_qp.
Result<Qp*> create_qp(Pd* pd, const QpInitAttr& attr);
/// Moves the QP through RESET, INIT, RTR, RTS, SQD, SQE, ERR with the attribute
/// checks of IBA 11.2.5.2 Table 91 (required and optional attributes per transition).
/// Only the attributes named in attr_mask (QpAttrMask) are read. Control path.
/// Errors: kInvalidArgument (a required attribute missing, one not allowed
/// for the transition, a value out of range), kInvalidQpState (transition not
/// allowed, cur_qp_state wrong). To ERR flushes every WQE with kWrFlushErr.
Status modify_qp(Qp* qp, const QpAttr& attr, uint32_t attr_mask);
/// Copies the current attributes and the creation attributes (either pointer
/// may be null). Errors: kInvalidArgument.
Status query_qp(Qp* qp, QpAttr* attr, QpInitAttr* init_attr);
/// Destroys a QP at once: outstanding WQEs are dropped without completions
/// (move it to ERR and drain its CQs first to get them flushed). Control path.
/// Errors: kNotFound, kInvalidArgument.
Status destroy_qp(Qp* qp);

/// Posts a chain of send work requests (data path). On failure *bad_wr points
/// at the first request not posted; earlier ones were posted. The frames go
/// out from the following poll() calls (in SQE and ERR they are accepted and
/// completed with kWrFlushErr). Errors: kInvalidQpState (RESET, INIT, RTR),
/// kResourceExhausted (send queue full: poll and retry),
/// kInvalidArgument (opcode not valid for the QP type, too many SGEs, inline
/// data too long, atomic without one 8-byte SGE, UD without an AH of the PD).
/// Errors found later (remote access, retries exhausted, ...) come back as
/// the WR's completion status.
Status post_send(Qp* qp, SendWr* wr, SendWr** bad_wr);
/// Posts a chain of receive work requests (data path), as post_send. Errors:
/// kInvalidQpState (RESET), kResourceExhausted (receive queue full),
/// kInvalidArgument (too many SGEs, the QP uses an SRQ).
Status post_recv(Qp* qp, RecvWr* wr, RecvWr** bad_wr);

}  // namespace uroce
