// The in-memory fabric: the loopback driver behind unit tests and `uroce sim`.
// Any number of ports (each a uroce::PacketIo) hang off one simulated Ethernet
// switch. Frames travel as rte_mbufs from tx_burst to rx_burst, never converted;
// duplicates and flood copies are rte_pktmbuf_copy'd.
//
// Path of a frame and where each effect happens:
//
//   host tx_burst ─► uplink (port rate, NIC queue: tx_burst refuses when full)
//     ─► propagation delay ─► switch ingress: link-down check, frame hook,
//        pcap capture, lookup by destination MAC (broadcast/multicast floods)
//     ─► egress queue toward the destination (finite buffer: tail drop;
//        RED/ECN marking point) ─► downlink serialization (port rate)
//     ─► faults on the wire: loss, corruption, duplication, reordering, jitter
//     ─► propagation delay ─► RX ring of the destination (full: dropped)
//
// Queues are modelled as fluid FIFOs: a link remembers when it finishes sending
// what it has accepted (busy_until); its backlog at time t is the bytes still
// to serialize, (busy_until - t) * rate. That is exact for FIFO service and
// gives the occupancy RED needs (Kmin/Kmax/Pmax on the instantaneous queue,
// as DCQCN switches configure it) without storing the queue.
//
// Time is injected (STYLE 16): nothing reads a clock. advance(now_ns) delivers
// every frame due by now_ns; tx_burst stamps frames with the time of the latest
// advance(). next_event_ns() says when the next thing happens, so a simulation
// can jump time instead of ticking. A simulation step is therefore
//   fabric.advance(now); poll every device at now; now = min(next_event_ns(), ...).
//
// Faults are drawn from per-port xoshiro256** streams derived from one 64-bit
// seed, seven draws per frame copy whatever is enabled, so a seed reproduces the
// same fault sequence and enabling one kind of fault does not move another.
// Faults configured on a port apply to frames the switch forwards *to* it.
//
// Two tiers (FabricConfig::topology with leaves > 0): every port hangs off a
// leaf switch (PortConfig::leaf); each leaf is joined to every one of S spine
// switches by one cable, and the cable from a leaf to spine s is that leaf's
// path s. A frame between hosts of one leaf takes the single-switch path
// above. A frame to another leaf leaves its leaf on the uplink ECMP picks
// from a hash of the UDP 5-tuple (source and destination IP, protocol, UDP
// ports; a frame without UDP hashes its MACs): the same flow always takes
// the same spine, and a QP's UDP source port picks its path. Then
//   leaf ─► uplink toward spine s (egress buffer: tail drop; serialization at
//     the path's rate; random loss; a blackholed path drops everything)
//     ─► propagation ─► spine s ─► downlink toward the destination leaf (the
//     same on that leaf's path s) ─► propagation ─► destination leaf ─► egress
//     queue toward the host, with the port's faults, as on one switch.
// Each path has its own rate, delay, buffer and loss (set_path) and can be
// blackholed at a virtual time (schedule_blackhole); per-path, per-direction
// counters count what each cable carried and dropped. Broadcast and multicast
// frames are flooded to every host as on one switch (they are control
// traffic: ARP, neighbour discovery), and PFC acts only inside a leaf.
// Loss on a path draws from the path's own stream, so the ports' fault
// sequences are those of a single-switch fabric with the same seed.
//
// Construction: Fabric::create(cfg), then add_port(mac, port_cfg) per device
// (each port gets its own tx mempool, from pool_shelf.h). Single-threaded:
// one thread drives the fabric and every device attached to it. Ports live as
// long as the fabric; destroy every device (which may hold mbufs) before the
// fabric, whose destructor gives the mempools back.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <uroce/addr.h>
#include <uroce/packet_io.h>
#include <uroce/status.h>

#include "stack/common/rng.h"
#include "stack/wire/pcap.h"

namespace uroce::loopback {

// Per-port counters. tx_* and drop_ingress_* count on the sending port, the
// rest on the port the frame was forwarded to.
#define UROCE_LOOPBACK_COUNTERS(X)                                                       \
  X(tx_frames)             /* accepted by tx_burst */                                    \
  X(tx_bytes)                                                                            \
  X(tx_queue_full)         /* refused by tx_burst: NIC transmit queue full */            \
  X(tx_oversize)           /* refused by tx_burst: longer than the MTU allows */         \
  X(rx_frames)             /* placed into the RX ring */                                 \
  X(rx_bytes)                                                                            \
  X(drop_link_down)        /* sent on, or forwarded to, a port whose link is down */     \
  X(drop_hook)             /* the frame hook said drop (counted on the sender) */        \
  X(drop_unknown_dst)      /* unicast to a MAC no port has (counted on the sender) */    \
  X(drop_buffer)           /* egress tail drop: switch buffer toward this port full */   \
  X(drop_rx_ring_full)     /* RX ring full when the frame arrived */                     \
  X(drop_no_mbuf)          /* no mbuf for a flood copy or duplicate */                   \
  X(fault_loss)                                                                          \
  X(fault_corrupt)                                                                       \
  X(fault_duplicate)                                                                     \
  X(fault_reorder)                                                                       \
  X(fault_jitter)          /* frames given a nonzero jitter delay */                     \
  X(ecn_marked)            /* CE set by RED at the egress queue */                     \
  X(pfc_pause_rx)          /* PFC pauses this host's NIC obeyed (counted on the paused port) */

enum class PortCounter : uint8_t {
#define UROCE_LB_ENUM(name) name,
  UROCE_LOOPBACK_COUNTERS(UROCE_LB_ENUM)
#undef UROCE_LB_ENUM
      kCount
};

inline constexpr std::array<std::string_view, size_t(PortCounter::kCount)> kPortCounterNames = {
#define UROCE_LB_NAME(name) #name,
    UROCE_LOOPBACK_COUNTERS(UROCE_LB_NAME)
#undef UROCE_LB_NAME
};

/// A set of counters named by an X-macro enum E (with E::kCount).
template <class E>
struct CounterSet {
  std::array<uint64_t, size_t(E::kCount)> v{};
  void inc(E c, uint64_t n = 1) { v[size_t(c)] += n; }
  uint64_t get(E c) const { return v[size_t(c)]; }
  CounterSet& operator+=(const CounterSet& o) {
    for (size_t i = 0; i < v.size(); ++i) v[i] += o.v[i];
    return *this;
  }
};

using PortCounters = CounterSet<PortCounter>;

/// RED marking at a switch egress queue (DCQCN's Kmin/Kmax/Pmax): with the
/// backlog b in bytes when a frame is enqueued, mark CE with probability 0 for
/// b <= kmin, pmax * (b - kmin) / (kmax - kmin) below kmax, 1 from kmax on.
/// Only ECN-capable frames (ECN field 01 or 10) are marked; the IPv4 header
/// checksum is updated (the ICRC masks the TOS/traffic class, A17.3.3).
struct RedConfig {
  bool enabled = false;
  uint32_t kmin_bytes = 40 * 1024;
  uint32_t kmax_bytes = 200 * 1024;
  double pmax = 0.01;
};

/// Priority flow control (IEEE 802.1Qbb), simplified to one class and an
/// egress trigger: when a frame queued toward this port leaves the backlog
/// above xoff_bytes, the switch pauses the port the frame came from. The pause
/// reaches that host one propagation delay later and lasts until the queue
/// would have drained to xon_bytes, plus the propagation delay of the resume;
/// later frames above xoff extend it. A paused NIC starts no frame (tx_burst
/// refuses what its queue cannot hold); frames already started keep going,
/// so the headroom a switch needs is what the hosts' NIC queues and links hold.
struct PfcConfig {
  bool enabled = false;
  uint32_t xoff_bytes = 2 << 20;
  uint32_t xon_bytes = 1 << 20;
};

/// The cable between a port and the switch, both directions alike.
struct LinkConfig {
  uint64_t rate_bps = 100'000'000'000;  ///< serialization rate, bits/s (> 0)
  uint64_t prop_delay_ns = 500;         ///< one way, host <-> switch
  uint32_t buffer_bytes = 512 * 1024;   ///< switch egress buffer toward this port
  uint32_t tx_queue_bytes = 256 * 1024; ///< host NIC transmit queue; tx_burst refuses beyond it
  uint16_t overhead_bytes = 24;         ///< per frame on the wire: preamble+SFD 8, FCS 4, IFG 12
  RedConfig red;
  PfcConfig pfc;                        ///< PFC at the switch egress queue toward this port
};

/// Serialization time of a frame of len bytes (Ethernet padding to 60 and the
/// per-frame overhead included), rounded up to whole nanoseconds.
uint64_t serialization_ns(uint64_t rate_bps, uint16_t overhead_bytes, uint32_t len);
inline uint64_t serialization_ns(const LinkConfig& link, uint32_t len) {
  return serialization_ns(link.rate_bps, link.overhead_bytes, len);
}

enum class CorruptScope : uint8_t {
  /// Flip a bit some receive check must catch: IP header (v4 checksum), UDP
  /// ports and length, and everything the ICRC covers. Bits no check covers
  /// (Ethernet header and padding, UDP checksum, BTH FECN/BECN byte, IPv6
  /// traffic class, flow label and hop limit) are never chosen.
  kDetectable,
  /// Flip any bit of the frame (may produce frames that still parse).
  kAnyBit,
};

/// Faults on frames forwarded to a port. Probabilities are per frame copy.
struct FaultConfig {
  double loss = 0;
  double duplicate = 0;          ///< a second copy follows the frame on the link
  double corrupt = 0;            ///< flip one random bit (duplicates stay clean)
  double reorder = 0;            ///< hold the frame back by 1..reorder_delay_ns
  uint64_t reorder_delay_ns = 20'000;
  uint64_t jitter_ns = 0;        ///< extra delay uniform in [0, jitter_ns]; keeps FIFO order
  CorruptScope corrupt_scope = CorruptScope::kDetectable;
};

struct PortConfig {
  LinkConfig link;
  FaultConfig faults;
  uint32_t leaf = 0;             ///< two tiers: the leaf switch the port hangs off (< topology.leaves)
  uint16_t mtu = 4200;           ///< IP datagram bytes: a 4096 path MTU over IPv6 with any headers
  uint32_t rx_ring_size = 1024;  ///< power of two
  uint32_t pool_size = 4096;     ///< mbufs in this port's tx_pool()
};

/// One leaf <-> spine cable of a two-tier fabric (a path), both directions alike.
struct PathConfig {
  uint64_t rate_bps = 100'000'000'000;  ///< serialization rate, bits/s (> 0)
  uint64_t prop_delay_ns = 1000;        ///< one way, leaf <-> spine
  uint32_t buffer_bytes = 1024 * 1024;  ///< egress buffer at either end (leaf uplink, spine downlink)
  uint16_t overhead_bytes = 24;         ///< per frame on the wire, as LinkConfig's
  double loss = 0;                      ///< probability a frame is lost, per direction crossed
};

/// Leaf/spine (two tiers, see the file comment); leaves == 0 is one switch.
struct Topology {
  uint32_t leaves = 0;  ///< 0: every port on one switch (the default); else leaf switches
  uint32_t spines = 1;  ///< with leaves > 0: spine switches (paths between two leaves), 1 .. 256
  PathConfig path;      ///< every path, until set_path changes one
};

/// Per-path counters, per direction (up: leaf -> spine, down: spine -> leaf).
#define UROCE_LOOPBACK_PATH_COUNTERS(X)                                      \
  X(frames)          /* put on the cable */                                 \
  X(bytes)                                                                  \
  X(drop_buffer)     /* tail drop: the egress buffer toward the cable full */ \
  X(drop_loss)       /* random loss (PathConfig::loss) */                   \
  X(drop_blackhole)  /* sent on, or on the cable when it became, a blackhole */

enum class PathCounter : uint8_t {
#define UROCE_LB_ENUM(name) name,
  UROCE_LOOPBACK_PATH_COUNTERS(UROCE_LB_ENUM)
#undef UROCE_LB_ENUM
      kCount
};

inline constexpr std::array<std::string_view, size_t(PathCounter::kCount)> kPathCounterNames = {
#define UROCE_LB_NAME(name) #name,
    UROCE_LOOPBACK_PATH_COUNTERS(UROCE_LB_NAME)
#undef UROCE_LB_NAME
};

using PathCounters = CounterSet<PathCounter>;

enum class PathDir : uint8_t { kUp, kDown };

struct FabricConfig {
  uint64_t seed = 1;
  Topology topology;
  std::string pcap_path;         ///< non-empty: capture every frame at switch ingress
  uint32_t copy_pool_size = 2048;  ///< mbufs for duplicates and flood copies
};

enum class HookVerdict : uint8_t { kPass, kDrop };

/// What a frame hook learns besides the frame.
struct FrameEvent {
  uint64_t time_ns;   ///< virtual time the frame reached the switch
  uint64_t index;     ///< frames seen by the switch before this one
  uint32_t src_port;
};

/// Called once per frame at switch ingress, before forwarding and faults (a
/// plain function pointer: one indirect call per frame, no std::function). The
/// hook may read or modify the frame in place but keeps no reference to it.
using FrameHook = HookVerdict (*)(void* user, const FrameEvent& ev, rte_mbuf* m);

class Fabric;

/// One port of the fabric: a PacketIo with its own tx pool and RX ring.
class Port final : public PacketIo {
 public:
  /// Takes up to n frames from the RX ring (FIFO); the caller owns them.
  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override;
  /// Accepts frames in order until the NIC transmit queue is full or a frame
  /// is oversize (it then stays with the caller). Accepted frames are stamped
  /// with the fabric's current time.
  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override;
  rte_mempool* tx_pool() override { return pool_; }
  IoCaps caps() const override { return IoCaps{.mtu = cfg_.mtu, .rx_icrc_checked = false}; }
  MacAddr mac() const override { return mac_; }

  uint32_t index() const { return index_; }
  const PortConfig& config() const { return cfg_; }
  const PortCounters& counters() const { return counters_; }
  bool link_up() const { return up_; }
  /// Frames waiting in the RX ring.
  uint32_t rx_pending() const { return rx_tail_ - rx_head_; }

 private:
  friend class Fabric;
  Port(Fabric* fabric, uint32_t index, MacAddr mac, const PortConfig& cfg);

  Fabric* fabric_;
  uint32_t index_;
  MacAddr mac_;
  PortConfig cfg_;
  rte_mempool* pool_ = nullptr;
  Rng rng_;
  uint32_t leaf_ = 0;
  bool up_ = true;
  uint64_t up_busy_until_ns_ = 0;    // uplink, host -> switch
  uint64_t down_busy_until_ns_ = 0;  // downlink, switch -> host (egress queue)
  uint64_t pause_from_ns_ = 0;       // PFC: this host's NIC starts nothing in [from, until)
  uint64_t pause_until_ns_ = 0;
  uint64_t down_fifo_arrival_ns_ = 0;  // latest in-order arrival, for jitter
  std::vector<rte_mbuf*> rx_ring_;
  uint32_t rx_head_ = 0;
  uint32_t rx_tail_ = 0;
  PortCounters counters_;
};

class Fabric {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;

  /// Creates an empty fabric (EAL must be initialised). Fails if the pcap
  /// file cannot be created or the copy pool cannot be allocated.
  static Result<std::unique_ptr<Fabric>> create(const FabricConfig& cfg = {});
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;
  ~Fabric();

  /// Closes the capture (if any): kDataLoss if it could not all be written.
  Status close_capture() { return pcap_.close(); }

  /// Adds a port with the given MAC (unique, unicast). The port lives as long as
  /// the fabric. Fails with kInvalidArgument on a duplicate or multicast MAC,
  /// kResourceExhausted if its mempool cannot be created.
  Result<Port*> add_port(MacAddr mac, const PortConfig& cfg = {});
  Port& port(uint32_t i) { return *ports_[i]; }
  uint32_t num_ports() const { return uint32_t(ports_.size()); }

  /// Moves virtual time to now_ns, handling every event due by then in time
  /// order (ties in the order they were scheduled). Time never goes back:
  /// a now_ns before now_ns() only handles nothing.
  void advance(uint64_t now_ns);
  uint64_t now_ns() const { return now_ns_; }
  /// Time of the next pending event (a delivery, a frame reaching the switch,
  /// a link change), or kNever when the fabric is idle.
  uint64_t next_event_ns() const { return events_.empty() ? kNever : events_.front().time_ns; }
  /// Frames inside the fabric: on links or in queues (not in RX rings).
  size_t frames_in_flight() const { return in_flight_; }

  /// Sets a port's link state now / at a later virtual time.
  void set_link(uint32_t port, bool up);
  void schedule_link(uint32_t port, uint64_t at_ns, bool up);
  /// Replaces the fault configuration of frames forwarded to a port.
  void set_faults(uint32_t port, const FaultConfig& faults);
  /// Installs (or with nullptr removes) the frame hook.
  void set_hook(FrameHook hook, void* user) {
    hook_ = hook;
    hook_user_ = user;
  }

  /// Bytes waiting in the switch's egress queue toward port i at now_ns():
  /// the backlog tail drop and RED see (what is still to be serialized).
  uint64_t queue_bytes(uint32_t i) const;

  /// Two tiers: replaces the configuration of path `spine` of `leaf` (both
  /// directions). Frames already on it keep their timing.
  void set_path(uint32_t leaf, uint32_t spine, const PathConfig& cfg);
  /// Two tiers: makes path `spine` of `leaf` a blackhole (on) or a working
  /// cable again (off) at virtual time at_ns (now if earlier). A blackhole
  /// drops every frame sent on it and every frame on it when it fails.
  void schedule_blackhole(uint32_t leaf, uint32_t spine, uint64_t at_ns, bool on);
  /// Two tiers: what path `spine` of `leaf` carried in one direction.
  const PathCounters& path_counters(uint32_t leaf, uint32_t spine, PathDir dir) const;
  /// Two tiers: the spine ECMP sends frame m along when it leaves its leaf
  /// (the hash of its 5-tuple; 0 on one switch). Reads m, keeps nothing.
  uint32_t ecmp_spine(const rte_mbuf* m) const;
  uint32_t leaves() const { return cfg_.topology.leaves; }
  uint32_t spines() const { return cfg_.topology.leaves == 0 ? 0 : cfg_.topology.spines; }

  /// Frames the switch has seen (= captured when capturing).
  uint64_t frames_seen() const { return frames_seen_; }
  /// Counters summed over all ports.
  PortCounters totals() const;

 private:
  friend class Port;
  enum class EventKind : uint8_t {
    kAtSwitch,       // port: the sender; at its (leaf) switch
    kDeliver,        // port: the receiver
    kLinkUp,
    kLinkDown,
    kAtSpine,        // port: the receiver; path: the sender's leaf's path it came up
    kAtLeaf,         // port: the receiver; path: the receiver's leaf's path it came down
    kBlackholeOn,    // path
    kBlackholeOff,   // path
  };
  struct Event {
    uint64_t time_ns;
    uint64_t seq;
    rte_mbuf* m;
    uint32_t port;
    uint32_t path;
    EventKind kind;
  };
  // One direction of a path: its egress queue (fluid, as a port's) and counters.
  struct PathLane {
    uint64_t busy_until_ns = 0;
    PathCounters counters;
  };
  struct Path {
    PathConfig cfg;
    Rng rng;
    bool blackhole = false;
    PathLane up, down;
  };

  explicit Fabric(const FabricConfig& cfg);
  void push(uint64_t time_ns, EventKind kind, uint32_t port, rte_mbuf* m, uint32_t path = 0);
  uint32_t path_index(uint32_t leaf, uint32_t spine) const;
  /// Two tiers: queues m (for port dst) on one lane of path p at t; on
  /// arrival at its far end the event `then` fires. Frees m if dropped.
  void send_on_path(uint32_t p, PathDir dir, rte_mbuf* m, uint64_t t, uint32_t dst, EventKind then);
  void handle(const Event& ev);
  void at_switch(uint32_t src, rte_mbuf* m, uint64_t t);
  void egress(Port& dst, rte_mbuf* m, uint64_t t);
  /// PFC: after a frame from src was queued toward dst at t, pause src if
  /// dst's backlog is above its xoff.
  void pfc_check(Port& dst, Port& src, uint64_t t);
  /// Queues m on dst's downlink at time t (tail drop, RED); returns the time
  /// its last bit leaves the switch, or 0 if it was dropped (and freed).
  uint64_t enqueue_downlink(Port& dst, rte_mbuf* m, uint64_t t);
  void deliver(Port& dst, rte_mbuf* m);
  void capture(const rte_mbuf* m, uint64_t t);

  FabricConfig cfg_;
  uint32_t id_;
  std::vector<std::unique_ptr<Port>> ports_;
  std::vector<Path> paths_;    // two tiers: leaf * spines + spine
  std::vector<Event> events_;  // min-heap on (time_ns, seq)
  uint64_t seq_ = 0;
  uint64_t now_ns_ = 0;
  size_t in_flight_ = 0;
  uint64_t frames_seen_ = 0;
  rte_mempool* copy_pool_ = nullptr;
  FrameHook hook_ = nullptr;
  void* hook_user_ = nullptr;
  wire::PcapWriter pcap_;
  std::vector<uint8_t> scratch_;  // linearised multi-segment frames for capture
};

}  // namespace uroce::loopback
