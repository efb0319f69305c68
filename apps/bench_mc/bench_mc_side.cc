// `uroce bench-mc`, one side's setup and end checks: the memif port with
// one queue per engine, the EngineGroup, PDs, CQs, the MR on every engine
// and the QPs (EngineGroupSide::open), the exchange of Info files that takes
// the QPs to RTS (connect), and the soak's checks at the end (mbufs back in
// their pools, QPs in RTS and idle, RSS flat). Control path.
#include "apps/bench_mc/bench_mc.h"

#include <rte_mempool.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdarg>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <rte_lcore.h>

#include <uroce/eal.h>
#include <uroce/engine_group.h>
#include <uroce/verbs.h>

#include "apps/common/endpoint.h"
#include "apps/common/launch.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "drivers/dpdk/engine_launcher.h"
#include "drivers/dpdk/fault_io.h"

namespace uroce::apps::bench_mc {

bool write_file(const std::string& path, const void* p, size_t n) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(static_cast<const char*>(p), std::streamsize(n));
    f.close();  // a full disk may show only when the buffer is flushed
    if (!f) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}
bool read_file(const std::string& path, void* p, size_t n) {
  std::ifstream f(path, std::ios::binary);
  f.read(static_cast<char*>(p), std::streamsize(n));
  return bool(f);
}

bool EngineGroupSide::open(std::string& err) {
  dpdk::DpdkPortConfig pc;
  pc.device = strf("net_memif0,role=%s,socket=%s/memif.sock,socket-abstract=no,mac=02:00:00:00:01:0%d",
                  cfg_.server ? "server" : "client", cfg_.dir.c_str(), cfg_.server ? 1 : 2);
  pc.n_queues = uint16_t(cfg_.engines);
  pc.link_timeout_ms = cfg_.timeout_s * 1000;
  auto port = dpdk::DpdkPort::open(pc);
  if (!port.ok()) {
    err = strf("port: %s", port.status().message());
    return false;
  }
  port_ = std::move(port).value();
  std::vector<PacketIo*> queues;
  for (uint16_t q = 0; q < port_->n_queues(); ++q) {
    if (cfg_.drop_every) {
      lossy_.push_back(std::make_unique<dpdk::DropEveryNthIo>(port_->queue(q), cfg_.drop_every));
      queues.push_back(lossy_.back().get());
    } else {
      queues.push_back(&port_->queue(q));
    }
  }
  DeviceConfig dc;
  dc.mac = port_->info().mac;
  const uint8_t ip[4] = {10, 0, 1, uint8_t(cfg_.server ? 1 : 2)};
  dc.gid = Gid::from_ipv4(ip);
  dc.max_qp = std::max<uint32_t>(16, cfg_.qps);
  dc.key_seed = cfg_.server ? 0x5e5e : 0xc1c1;
  auto g = EngineGroup::open(queues, dc);
  if (!g.ok()) {
    err = strf("engine group: %s", g.status().message());
    return false;
  }
  group_ = std::move(g).value();
  runs_ = std::make_unique<EngineRun[]>(cfg_.engines);

  // Memory: [atomic words | atomic results][area the peer targets][local sources/READ results][receive buffers].
  slot_bytes_ = (2 * uint64_t(cfg_.size) + 63) & ~uint64_t(63);
  const uint64_t atomics = 3 * 8 * uint64_t(kMaxQps);
  const uint64_t recv = uint64_t(cfg_.qps) * kRecvPerQp * slot_bytes_;
  const uint64_t total = atomics + 2 * slot_bytes_ * cfg_.qps + recv;
  mem_ = page_buffer(total);
  std::memset(mem_.get(), 0, total);
  atomics_ = mem_.get();
  area_ = atomics_ + atomics;
  local_ = area_ + slot_bytes_ * cfg_.qps;
  recv_bufs_ = local_ + slot_bytes_ * cfg_.qps;

  for (uint32_t e = 0; e < cfg_.engines; ++e) {
    auto pd = alloc_pd(group_->engine(e));
    // rate: every WRITE is signaled, so a CQ holds all an engine's QPs x --depth.
    const uint32_t per_engine = (cfg_.qps + cfg_.engines - 1) / cfg_.engines;
    auto scq = create_cq(group_->engine(e), std::max<uint32_t>(8192, std::bit_ceil(per_engine * cfg_.depth)));
    auto rcq = create_cq(group_->engine(e), 8192);
    if (!pd.ok() || !scq.ok() || !rcq.ok()) {
      err = "alloc_pd/create_cq failed";
      return false;
    }
    pds_.push_back(*pd);
    scqs_.push_back(*scq);
    rcqs_.push_back(*rcq);
  }
  mrs_.resize(cfg_.engines);
  auto key = group_->reg_mr_all(pds_, mem_.get(), total,
                                kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic, mrs_);
  if (!key.ok()) {
    err = strf("reg_mr_all: %s", key.status().message());
    return false;
  }
  key_ = *key;
  for (uint32_t j = 0; j < cfg_.qps; ++j) {
    QpSlot s;
    s.index = j;
    s.engine = cfg_.server || !cfg_.cross ? j % cfg_.engines : (j + j / cfg_.engines) % cfg_.engines;
    QpInitAttr ia;
    ia.send_cq = scqs_[s.engine];
    ia.recv_cq = rcqs_[s.engine];
    ia.cap.max_send_wr = cfg_.verify ? 1024 : std::bit_ceil(cfg_.depth);  // rate: --depth in flight, 16k QPs fit
    ia.cap.max_recv_wr = kRecvPerQp;
    auto q = group_->create_qp(pds_[s.engine], ia);
    if (!q.ok()) {
      err = strf("create_qp: %s", q.status().message());
      return false;
    }
    s.qp = *q;
    slots_.push_back(s);
    me_.qpn[j] = s.qp->qp_num;
    me_.psn[j] = uint32_t(splitmix64_of(j * 2 + (cfg_.server ? 1 : 0))) & 0xffffff;
  }
  me_.engines = cfg_.engines;
  me_.qps = cfg_.qps;
  me_.rkey = key_;
  me_.area_addr = uint64_t(uintptr_t(area_));
  me_.slot_bytes = slot_bytes_;
  me_.atomic_addr = uint64_t(uintptr_t(atomics_));
  std::memcpy(me_.mac, dc.mac.b, 6);
  std::memcpy(me_.gid, dc.gid.raw, 16);
  return true;
}

bool EngineGroupSide::connect(std::string& err) {
  if (!write_file(path(cfg_.server ? "server.info" : "client.info"), &me_, sizeof(me_))) {
    err = "cannot write the info file";
    return false;
  }
  const std::string peer_path = path(cfg_.server ? "client.info" : "server.info");
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(cfg_.timeout_s);
  while (!std::filesystem::exists(peer_path)) {
    if (g_stop || std::chrono::steady_clock::now() > end) {
      err = g_stop ? "interrupted" : "no info file from the peer";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!read_file(peer_path, &peer_, sizeof(peer_)) || peer_.magic != kMagic || peer_.qps != cfg_.qps) {
    err = "the peer's info file does not match (--qps must agree)";
    return false;
  }
  // Path MTU: memif's 1500 B carries 1024.
  mtu_ = Mtu::k1024;
  AhAttr ah;
  std::memcpy(ah.dgid.raw, peer_.gid, 16);
  std::memcpy(ah.dmac.b, peer_.mac, 6);
  for (auto& s : slots_) {
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    Status st = modify_qp(s.qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
    if (st.ok()) {
      a = {};
      a.qp_state = QpState::kRtr;
      a.path_mtu = mtu_;
      a.dest_qp_num = peer_.qpn[s.index];
      a.rq_psn = peer_.psn[s.index];
      a.ah_attr = ah;
      a.max_dest_rd_atomic = 16;
      a.min_rnr_timer = 1;
      st = modify_qp(s.qp, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer);
    }
    if (st.ok()) {
      a = {};
      a.qp_state = QpState::kRts;
      a.sq_psn = me_.psn[s.index];
      a.timeout = 14;  // 67 ms: oversubscribed CPUs stall engines for whole scheduler slices
      a.retry_cnt = 7;
      a.rnr_retry = 7;
      a.max_rd_atomic = 16;
      st = modify_qp(s.qp, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
    }
    if (!st.ok()) {
      err = strf("modify_qp: %s", st.message());
      return false;
    }
    if (cfg_.server) {
      for (uint32_t r = 0; r < kRecvPerQp; ++r) {
        Sge sge{uint64_t(uintptr_t(recv_bufs_ + (uint64_t(s.index) * kRecvPerQp + r) * slot_bytes_)), cfg_.size, key_};
        RecvWr wr;
        wr.wr_id = uint64_t(s.index) * kRecvPerQp + r;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        RecvWr* bad = nullptr;
        if (Status rs = post_recv(s.qp, &wr, &bad); !rs.ok()) {
          err = strf("post_recv: %s", rs.message());
          return false;
        }
      }
    }
  }
  return true;
}

// The server's engines: poll, check each SEND / WRITE-imm as it lands, repost the buffer.

bool EngineGroupSide::soak_checks(const char* side, RssLog& rss, std::string& err) {
  rss.next = {};
  rss.sample();
  uint64_t in_use = 0, pool_size = 0;
  for (uint16_t q = 0; q < port_->n_queues(); ++q) {
    rte_mempool* p = port_->queue(q).tx_pool();
    in_use += rte_mempool_in_use_count(p);
    pool_size += p->size;
  }
  uint32_t stuck = 0;
  for (const QpSlot& s : slots_) {
    QpAttr a;
    QpInitAttr ia;
    if (!query_qp(s.qp, &a, &ia).ok() || a.qp_state != QpState::kRts || s.outstanding) ++stuck;
  }
  uint64_t dropped = 0;
  for (const auto& l : lossy_) dropped += l->dropped();
  const uint64_t base = rss.at_1min ? rss.at_1min : rss.first;
  const int64_t growth = int64_t(rss.last) - int64_t(base);
  std::printf("# soak %s: frames_dropped=%llu mbufs_in_use=%llu/%llu qps_stuck=%u rss_kib first=%llu at_1min=%llu "
              "last=%llu max=%llu growth_since_1min=%lld samples=%d\n",
              side, (unsigned long long)dropped, (unsigned long long)in_use, (unsigned long long)pool_size, stuck,
              (unsigned long long)rss.first, (unsigned long long)rss.at_1min, (unsigned long long)rss.last,
              (unsigned long long)rss.max, (long long)growth, rss.samples);
  if (in_use) err += strf("%s%llu mbufs not returned to their pool", err.empty() ? "" : "; ", (unsigned long long)in_use);
  if (stuck) err += strf("%s%u QPs stuck", err.empty() ? "" : "; ", stuck);
  if (growth > 4096) err += strf("%sRSS grew %lld KiB after the first minute", err.empty() ? "" : "; ", (long long)growth);
  if (!in_use && !stuck && growth <= 4096) return true;
  std::printf("# soak %s: FAILED: %s\n", side, err.c_str());
  return false;
}

}  // namespace uroce::apps::bench_mc
