// drivers/dpdk control path: probe, configure, start, link, stats, capture
// switch, stop and close of an rte_ethdev port. Allocation, syscalls and locks
// are fine here; the bursts are in dpdk_io_datapath.cc.
#include "drivers/dpdk/dpdk_io.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <uroce/eal.h>

namespace uroce::dpdk {
namespace {

// rte_strerror of a negative or positive errno.
const char* err_text(int ret) { return rte_strerror(ret < 0 ? -ret : ret); }

MacAddr to_mac(const rte_ether_addr& a) {
  MacAddr m;
  std::copy(std::begin(a.addr_bytes), std::end(a.addr_bytes), m.b);
  return m;
}

std::string device_name_of(uint16_t port) {
  rte_eth_dev_info di{};
  if (rte_eth_dev_info_get(port, &di) != 0 || di.device == nullptr) return {};
  return rte_dev_name(di.device);
}

// Finds the first port whose rte_device is called dev_name.
std::optional<uint16_t> port_of_device(const std::string& dev_name) {
  uint16_t p = 0;
  RTE_ETH_FOREACH_DEV(p) {
    if (device_name_of(p) == dev_name) return p;
  }
  return std::nullopt;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// net_af_packet (DPDK 22.11) moves frames through a kernel ring of framesz
// byte slots (devarg, default 2048): a slot holds a frame of up to framesz -
// 66 bytes (the kernel puts the MAC header at TPACKET_ALIGN(TPACKET2_HDRLEN +
// 16) - 14 = 66), and its RX queue setup wants mbufs of framesz - 32 bytes
// (TPACKET2_HDRLEN 52 less the sockaddr_ll 20). Its dev_info says
// max_rx_pktlen 1518 whatever the slots hold, so ethdev refuses any MTU above
// 1500; the MTU that counts is the kernel interface's (see open()).
constexpr uint32_t kAfPacketDefaultFrame = 2048;

// net_memif (DPDK 22.11, drivers/net/memif/rte_eth_memif.c) reports
// max_rx_pktlen RTE_ETHER_MAX_LEN (1518) in memif_dev_info, so ethdev refuses
// an MTU above 1500, but its bursts do not enforce it: eth_memif_rx copies a
// frame of any length into mbufs of the RX pool's data room. What bounds the
// frame is the ring slot, pkt_buffer_size bytes (bsize devarg, default
// ETH_MEMIF_DEFAULT_PKT_BUFFER_SIZE 2048): a larger frame is spread over
// several slots chained with MEMIF_DESC_FLAG_NEXT, and 22.11's eth_memif_tx
// never clears that flag on the first slot of a packet (`d0 =
// &ring->desc[slot & mask];` without `d0->flags = 0`), so once chained
// frames have used a slot, a later one-slot frame in it is glued to the
// frame after it on receive (seen here as multi-segment garbage at path MTU
// 4096 with bsize 2048). Fixed upstream by f7a52200d4 "net/memif: fix
// descriptor Tx flags corruption" (DPDK 26.03), not in 22.11.11. So a memif
// port offers the MTU whose frames fit one slot and one mbuf: bsize=4352 on
// both sides (the client's slots carry both directions) gives 4334, enough
// for path MTU 4096. The port keeps ethdev's 1500 (see open()).
constexpr uint32_t kMemifDefaultSlot = 2048;
constexpr uint32_t kAfPacketMacOff = 66;
constexpr uint32_t kAfPacketRxSlack = 32;

// The device's devargs ("" if none).
const char* devargs_text(const rte_device* dev) {
  const rte_devargs* da = dev ? rte_dev_devargs(dev) : nullptr;
  return da && da->args ? da->args : "";
}

// The numeric devarg key (e.g. "framesz=") of the port's device, or def if absent.
uint32_t devarg_uint(const rte_eth_dev_info& di, const char* key, uint32_t def) {
  const char* at = std::strstr(devargs_text(di.device), key);
  return at ? uint32_t(std::strtoul(at + std::strlen(key), nullptr, 10)) : def;
}

// The framesz devarg of an af_packet port (kAfPacketDefaultFrame if absent).
uint32_t af_packet_frame_size(const rte_eth_dev_info& di) {
  return devarg_uint(di, "framesz=", kAfPacketDefaultFrame);
}

// The kernel interface's MTU (SIOCGIFMTU), raised to mtu (SIOCSIFMTU, what the
// PMD's own mtu_set does) if it is lower; 0 if the interface cannot be read.
uint16_t kernel_mtu_at_least(uint32_t if_index, uint16_t mtu) {
  ifreq ifr{};
  if (if_index == 0 || if_indextoname(if_index, ifr.ifr_name) == nullptr) return 0;
  const int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) return 0;
  uint16_t now = 0;
  if (ioctl(s, SIOCGIFMTU, &ifr) == 0) {
    now = uint16_t(ifr.ifr_mtu);
    if (now < mtu) {
      ifr.ifr_mtu = mtu;
      if (ioctl(s, SIOCSIFMTU, &ifr) == 0) now = mtu;
    }
  }
  close(s);
  return now;
}

// Frame bytes one mbuf of the port's pools holds. kFrameRoomBytes, except on
// net_af_xdp: its RX buffers are the pool's objects registered as an XDP
// umem, and the kernel takes umem chunks of at most a page (XDP_UMEM_REG
// fails with EINVAL for larger chunks unless the memory is hugetlb-backed),
// so the whole mempool object must fit 4096 bytes (MTU ~3.7k, path MTU 2048).
// net_af_packet: large enough for its ring slots (above).
uint32_t frame_room_of(const std::string& driver, const rte_eth_dev_info& di) {
  if (driver == "net_af_packet") return std::max(kFrameRoomBytes, af_packet_frame_size(di) - kAfPacketRxSlack);
  if (driver != "net_af_xdp") return kFrameRoomBytes;
  uint32_t room = kFrameRoomBytes;
  while (room > 1024 && rte_mempool_calc_obj_size(uint32_t(sizeof(rte_mbuf)) + RTE_PKTMBUF_HEADROOM + room, 0,
                                                  nullptr) > 4096) {
    room -= 64;
  }
  return room;
}

// Largest MTU the port accepts (ethdev's own rule: max_mtu and max_rx_pktlen
// minus the L2 overhead) that still fits one mbuf of room bytes with a VLAN tag.
uint16_t max_mtu_of(const rte_eth_dev_info& di, uint32_t room) {
  uint32_t overhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  if (di.max_mtu != UINT16_MAX && di.max_rx_pktlen > di.max_mtu) overhead = di.max_rx_pktlen - di.max_mtu;
  uint32_t m = di.max_mtu;
  if (di.max_rx_pktlen > overhead) m = std::min<uint32_t>(m, di.max_rx_pktlen - overhead);
  m = std::min<uint32_t>(m, room - RTE_ETHER_HDR_LEN - RTE_VLAN_HLEN);
  return uint16_t(m);
}

// net_memif maps its shared rings and packet buffers (memfd regions named
// memif_region_N, about 4 MB each) without populating them, so on the data
// path the first touch of each 4 KiB page is a page fault, about 1.7 us on
// a VM: the first pass through the rings, some 1,000 faults on each side,
// made the first 500 round trips of a pingpong 3.5 us slower. Once the link
// is up both sides have mapped the regions: fault them in now, read-only
// (a read fault on a shared writable mapping maps the page writable).
void populate_memif_regions() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/memfd:memif_region_") == std::string::npos) continue;
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
    const long page = sysconf(_SC_PAGESIZE);
    for (unsigned long a = lo; a < hi; a += page) (void)*reinterpret_cast<const volatile uint8_t*>(a);
  }
}

}  // namespace

std::string capture_path_for_queue(const std::string& path, uint16_t q) {
  if (q == 0) return path;
  const auto slash = path.find_last_of('/');
  auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) dot = path.size();
  return path.substr(0, dot) + "-q" + std::to_string(q) + path.substr(dot);
}

Result<std::unique_ptr<DpdkPort>> DpdkPort::open(const DpdkPortConfig& cfg) {
  std::unique_ptr<DpdkPort> port(new DpdkPort());
  if (Status s = port->setup(cfg); !s.ok()) {
    port->close();
    return s;
  }
  return port;
}

DpdkPort::~DpdkPort() { close(); }

Status DpdkPort::setup(const DpdkPortConfig& cfg) {
  if (rte_lcore_count() == 0) {
    return Status(StatusCode::kUnavailable, "EAL is not initialised: call uroce::init_eal first");
  }
  if (cfg.device.empty()) return Status(StatusCode::kInvalidArgument, "empty device spec");
  if (cfg.n_queues == 0) return Status(StatusCode::kInvalidArgument, "n_queues must be at least 1");
  opener_ = getpid();

  // 1. Find the port: a port id, a device EAL probed already, or probe it now.
  uint16_t port = 0;
  if (all_digits(cfg.device)) {
    const unsigned long id = std::stoul(cfg.device);
    if (id >= RTE_MAX_ETHPORTS || !rte_eth_dev_is_valid_port(uint16_t(id))) {
      return Status(StatusCode::kNotFound,
                    status_message("no ethdev port %lu (%u ports available)", id, unsigned(rte_eth_dev_count_avail())));
    }
    port = uint16_t(id);
  } else {
    rte_devargs da{};
    int ret = rte_devargs_parse(&da, cfg.device.c_str());
    if (ret != 0) {
      return Status(StatusCode::kInvalidArgument,
                    status_message("device spec '%s' names no known bus or driver (is its PMD installed? "
                                   "Debian loads PMDs from its plugin dir)",
                                   cfg.device.c_str()));
    }
    const std::string dev_name = da.name;  // canonical, e.g. PCI 0000:03:00.0
    std::free(da.data);  // what rte_devargs_reset (experimental in 22.11) does
    std::optional<uint16_t> found = port_of_device(dev_name);
    if (!found) {
      uint16_t by_name = 0;
      if (rte_eth_dev_get_port_by_name(dev_name.c_str(), &by_name) == 0) found = by_name;
    }
    if (!found) {
      ret = rte_dev_probe(cfg.device.c_str());
      if (ret != 0) {
        return Status(StatusCode::kNotFound,
                      status_message("probing '%s' failed: %s (is the PMD installed, the devargs right, the "
                                     "device bound to a DPDK-capable driver?)",
                                     cfg.device.c_str(), err_text(ret)));
      }
      info_.probed_here = true;
      found = port_of_device(dev_name);
      if (!found) {
        uint16_t by_name = 0;
        if (rte_eth_dev_get_port_by_name(dev_name.c_str(), &by_name) == 0) found = by_name;
      }
      if (!found) {
        return Status(StatusCode::kNotFound,
                      status_message("device '%s' was probed but created no ethdev port", dev_name.c_str()));
      }
    }
    port = *found;
  }
  info_.port_id = port;

  rte_eth_dev_info di{};
  if (int ret = rte_eth_dev_info_get(port, &di); ret != 0) {
    return Status(StatusCode::kUnavailable, status_message("rte_eth_dev_info_get(port %u): %s", port, err_text(ret)));
  }
  device_ = di.device;
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port, name);
  info_.name = name;
  info_.driver = di.driver_name ? di.driver_name : "";

  // 2. Queues, RSS and MTU.
  if (cfg.n_queues > di.max_rx_queues || cfg.n_queues > di.max_tx_queues) {
    return Status(StatusCode::kInvalidArgument,
                  status_message("%s (%s) offers %u RX / %u TX queues, %u asked%s", info_.name.c_str(),
                                 info_.driver.c_str(), di.max_rx_queues, di.max_tx_queues, cfg.n_queues,
                                 info_.driver == "net_af_packet" ? " (add qpairs=N to the device spec)" : ""));
  }
  const uint32_t room = frame_room_of(info_.driver, di);
  const uint16_t ethdev_max_mtu = max_mtu_of(di, room);
  const bool af_packet = info_.driver == "net_af_packet";
  const bool memif = info_.driver == "net_memif";
  // What bounds a frame on af_packet and memif is their ring slot, not what
  // ethdev says (see kAfPacketDefaultFrame, kMemifDefaultSlot).
  const uint32_t slot = af_packet ? af_packet_frame_size(di) - kAfPacketMacOff
                        : memif   ? devarg_uint(di, "bsize=", kMemifDefaultSlot)
                                  : 0;
  info_.max_mtu = slot ? uint16_t(std::max<uint32_t>(std::min(slot, room) - RTE_ETHER_HDR_LEN - RTE_VLAN_HLEN,
                                                     ethdev_max_mtu))
                       : ethdev_max_mtu;
  const uint16_t mtu = std::max<uint16_t>(std::min(cfg.mtu, info_.max_mtu), RTE_ETHER_MIN_MTU);
  // Above what ethdev accepts (af_packet and memif jumbo): ethdev keeps its
  // largest; af_packet's kernel interface gets the MTU directly, memif has
  // no MTU to set (its slots chain, above).
  const uint16_t ethdev_mtu = std::min(mtu, ethdev_max_mtu);

  rte_eth_conf conf{};
  conf.rxmode.mtu = ethdev_mtu;
  const bool vdev = di.device && std::strcmp(rte_bus_name(rte_dev_bus(di.device)), "vdev") == 0;
  // memif's zero-copy mode (zero-copy=yes) hands the peer each segment as an
  // offset into EAL's memory (22.11's memif_tx_one_zc: "FIXME: get region
  // index", region 1 always), so a segment attached from registered memory
  // outside EAL's (DeviceConfig::tx_zero_copy) would reach the peer as the
  // wrong bytes: such a port gets no tx_multiseg, and payloads are copied.
  const bool memif_zc = memif && std::strstr(devargs_text(di.device), "zero-copy=yes");
  if (vdev && !memif_zc && (di.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)) {
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    info_.tx_multiseg = true;
  }
  if (cfg.n_queues > 1 && di.flow_type_rss_offloads != 0) {
    // RoCEv2 flows share UDP dport 4791 and differ in the source port (the
    // QP's entropy), so hashing on the UDP ports spreads QPs across queues.
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & di.flow_type_rss_offloads;
    info_.rss = conf.rx_adv_conf.rss_conf.rss_hf != 0;
    if (!info_.rss) conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
  }
  if (int ret = rte_eth_dev_configure(port, cfg.n_queues, cfg.n_queues, &conf); ret != 0) {
    return Status(StatusCode::kUnavailable, status_message("rte_eth_dev_configure(%s, %u queues, mtu %u): %s",
                                                           info_.name.c_str(), cfg.n_queues, mtu, err_text(ret)));
  }
  configured_ = true;
  // configure() only records the MTU; PMDs backed by a kernel interface
  // (af_packet, tap) apply it in mtu_set. ENOTSUP (memif, ring) is fine.
  if (mtu > ethdev_mtu && memif) {
    info_.mtu = mtu;
  } else if (mtu > ethdev_mtu) {
    info_.mtu = std::min(kernel_mtu_at_least(di.if_index, mtu), mtu);
    if (info_.mtu < mtu) {
      return Status(StatusCode::kUnavailable, status_message("%s: cannot set MTU %u on its kernel interface (index %u)",
                                                             info_.name.c_str(), mtu, di.if_index));
    }
  } else {
    if (int ret = rte_eth_dev_set_mtu(port, mtu); ret != 0 && ret != -ENOTSUP) {
      return Status(StatusCode::kUnavailable,
                    status_message("rte_eth_dev_set_mtu(%s, %u): %s", info_.name.c_str(), mtu, err_text(ret)));
    }
    uint16_t mtu_now = mtu;
    if (rte_eth_dev_get_mtu(port, &mtu_now) != 0) mtu_now = mtu;
    info_.mtu = mtu_now;
  }

  uint16_t rxd = cfg.rx_desc, txd = cfg.tx_desc;
  if (int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd); ret != 0) {
    return Status(StatusCode::kUnavailable,
                  status_message("rte_eth_dev_adjust_nb_rx_tx_desc(%s): %s", info_.name.c_str(), err_text(ret)));
  }

  // 3. One pool per queue pair, on the port's NUMA node: both rings full, the
  // frames the stack holds, and what the per-lcore caches can hide.
  const int sock = rte_eth_dev_socket_id(port) >= 0 ? rte_eth_dev_socket_id(port) : int(SOCKET_ID_ANY);
  const unsigned cache = 256;
  const unsigned n_mbufs = rxd + txd + 2u * kBurstSize + cfg.extra_mbufs +
                           (rte_lcore_count() + 1) * cache * 3 / 2;
  for (uint16_t q = 0; q < cfg.n_queues; ++q) {
    const std::string pool_name = "uroce_p" + std::to_string(port) + "_q" + std::to_string(q);
    rte_mempool* mp = rte_pktmbuf_pool_create(pool_name.c_str(), n_mbufs, cache, 0,
                                              RTE_PKTMBUF_HEADROOM + room, sock);
    if (mp == nullptr) {
      return Status(StatusCode::kResourceExhausted,
                    status_message("mbuf pool %s (%u x %u B): %s (with --no-huge raise EAL -m)", pool_name.c_str(),
                                   n_mbufs, unsigned(RTE_PKTMBUF_HEADROOM + room), err_text(rte_errno)));
    }
    pools_.push_back(mp);
    if (int ret = rte_eth_rx_queue_setup(port, q, rxd, unsigned(sock), nullptr, mp); ret != 0) {
      return Status(StatusCode::kUnavailable, status_message("rte_eth_rx_queue_setup(%s, queue %u, %u desc): %s",
                                                             info_.name.c_str(), q, rxd, err_text(ret)));
    }
    if (int ret = rte_eth_tx_queue_setup(port, q, txd, unsigned(sock), nullptr); ret != 0) {
      return Status(StatusCode::kUnavailable, status_message("rte_eth_tx_queue_setup(%s, queue %u, %u desc): %s",
                                                             info_.name.c_str(), q, txd, err_text(ret)));
    }
  }

  // 4. MAC: ours where the PMD lets us (af_packet/tap change the kernel
  // interface's address), else the port's own (memif: its mac= devarg).
  if (cfg.mac) {
    rte_ether_addr a{};
    std::copy(std::begin(cfg.mac->b), std::end(cfg.mac->b), a.addr_bytes);
    info_.mac_applied = rte_eth_dev_default_mac_addr_set(port, &a) == 0;
  }

  // 5. Start, then promiscuous mode and the MAC as the port now reports them.
  if (int ret = rte_eth_dev_start(port); ret != 0) {
    return Status(StatusCode::kUnavailable,
                  status_message("rte_eth_dev_start(%s): %s", info_.name.c_str(), err_text(ret)));
  }
  started_ = true;
  // -ENOTSUP: the PMD has no switch (memif and ring always deliver everything).
  if (cfg.promiscuous) {
    (void)rte_eth_promiscuous_enable(port);
  } else {
    (void)rte_eth_promiscuous_disable(port);
  }
  info_.promiscuous = rte_eth_promiscuous_get(port) == 1;
  rte_ether_addr a{};
  if (int ret = rte_eth_macaddr_get(port, &a); ret != 0) {
    return Status(StatusCode::kUnavailable,
                  status_message("rte_eth_macaddr_get(%s): %s", info_.name.c_str(), err_text(ret)));
  }
  info_.mac = to_mac(a);
  info_.n_queues = cfg.n_queues;

  const IoCaps caps{.mtu = info_.mtu, .rx_icrc_checked = false, .tx_multiseg = info_.tx_multiseg};
  for (uint16_t q = 0; q < cfg.n_queues; ++q) {
    queues_.push_back(std::make_unique<DpdkQueue>(port, q, pools_[q], caps, info_.mac));
  }

  if (cfg.link_timeout_ms > 0) {
    if (Status s = wait_link(cfg.link_timeout_ms); !s.ok()) return s;
    warm_up();
  }
  if (!cfg.pcap_path.empty()) {
    if (Status s = start_capture(cfg.pcap_path); !s.ok()) return s;
  }
  return {};
}

LinkState DpdkPort::link() const {
  rte_eth_link l{};
  if (!started_ || rte_eth_link_get_nowait(info_.port_id, &l) != 0) return {};
  return LinkState{.up = l.link_status == RTE_ETH_LINK_UP,
                   .speed_mbps = l.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : l.link_speed,
                   .full_duplex = l.link_duplex == RTE_ETH_LINK_FULL_DUPLEX};
}

void DpdkPort::warm_up() {
  if (warm_ || !link().up) return;
  if (info_.driver == "net_memif") populate_memif_regions();
  warm_ = true;
}

Status DpdkPort::wait_link(uint32_t timeout_ms) const {
  for (uint32_t waited = 0;; waited += 10) {
    if (link().up) return {};
    if (waited >= timeout_ms) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status(StatusCode::kUnavailable,
                status_message("%s: link still down after %u ms (memif: is the peer running on the same "
                               "socket? af_packet/tap: is the interface up?)",
                               info_.name.c_str(), timeout_ms));
}

Result<PortStats> DpdkPort::stats() const {
  rte_eth_stats s{};
  if (int ret = rte_eth_stats_get(info_.port_id, &s); ret != 0) {
    return Status(StatusCode::kUnavailable,
                  status_message("rte_eth_stats_get(%s): %s", info_.name.c_str(), err_text(ret)));
  }
  return PortStats{.rx_packets = s.ipackets, .tx_packets = s.opackets, .rx_bytes = s.ibytes,
                   .tx_bytes = s.obytes, .rx_missed = s.imissed, .rx_errors = s.ierrors,
                   .tx_errors = s.oerrors, .rx_nombuf = s.rx_nombuf};
}

Result<std::vector<XStat>> DpdkPort::xstats() const {
  const int n = rte_eth_xstats_get_names(info_.port_id, nullptr, 0);
  if (n < 0) {
    return Status(StatusCode::kUnavailable,
                  status_message("rte_eth_xstats_get_names(%s): %s", info_.name.c_str(), err_text(n)));
  }
  std::vector<rte_eth_xstat_name> names(static_cast<size_t>(n));
  std::vector<rte_eth_xstat> vals(static_cast<size_t>(n));
  if (rte_eth_xstats_get_names(info_.port_id, names.data(), unsigned(n)) != n ||
      rte_eth_xstats_get(info_.port_id, vals.data(), unsigned(n)) != n) {
    return Status(StatusCode::kUnavailable,
                  status_message("%s: xstats changed while reading them", info_.name.c_str()));
  }
  std::vector<XStat> out;
  out.reserve(size_t(n));
  for (const rte_eth_xstat& v : vals) {
    if (v.id < uint64_t(n)) out.push_back(XStat{names[v.id].name, v.value});
  }
  return out;
}

Status DpdkPort::reset_stats() {
  if (int ret = rte_eth_stats_reset(info_.port_id); ret != 0) {
    return Status(StatusCode::kUnavailable,
                  status_message("rte_eth_stats_reset(%s): %s", info_.name.c_str(), err_text(ret)));
  }
  (void)rte_eth_xstats_reset(info_.port_id);
  return {};
}

Status DpdkPort::start_capture(const std::string& path) {
  for (auto& q : queues_) {
    if (Status s = q->start_capture(capture_path_for_queue(path, q->queue_id())); !s.ok()) {
      (void)stop_capture();
      return s;
    }
  }
  return {};
}

Status DpdkPort::stop_capture() {
  Status first;
  for (auto& q : queues_) {
    if (Status s = q->stop_capture(); !s.ok() && first.ok()) first = s;
  }
  return first;
}

void DpdkPort::close() {
  shut_down();
  queues_.clear();
  for (rte_mempool* mp : pools_) rte_mempool_free(mp);
  pools_.clear();
}

void DpdkPort::shut_down() {
  (void)stop_capture();  // an application that wants the capture's fate stops it first
  // A process forked from the one that opened the port (qperf's server forks
  // one per test) shares EAL's memory with it: the --no-huge memfd and
  // hugepages are MAP_SHARED, and the ethdev data, the PMD's queues and the
  // mbuf pools live there. Stopping, closing, removing or freeing them here
  // would take them from under the opener, whose data path still uses them
  // (verbs_fork_exit: the parent's engine thread polled a port each forked
  // child had closed, its queues and pool freed and zeroed, and crashed under
  // load). The opener closes it; this process only lets go of it.
  if (getpid() != opener_) {
    device_ = nullptr;
    pools_.clear();  // not this process's to free
    started_ = configured_ = info_.probed_here = false;
    return;
  }
  // DPDK 22.11's memif unmaps its shared regions from the control thread when
  // the peer disconnects, unsynchronised with rx_burst on the data path: a
  // peer still polling when we close can fault inside the PMD (seen in
  // tests/dpdk: rte_eth_rx_burst -> librte_net_memif). Closing last but one is
  // safe, so linger before disconnecting: the peer finishes its final bursts.
  //
  // The same PMD frees a port on close while its interrupt thread may still be
  // handling the peer's disconnect on the control channel (seen in
  // tests/multicore: rte_dev_remove on the main thread, the memif callback on
  // the EAL interrupt thread, SIGSEGV). So the server side (memif's default
  // role) lets the client go first: it waits, at most 2 s, for the link to go
  // down, i.e. for that callback to have run, before it closes.
  if (started_ && info_.driver == "net_memif") {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const char* args = devargs_text(static_cast<const rte_device*>(device_));
    const bool memif_client = std::strstr(args, "role=client") || std::strstr(args, "role=slave");
    rte_eth_link link{};
    for (int i = 0; !memif_client && i < 200; ++i) {
      if (rte_eth_link_get_nowait(info_.port_id, &link) != 0 || link.link_status == RTE_ETH_LINK_DOWN) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!memif_client) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the callback's tail
  }
  if (started_) {
    (void)rte_eth_dev_stop(info_.port_id);
    started_ = false;
  }
  if (configured_ || info_.probed_here) {
    (void)rte_eth_dev_close(info_.port_id);
    configured_ = false;
  }
  if (info_.probed_here && device_ != nullptr) {
    (void)rte_dev_remove(static_cast<rte_device*>(device_));
    info_.probed_here = false;
  }
  device_ = nullptr;
}

}  // namespace uroce::dpdk
