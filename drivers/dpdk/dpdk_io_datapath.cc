// drivers/dpdk data path: the RX/TX bursts of one queue pair, plus the pcap
// capture those bursts feed when the capture switch is on.
//
// Rules (STYLE 4, 13): one call per burst, no allocation, lock or syscall while
// capture is off; the switch costs one acquire load per burst and nothing per
// packet. With capture on, frames go through stdio (buffered writes), which is
// a debugging mode, not the fast path.
#include <chrono>
#include <span>
#include <vector>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include "drivers/dpdk/dpdk_io.h"
#include "stack/wire/pcap.h"

namespace uroce::dpdk {

struct Capture {
  wire::PcapWriter writer;
  uint64_t tsc0 = 0;        ///< TSC when the capture started
  uint64_t wall0_ns = 0;    ///< CLOCK_REALTIME ns at tsc0
  double ns_per_tsc = 0;
  std::vector<uint8_t> scratch;  ///< linearises chained mbufs

  uint64_t now_ns() const { return wall0_ns + uint64_t(double(rte_rdtsc() - tsc0) * ns_per_tsc); }

  void write(const rte_mbuf* m, uint64_t ns) {
    if (m->nb_segs == 1) {
      writer.write(std::span<const uint8_t>(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len), ns);
      return;
    }
    const uint32_t len = std::min<uint32_t>(m->pkt_len, uint32_t(scratch.size()));
    const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, len, scratch.data()));
    writer.write(std::span<const uint8_t>(p, len), ns);
  }
};

DpdkQueue::~DpdkQueue() { (void)stop_capture(); }

uint16_t DpdkQueue::rx_burst(rte_mbuf** out, uint16_t n) {
  Capture* cap = capture_.load(std::memory_order_acquire);
  if (likely(cap == nullptr)) return rte_eth_rx_burst(port_id_, queue_id_, out, n);
  return rx_burst_captured(out, n);
}

uint16_t DpdkQueue::tx_burst(rte_mbuf** in, uint16_t n) {
  Capture* cap = capture_.load(std::memory_order_acquire);
  if (likely(cap == nullptr)) return rte_eth_tx_burst(port_id_, queue_id_, in, n);
  return tx_burst_captured(in, n);
}

// Dekker-style handshake with stop_capture(): announce, then re-read the switch.
Capture* DpdkQueue::enter_capture() {
  in_capture_.store(true, std::memory_order_seq_cst);
  Capture* cap = capture_.load(std::memory_order_seq_cst);
  if (cap == nullptr) leave_capture();
  return cap;
}

uint16_t DpdkQueue::rx_burst_captured(rte_mbuf** out, uint16_t n) {
  const uint16_t got = rte_eth_rx_burst(port_id_, queue_id_, out, n);
  if (got == 0) return 0;
  Capture* cap = enter_capture();
  if (cap == nullptr) return got;
  const uint64_t ns = cap->now_ns();
  for (uint16_t i = 0; i < got; ++i) cap->write(out[i], ns);
  leave_capture();
  return got;
}

// A PMD may free (or hand to its peer) what it sent before tx_burst returns,
// so each frame is held by one extra reference across the call and written
// only if it was accepted: the capture shows exactly what went out, once.
// The reference is taken on every segment of a chained frame: freeing a chain
// frees each segment whose own count drops to zero, whatever the head's is.
namespace {
void ref_segments(rte_mbuf* m, int16_t v) {
  for (; m; m = m->next) rte_mbuf_refcnt_update(m, v);
}
}  // namespace

uint16_t DpdkQueue::tx_burst_captured(rte_mbuf** in, uint16_t n) {
  Capture* cap = enter_capture();
  if (cap == nullptr) return rte_eth_tx_burst(port_id_, queue_id_, in, n);
  for (uint16_t i = 0; i < n; ++i) ref_segments(in[i], 1);
  const uint16_t sent = rte_eth_tx_burst(port_id_, queue_id_, in, n);
  const uint64_t ns = cap->now_ns();
  for (uint16_t i = 0; i < sent; ++i) {
    cap->write(in[i], ns);
    rte_pktmbuf_free(in[i]);  // drops our references only
  }
  for (uint16_t i = sent; i < n; ++i) ref_segments(in[i], -1);
  leave_capture();
  return sent;
}

// Control path from here on.

Status DpdkQueue::start_capture(const std::string& path) {
  if (Status s = stop_capture(); !s.ok()) return s;  // the capture it replaces was incomplete
  auto cap = std::make_unique<Capture>();
  if (Status s = cap->writer.open(path); !s.ok()) return s;
  cap->scratch.resize(65535);
  const uint64_t hz = rte_get_tsc_hz();
  cap->ns_per_tsc = hz ? 1e9 / double(hz) : 0.0;
  cap->wall0_ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
  cap->tsc0 = rte_rdtsc();
  capture_.store(cap.release(), std::memory_order_seq_cst);
  return {};
}

Status DpdkQueue::stop_capture() {
  Capture* cap = capture_.exchange(nullptr, std::memory_order_seq_cst);
  if (cap == nullptr) return {};
  while (in_capture_.load(std::memory_order_seq_cst)) rte_pause();
  Status s = cap->writer.close();
  delete cap;
  return s;
}

}  // namespace uroce::dpdk
