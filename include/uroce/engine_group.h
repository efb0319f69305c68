// Multi-core engines (DESIGN "Shared-nothing engines"): N engine lcores per
// port, each owning one RX/TX queue pair, and the channels that let
// application threads on other cores use them.
//
// Decision: one Context per engine lcore, grouped by an EngineGroup. The
// Context already is exactly one engine (its QP, CQ, SRQ and AH tables, timer
// wheel, transmit schedule, counters and NetStack) and its data path never
// touches another engine's memory, so N of them, one per queue pair, are
// shared-nothing by construction and the transport needs no change: no lock
// or atomic is added to the single-core path, and run-to-completion (poll() on
// the application's own lcore, a group of one) works as before. The rejected
// alternative, one Device object owning N per-lcore engines with one shared
// MR/PD table, would have made every verbs object carry an engine index and
// the transport consult a shared table; what is shared instead is
// replicated on the control path:
//   - QPNs are device-wide: engine e of n numbers its QP slot s
//     kFirstQpn + s * n + e (Context::qpn_of_slot), so consecutive QPNs
//     alternate engines and the owner of a QPN is (qpn - kFirstQpn) % n.
//   - Memory regions: reg_mr_all() registers a buffer on every engine; all
//     engines draw keys from the same seed in the same order, so the region
//     has one L_Key/R_Key wherever the QP that uses it lives (checked).
//   - PDs and CQs are per engine: a QP's PD and CQs belong to its engine.
//
// Receive steering. A frame must be processed by the engine that owns its BTH
// DestQP. Each engine's port queue is wrapped so that after rx_burst it peeks
// at the DestQP of every frame (Ethernet/VLAN, IPv4/IPv6 + UDP 4791 or RoCEv1
// GRH, then BTH; nothing else is parsed) and hands a frame owned by engine k
// to k through the single-producer/single-consumer ring (this engine -> k),
// one of n*(n-1) Boost.Lockfree spsc_queues; k takes those frames ahead of
// its own queue's in its next poll. Frames that are not RoCE (ARP, ND, ICMP)
// stay with the engine that received them. No lock, syscall or allocation
// per frame; a full ring drops the frame (counted; RC retransmits it).
//   - memif (no RSS): the peer's TX queue i arrives on our RX queue i, so a
//     QP pair whose two ends sit on the same engine index needs no hop, and
//     any other pairing is fixed up by steering by QPN.
//   - RSS ports: the hash runs over IP addresses and UDP ports; RoCEv2 puts
//     the flow's entropy in the UDP source port, which the transport derives
//     from both QPNs (rdma_calc_flow_label folded to 0xC000..0xFFFF, the same
//     at both ends). Distinct QP pairs thus spread over queues the way a
//     hardware RNIC spreads them, but neither side can choose the queue the
//     other side's hash picks (Toeplitz with the default key is not
//     symmetric and the peer's engine layout is not known), so RSS only
//     spreads load and steering by QPN guarantees delivery to the owner.
//
// Application threads (not engine lcores) use an EngineChannel per (thread,
// engine): post_send/post_recv enqueue the work request on a spsc ring the
// engine drains at the start of its poll, and the engine moves completions of
// the channel's CQs onto a second ring the thread reaps with poll_cq. The
// verbs objects themselves stay single-threaded: only the engine touches them
// once the group runs.
//
// Threading: open(), create_qp(), reg_mr_all(), attach() are control path and
// run before the engines start (or while they are stopped). poll(e, ...) is
// called by engine e's lcore only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <boost/lockfree/spsc_queue.hpp>

#include <uroce/status.h>
#include <uroce/verbs.h>

struct rte_mbuf;

namespace uroce {

class EngineChannel;

namespace engine {
class SteeringIo;
class FwdRings;
}

/// What one engine did. Written by its lcore only; read them once the
/// engines have stopped (EngineLauncher::stop), or as rough figures meanwhile.
struct EngineStats {
  uint64_t polls = 0;
  uint64_t work = 0;          ///< frames received and sent (poll()'s return values summed)
  uint64_t fwd_out = 0;       ///< frames this engine received for another engine and handed on
  uint64_t fwd_in = 0;        ///< frames other engines handed to this one
  uint64_t fwd_drop = 0;      ///< frames dropped because the ring to their owner was full
  uint64_t chan_posts = 0;    ///< work requests posted for application threads
  uint64_t chan_cqes = 0;     ///< completions moved to application threads
};

class EngineGroup {
 public:
  /// Frames in flight from one engine to another (per ordered pair).
  static constexpr size_t kFwdRingSize = 1024;

  /// One engine per queue: queues[e] is engine e's port queue (a
  /// DpdkQueue, or any PacketIo), which must outlive the group. cfg applies
  /// to every engine (max_qp, max_cq, ... are per engine); key_seed 0 takes
  /// one from the TSC, shared by all engines. Errors: kInvalidArgument (no
  /// queues, QPN space exceeded), or what open_device returns.
  static Result<std::unique_ptr<EngineGroup>> open(std::span<PacketIo* const> queues, const DeviceConfig& cfg);
  ~EngineGroup();
  EngineGroup(const EngineGroup&) = delete;
  EngineGroup& operator=(const EngineGroup&) = delete;

  uint32_t size() const { return uint32_t(engines_.size()); }
  /// Engine e's context: alloc_pd/create_cq/create_srq/create_ah on it as usual.
  Context* engine(uint32_t e) { return engines_[e].get(); }
  /// The engine that owns qpn (any QPN below kFirstQpn: engine 0).
  uint32_t engine_of(uint32_t qpn) const;

  /// create_qp on the engine pd belongs to (its CQs and SRQ must be that
  /// engine's too); the QPN is unique across the group.
  Result<Qp*> create_qp(Pd* pd, const QpInitAttr& attr);

  /// Registers [addr, addr+length) on every engine, pds[e] being engine e's
  /// PD; mrs_out[e] (size() entries) receives each engine's Mr. All of them
  /// carry the same lkey/rkey, which is returned. kInvalidArgument if the engines'
  /// key streams have diverged (MRs registered on single engines in between).
  Result<uint32_t> reg_mr_all(std::span<Pd* const> pds, void* addr, size_t length, uint32_t access,
                              std::span<Mr*> mrs_out);

  /// Serves ch from engine e (ch's CQs must be engine e's). Control path.
  void attach(uint32_t e, EngineChannel& ch);

  /// One step of engine e (its lcore only): the work requests its channels
  /// queued, then uroce::poll (frames forwarded by other engines first, then
  /// its own queue's; misdirected ones are handed on), then completions to
  /// its channels. Returns uroce::poll's count.
  uint32_t poll(uint32_t e, uint64_t now_ns);

  const EngineStats& stats(uint32_t e) const;

 private:
  EngineGroup() = default;
  struct PerEngine;
  std::unique_ptr<engine::FwdRings> rings_;
  std::vector<std::unique_ptr<PerEngine>> per_;
  std::vector<std::unique_ptr<engine::SteeringIo>> ios_;
  std::vector<ContextPtr> engines_;
};

/// A completion as an application thread reaps it: the CQ it came from and the Wc.
struct ChannelWc {
  Cq* cq;
  Wc wc;
};

/// The lock-free link between one application thread and one engine lcore
/// (two Boost.Lockfree spsc_queues). The application thread calls post_send,
/// post_recv and poll_cq; the engine's EngineGroup::poll does the rest.
/// Exactly one application thread may use a channel. About 300 KB: allocate
/// it on the heap.
class EngineChannel {
 public:
  static constexpr size_t kDepth = 1024;   ///< work requests and completions in flight each way
  static constexpr uint32_t kMaxSge = 4;   ///< SGEs one queued work request carries

  /// Control path: the CQs whose completions go to this channel (they must
  /// belong to the engine the channel is attached to).
  void watch_cq(Cq* cq) { cqs_.push_back(cq); }

  /// Queues one send WR (wr.next is ignored; wr.sg_list is copied, inline
  /// data is read when the engine posts it, so keep it until the completion).
  /// kResourceExhausted: the ring is full, try again; kInvalidArgument: more
  /// than kMaxSge SGEs. A WR the engine's post_send rejects comes back as a
  /// completion with status kLocQpOpErr and vendor_err = the StatusCode; a
  /// full send queue is retried by the engine (backpressure, in order).
  Status post_send(Qp* qp, const SendWr& wr);
  /// Queues one receive WR, as post_send.
  Status post_recv(Qp* qp, const RecvWr& wr);
  /// Reaps up to n completions of the watched CQs into out; returns how many.
  int poll_cq(ChannelWc* out, int n) { return int(done_.pop(out, size_t(n))); }

  // Engine side (EngineGroup::poll on the owning lcore).
  /// Posts queued work requests until the ring is empty or a send/receive
  /// queue is full. Returns the number posted.
  uint32_t engine_post();
  /// Moves completions from the watched CQs to the application's ring while it has room.
  uint32_t engine_complete();

 private:
  struct Cmd {
    Qp* qp;
    bool is_send;
    SendWr swr;
    RecvWr rwr;
    Sge sges[kMaxSge];
  };
  void reject(const Cmd& c, StatusCode code);  // needs room in done_

  boost::lockfree::spsc_queue<Cmd, boost::lockfree::capacity<kDepth>> cmds_;
  boost::lockfree::spsc_queue<ChannelWc, boost::lockfree::capacity<kDepth>> done_;
  std::vector<Cq*> cqs_;
};

}  // namespace uroce
