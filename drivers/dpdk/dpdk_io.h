// drivers/dpdk: uroce::PacketIo over any rte_ethdev port (control path).
//
// A DpdkPort opens one ethdev port from an EAL device spec (a --vdev string
// such as "net_memif0,role=server,socket=/tmp/x.sock", "net_af_packet0,iface=veth0",
// "net_tap0,iface=tap0", "net_ring0", or a PCI address for mlx5/ice/i40e),
// configures n RX/TX queue pairs (RSS across them where the PMD offers it), one
// mbuf pool per queue pair, the MTU, the MAC address and promiscuous mode, waits
// for the link, and hands out one PacketIo per queue pair: each engine lcore
// owns one queue and polls it without locks (DESIGN.md, shared-nothing engines).
// The bursts themselves live in dpdk_io_datapath.cc (STYLE rule 7).
//
// What the software PMDs of DPDK 22.11 allow (read from their dev_info/ops and
// checked by tests/dpdk):
//   PMD        max MTU  set MAC        promiscuous           queues / RSS
//   memif      2030**   no (mac= arg)  always on (p2p ring)  up to 255 pairs, peer's txq i -> our rxq i, no RSS
//   af_packet  1500     yes (kernel)   off ok (veth delivers  qpairs=N devarg, kernel PACKET_FANOUT hash, no RSS conf
//                                      all frames anyway)
//   tap        1504     yes (kernel)   off ok                up to 16, RSS via eBPF
//   ring       any*     no             always on             loopback rings, no RSS
//   null       any*     yes            always on             RSS (reta emulated)
//   (* clipped to what one kFrameRoomBytes mbuf holds: single-segment frames.
//    ** memif says 1500 to ethdev; what it carries is one ring slot, bsize
//    devarg (default 2048) - 18, at most 4334 with bsize=4352: see dpdk_io.cc.)
// None of them checks the RoCE ICRC, so IoCaps::rx_icrc_checked is always false.
// All of them take chained mbufs on TX (RTE_ETH_TX_OFFLOAD_MULTI_SEGS) and copy
// or hand over the bytes by virtual address, external buffers included, so
// they get IoCaps::tx_multiseg (zero-copy transmit from registered memory).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include <uroce/addr.h>
#include <uroce/packet_io.h>
#include <uroce/status.h>

namespace uroce::dpdk {

/// Most frames one rx_burst/tx_burst of the tools handles; the API takes any n.
inline constexpr uint16_t kBurstSize = 32;

struct DpdkPortConfig {
  /// EAL device spec (see the file comment), or the name of a port EAL already
  /// probed from --vdev/-a arguments, or a decimal port id.
  std::string device;
  uint16_t n_queues = 1;        ///< RX/TX queue pairs, one per engine lcore
  uint16_t rx_desc = 1024;      ///< RX ring descriptors per queue (adjusted to the PMD's limits)
  uint16_t tx_desc = 1024;      ///< TX ring descriptors per queue
  unsigned extra_mbufs = 2048;  ///< per queue pool: frames the stack may hold beyond the rings
  uint16_t mtu = kRoceJumboMtu; ///< wanted MTU; clipped to what the port and one mbuf allow
  std::optional<MacAddr> mac;   ///< set this MAC if the PMD allows it, else keep the port's
  bool promiscuous = false;     ///< off unless asked (memif/ring/null are inherently on)
  uint32_t link_timeout_ms = 5000;  ///< wait this long for link up in open(); 0: do not wait
  std::string pcap_path;        ///< non-empty: capture every frame from the start (see start_capture)
};

/// What open() found and applied.
struct PortInfo {
  uint16_t port_id = 0;
  std::string name;        ///< ethdev name, e.g. "net_memif0" or "0000:03:00.0"
  std::string driver;      ///< PMD name, e.g. "net_memif"
  uint16_t n_queues = 0;
  uint16_t mtu = 0;        ///< MTU in effect
  uint16_t max_mtu = 0;    ///< largest MTU the port and one mbuf allow
  MacAddr mac;             ///< the port's MAC in effect
  bool mac_applied = false;  ///< DpdkPortConfig::mac was set on the port
  bool rss = false;        ///< RX is spread across the queues by RSS
  bool promiscuous = false;
  /// TX takes chained mbufs with external-buffer segments (IoCaps::tx_multiseg):
  /// the PMD offers RTE_ETH_TX_OFFLOAD_MULTI_SEGS and is a software port that
  /// reads frames by virtual address (vdev: memif, af_packet, tap, ring, null,
  /// af_xdp). A NIC would DMA from registered memory that reg_mr has not
  /// mapped for it (rte_extmem_register + rte_dev_dma_map), so it gets copies.
  bool tx_multiseg = false;
  bool probed_here = false;  ///< open() probed the device, close() removes it
};

struct LinkState {
  bool up = false;
  uint32_t speed_mbps = 0;
  bool full_duplex = false;
};


struct XStat {
  std::string name;
  uint64_t value = 0;
};

struct Capture;  // pcap capture state of one queue (dpdk_io_datapath.cc)

/// One RX/TX queue pair of a port: the PacketIo an engine lcore polls. Exactly
/// one thread may call rx_burst/tx_burst of a queue at a time.
class DpdkQueue final : public PacketIo {
 public:
  DpdkQueue(uint16_t port_id, uint16_t queue_id, rte_mempool* pool, IoCaps caps, MacAddr mac)
      : port_id_(port_id), queue_id_(queue_id), pool_(pool), caps_(caps), mac_(mac) {}
  ~DpdkQueue() override;
  DpdkQueue(const DpdkQueue&) = delete;
  DpdkQueue& operator=(const DpdkQueue&) = delete;

  /// rte_eth_rx_burst on this queue; the caller owns out[0..ret).
  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override;
  /// rte_eth_tx_burst on this queue; in[0..ret) belong to the port afterwards,
  /// in[ret..n) stay with the caller (ring full: retry or free them).
  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override;
  /// This queue's pool (also the RX pool): single-segment kFrameRoomBytes mbufs.
  rte_mempool* tx_pool() override { return pool_; }
  IoCaps caps() const override { return caps_; }
  MacAddr mac() const override { return mac_; }
  uint16_t queue_id() const { return queue_id_; }

  /// Starts writing every frame received and sent on this queue to path
  /// (nanosecond pcap, TSC-derived stamps). Control path; safe while another
  /// thread polls the queue.
  Status start_capture(const std::string& path);
  /// Stops and closes the capture; waits for a burst in progress to finish.
  /// kDataLoss if the capture could not all be written (a full disk).
  Status stop_capture();
  bool capturing() const { return capture_.load(std::memory_order_relaxed) != nullptr; }

 private:
  uint16_t rx_burst_captured(rte_mbuf** out, uint16_t n);
  uint16_t tx_burst_captured(rte_mbuf** in, uint16_t n);
  Capture* enter_capture();
  void leave_capture() { in_capture_.store(false, std::memory_order_release); }

  uint16_t port_id_;
  uint16_t queue_id_;
  rte_mempool* pool_;
  IoCaps caps_;
  MacAddr mac_;
  // The capture switch: one acquire load per burst when off, no per-packet test.
  std::atomic<Capture*> capture_{nullptr};
  std::atomic<bool> in_capture_{false};
};

/// An open, started ethdev port. Destroying it stops and closes the port; all
/// mbufs taken from its pools must have been freed by then.
class DpdkPort {
 public:
  /// Opens, configures and starts the port described by cfg. EAL must be up
  /// (uroce::init_eal or init_eal_from_args). Errors: kInvalidArgument (bad
  /// spec, more queues than the port has), kNotFound (no such device),
  /// kUnavailable (probe/configure/start failed, link down after the timeout),
  /// kResourceExhausted (mbuf pool). Messages carry rte_strerror text.
  static Result<std::unique_ptr<DpdkPort>> open(const DpdkPortConfig& cfg);
  ~DpdkPort();
  DpdkPort(const DpdkPort&) = delete;
  DpdkPort& operator=(const DpdkPort&) = delete;

  const PortInfo& info() const { return info_; }
  uint16_t n_queues() const { return uint16_t(queues_.size()); }
  /// Queue pair q < n_queues(); valid until the port is closed.
  DpdkQueue& queue(uint16_t q) { return *queues_[q]; }

  LinkState link() const;
  /// Polls the link every 10 ms until it is up; kUnavailable after timeout_ms.
  Status wait_link(uint32_t timeout_ms) const;
  /// drivers::IoPort::warm_up: once the link is up, faults a memif port's
  /// shared regions in (populate_memif_regions in dpdk_io.cc), once.
  void warm_up();

  /// rte_eth_stats, port-wide. rx_missed is the PMD's imissed, which not
  /// every PMD counts: DPDK 22.11's net_af_packet reads no PACKET_STATISTICS,
  /// so a full socket ring there drops frames with it at 0 (size the ring
  /// with its framecnt devarg; tests/dpdk_e2e/e2e.py garbage_main).
  Result<PortStats> stats() const;
  /// Every extended statistic the PMD reports, in its order.
  Result<std::vector<XStat>> xstats() const;
  Status reset_stats();

  /// Captures all queues: queue 0 to path, queue q > 0 to "<stem>-q<q><ext>".
  Status start_capture(const std::string& path);
  /// Stops every queue's capture; the first queue's error if one could not
  /// all be written.
  Status stop_capture();

  /// Stops and closes the port (and removes the device if open() probed it),
  /// keeping its queues and pools: bursts then move nothing (ethdev's
  /// stand-ins for a stopped port take and give no frame) and the pools'
  /// mbufs stay valid, for threads that may still hold or take them (a
  /// program's threads at exit, docs/VERBS.md). Idempotent. In a process
  /// forked from the opener it only lets go of the port: the port, its
  /// queues and pools are in EAL memory the two share, and stay the
  /// opener's to close.
  void shut_down();
  /// shut_down, and frees the queues and pools: every mbuf taken from them
  /// must have been freed. Idempotent.
  void close();

 private:
  DpdkPort() = default;
  Status setup(const DpdkPortConfig& cfg);

  PortInfo info_;
  bool configured_ = false;
  bool started_ = false;
  bool warm_ = false;       // warm_up() has run with the link up
  void* device_ = nullptr;  // rte_device*, for rte_dev_remove
  pid_t opener_ = 0;        // the process that opened it, the only one that closes it
  std::vector<rte_mempool*> pools_;
  std::vector<std::unique_ptr<DpdkQueue>> queues_;
};

/// File name of queue q's capture for a port captured to path.
std::string capture_path_for_queue(const std::string& path, uint16_t q);

}  // namespace uroce::dpdk
