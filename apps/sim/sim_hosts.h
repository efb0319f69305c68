// `uroce sim` scenarios (sim_cc.cc, sim_paths.cc): a host on the in-memory
// fabric (port, device, PD, one registered buffer) and RC QP pairs taken from
// RESET to RTS against a peer known in advance, in one call. The fault runs
// (sim_setup.cc) do both their own way: many QP sides per device, each with
// its model, and receives posted between RTR and RTS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <uroce/verbs.h>

#include "drivers/loopback/fabric.h"

namespace uroce::apps::sim {

/// A scenario host: one fabric port, its device and a buffer registered for
/// local write and remote write/read.
struct SimHost {
  MacAddr mac;
  Gid gid;
  loopback::Port* port = nullptr;
  ContextPtr ctx;
  Pd* pd = nullptr;
  Mr* mr = nullptr;
  std::unique_ptr<uint8_t[]> mem;
  AhAttr addr() const {
    AhAttr a;
    a.dgid = gid;
    a.dmac = mac;
    return a;
  }
};

/// Adds a port with pc to fabric and opens a device on it with dc (whose mac
/// and gid name the host), then a PD and mem_bytes of memory filled with
/// `fill`, registered. Errors are printed ("uroce sim: ...") and returned.
Status open_host(loopback::Fabric& fabric, const loopback::PortConfig& pc, const DeviceConfig& dc, size_t mem_bytes,
                 uint8_t fill, SimHost& out);

struct RcConnect {
  Mtu mtu = Mtu::k4096;
  uint8_t timeout = 10;    ///< local ACK timeout code (4.096 us * 2^N)
  uint8_t retry_cnt = 7;
  uint8_t rd_atomic = 16;  ///< READs / atomics outstanding, both ways (IBA 9.7.5.1.4)
  bool use_ext = false;    ///< set ext at INIT -> RTR (kQpExt); both sides must agree
  QpExt ext;
};

/// An RC QP pair between two devices: the sender's QP and CQ, the receiver's.
struct RcPair {
  Qp* sqp = nullptr;
  Qp* rqp = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
};

/// Creates the pair's CQs (room for 2 * sq_depth + 8 completions) and QPs
/// (sq_depth send WRs, every WR signalled, one receive) and connects both
/// ends with c. Returns the first failure's status (what was created stays
/// with its device).
Status create_rc_pair(const SimHost& sender, const SimHost& receiver, uint32_t sq_depth, const RcConnect& c, RcPair& out);

/// RESET -> INIT -> RTR -> RTS of qp toward peer_qpn at peer (starting PSNs 0,
/// local write and remote write/read access). Returns the first failing step's status.
Status connect_rc(Qp* qp, const AhAttr& peer, uint32_t peer_qpn, const RcConnect& c);

}  // namespace uroce::apps::sim
