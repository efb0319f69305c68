// The only interface between the stack and a packet driver: burst I/O of
// rte_mbufs (the DPDK rule: each call returns how many frames it handled).
// Drivers live in drivers/ (loopback: the in-memory fabric; dpdk: any
// rte_ethdev port). One virtual call per burst, never per packet.
#pragma once

#include <cstdint>

#include <uroce/addr.h>

struct rte_mbuf;
struct rte_mempool;

namespace uroce {

/// What a port can do, so the stack never needs to know which driver it has.
struct IoCaps {
  uint16_t mtu = 1500;          ///< Ethernet MTU (IP datagram bytes)
  bool rx_icrc_checked = false; ///< the port verified the ICRC already
  /// tx_burst takes chained mbufs whose segments may be external buffers
  /// (rte_pktmbuf_attach_extbuf) addressed by virtual address: what zero-copy
  /// transmit from registered memory needs (DeviceConfig::tx_zero_copy).
  bool tx_multiseg = false;
};

/// Ethernet MTU a 4096-byte RoCE path MTU needs with room to spare (4096 +
/// IPv6 40 + UDP 8 + BTH 12 + RETH 16 + ICRC 4 = 4176); 4200 is what NIC
/// vendors recommend for RoCE.
inline constexpr uint16_t kRoceJumboMtu = 4200;

/// A port's frame counters, port-wide (a driver fills those it counts).
struct PortStats {
  uint64_t rx_packets = 0, tx_packets = 0, rx_bytes = 0, tx_bytes = 0;
  uint64_t rx_missed = 0;  ///< dropped by the port: its receive ring was full
  uint64_t rx_errors = 0, tx_errors = 0;
  uint64_t rx_nombuf = 0;  ///< receive mbuf allocation failures
};

class PacketIo {
 public:
  virtual ~PacketIo() = default;

  /// Receives up to n frames into out[0..ret). Ownership of each passes to the caller.
  virtual uint16_t rx_burst(rte_mbuf** out, uint16_t n) = 0;
  /// Sends in[0..ret); those are owned by the driver afterwards, in[ret..n) stay with the caller.
  virtual uint16_t tx_burst(rte_mbuf** in, uint16_t n) = 0;
  /// Pool the stack allocates frames to transmit from (room for a 4096-byte
  /// path MTU frame in one segment; zero-copy frames chain three of them).
  virtual rte_mempool* tx_pool() = 0;
  virtual IoCaps caps() const = 0;
  virtual MacAddr mac() const = 0;
};

/// A PacketIo in front of another (fault injection, loopback, a conformance
/// break): every call goes to the wrapped port, so a wrapper overrides only
/// the calls it changes. The wrapped port must outlive it.
class PacketIoWrapper : public PacketIo {
 public:
  explicit PacketIoWrapper(PacketIo& io) : io_(io) {}

  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override { return io_.rx_burst(out, n); }
  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override { return io_.tx_burst(in, n); }
  rte_mempool* tx_pool() override { return io_.tx_pool(); }
  IoCaps caps() const override { return io_.caps(); }
  MacAddr mac() const override { return io_.mac(); }

 protected:
  PacketIo& io_;
};

}  // namespace uroce
