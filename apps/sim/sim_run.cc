// `uroce sim`, one seed's run: posting each side's WRs, reaping the
// completions and checking every one (status, opcode, length, order,
// payload) against the model, then the final checks of QP state, memory
// and atomics once the fabric is quiet.
#include "apps/sim/sim_seed.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <uroce/eal.h>
#include <uroce/verbs.h>

namespace uroce::apps::sim {

void SeedRun::post(QpSide& e) {
  if (e.abandoned) return;
  while (e.next_post < e.ops.size() && e.outstanding < e.sq_depth) {
    const size_t n = std::min({size_t(rng_.range(1, 8)), e.ops.size() - e.next_post, size_t(e.sq_depth) - e.outstanding});
    SendWr wrs[8];
    Sge sges[8];
    for (size_t k = 0; k < n; ++k) {
      const uint32_t i = uint32_t(e.next_post + k);
      const Op& op = e.ops[i];
      SendWr& w = wrs[k];
      w = {};
      w.wr_id = uint64_t(e.id) << 32 | i;
      w.next = k + 1 < n ? &wrs[k + 1] : nullptr;
      w.opcode = op.opcode;
      w.send_flags = op.send_flags;
      w.imm_data = op.imm;
      sges[k] = {uint64_t(uintptr_t(e.mem.mr() + op.local_off)), op.len, e.mr->lkey};
      w.sg_list = &sges[k];
      w.num_sge = op.len != 0 ? 1 : 0;
      const uint64_t remote = uint64_t(uintptr_t(e.peer->mem.mr() + op.remote_off));
      w.rdma.remote_addr = remote;
      w.rdma.rkey = e.peer->mr->rkey;
      w.atomic.remote_addr = remote;
      w.atomic.rkey = e.peer->mr->rkey;
      w.atomic.compare_add = op.compare_add;
      w.atomic.swap = op.swap;
      if (e.type == QpType::kUd) {
        w.ud.ah = e.ah;
        w.ud.remote_qpn = e.peer->qp->qp_num;
        w.ud.remote_qkey = 0x11111111;
      }
    }
    SendWr* bad = nullptr;
    const Status s = post_send(e.qp, wrs, &bad);
    const size_t ok = s.ok() ? n : bad != nullptr ? size_t(bad - wrs) : 0;
    for (size_t k = 0; k < ok; ++k) e.ops[e.next_post + k].posted = true;
    e.next_post += ok;
    e.outstanding += ok;
    st_.wrs += ok;
    if (!s.ok()) {
      if (!e.failed) {
        violation("status", "%s: post_send refused WR %zu (%s) before any error: %s", label(e).c_str(),
                  e.next_post, op_name(e.ops[e.next_post].opcode), s.message());
      }
      e.abandoned = true;
      return;
    }
  }
}

void SeedRun::on_send_wc(QpSide& e, const Wc& wc) {
  const uint32_t i = uint32_t(wc.wr_id);
  if (wc.wr_id >> 32 != e.id || i >= e.ops.size() || !e.ops[i].posted) {
    violation("completion", "%s: completion for a WR never posted (wr_id 0x%llx)", label(e).c_str(),
              (unsigned long long)wc.wr_id);
    return;
  }
  Op& op = e.ops[i];
  if (op.completed) {
    violation("completion", "%s: WR %u (%s) completed twice", label(e).c_str(), i, op_name(op.opcode));
    return;
  }
  if (i != e.next_comp) {
    violation("completion", "%s: WR %u (%s) completed before WR %zu (out of order)", label(e).c_str(), i,
              op_name(op.opcode), e.next_comp);
  }
  op.completed = true;
  op.status = wc.status;
  e.next_comp = i + 1;
  --e.outstanding;
  if (wc.qp_num != e.qp->qp_num) {
    violation("completion", "%s: WR %u completion says qp_num 0x%x", label(e).c_str(), i, wc.qp_num);
  }
  if (wc.status == WcStatus::kSuccess) {
    ++st_.success;
    st_.bytes_ok += op.len;
    if (e.failed) {
      violation("status", "%s: WR %u (%s) succeeded after an earlier WR failed", label(e).c_str(), i,
                op_name(op.opcode));
    }
    if (wc.opcode != expected_wc(op.opcode)) {
      violation("completion", "%s: WR %u (%s) completed with opcode %u", label(e).c_str(), i,
                op_name(op.opcode), unsigned(wc.opcode));
    }
    // A successful READ or atomic has its result in place when it completes.
    if (op.opcode == WrOpcode::kRdmaRead && op.len != 0 &&
        std::memcmp(e.mem.mr() + op.local_off, op.expect_read.data(), op.len) != 0) {
      size_t d = 0;
      while (d < op.len && e.mem.mr()[op.local_off + d] == op.expect_read[d]) ++d;
      violation("data", "%s: READ WR %u (%u bytes, PSN order model) returned different data from byte %zu "
                "(got 0x%02x want 0x%02x; target now 0x%02x)", label(e).c_str(), i, op.len, d,
                e.mem.mr()[op.local_off + d], op.expect_read[d], e.peer->mem.mr()[op.remote_off + d]);
    }
    if (is_atomic(op.opcode)) {
      uint64_t got;
      std::memcpy(&got, e.mem.mr() + op.local_off, 8);
      if (got != op.expect_orig) {
        violation("atomics", "%s: %s WR %u on slot %u returned 0x%llx, sequential model says 0x%llx",
                  label(e).c_str(), op_name(op.opcode), i, op.slot, (unsigned long long)got,
                  (unsigned long long)op.expect_orig);
      }
    }
    return;
  }
  if (wc.status == WcStatus::kWrFlushErr) {
    ++st_.flushed;
  } else {
    ++st_.error;
    if (e.failed) {
      violation("status", "%s: WR %u (%s) failed with '%s' after the QP had failed (want flush)",
                label(e).c_str(), i, op_name(op.opcode), wc_status_str(wc.status));
    } else if (wc.status != WcStatus::kRetryExcErr || e.type != QpType::kRc) {
      violation("status", "%s: WR %u (%s, %u bytes) failed with '%s' (valid workload)", label(e).c_str(), i,
                op_name(op.opcode), op.len, wc_status_str(wc.status));
    } else if (!faults_on_ && fabric_->totals().get(PortCounter::drop_buffer) == 0 &&
               fabric_->totals().get(PortCounter::drop_rx_ring_full) == 0) {
      violation("status", "%s: WR %u (%s) retry exceeded on a fabric without faults", label(e).c_str(), i,
                op_name(op.opcode));
    }
  }
  if (!e.failed) ++st_.qps_failed;
  e.failed = true;
}

namespace {

// Finds the peer op a UC/UD receive completion delivered; -1 if none fits.
// UC searches forward from the last delivered message (in order, no
// duplicates); UD searches every datagram.
int64_t match_message(const QpSide& r, const Wc& wc, const uint8_t* data, uint32_t len, bool forward_only) {
  const QpSide& s = *r.peer;
  const bool imm = wc.wc_flags & kWcWithImm;
  for (size_t k = forward_only ? size_t(r.uc_last + 1) : 0; k < s.recv_ops.size(); ++k) {
    if (!s.ops[s.recv_ops[k]].posted) break;
    const Op& op = s.ops[s.recv_ops[k]];
    if (has_imm(op.opcode) != imm || (imm && op.imm != wc.imm_data)) continue;
    if (op.opcode == WrOpcode::kRdmaWriteWithImm) {
      if (wc.opcode != WcOpcode::kRecvRdmaWithImm) continue;
      if (std::memcmp(r.mem.mr() + op.remote_off, s.mem.expect(op.local_off), op.len) != 0) continue;
      return int64_t(k);
    }
    if (wc.opcode != WcOpcode::kRecv || op.len != len) continue;
    if (std::memcmp(data, s.mem.expect(op.local_off), len) != 0) continue;
    return int64_t(k);
  }
  return -1;
}

}  // namespace

void SeedRun::on_recv_wc(QpSide& r, const Wc& wc) {
  const uint32_t k = uint32_t(wc.wr_id);
  ++st_.recv_cqes;
  if (wc.wr_id >> 32 != r.id || k >= r.recvs.size()) {
    violation("completion", "%s: receive completion for a WR never posted (wr_id 0x%llx)", label(r).c_str(),
              (unsigned long long)wc.wr_id);
    return;
  }
  RecvBuf& b = r.recvs[k];
  if (b.completed || k != r.next_recv_comp) {
    violation("completion", "%s: receive WR %u completed %s", label(r).c_str(), k,
              b.completed ? "twice" : "out of order");
    return;
  }
  b.completed = true;
  r.next_recv_comp = k + 1;
  if (wc.status != WcStatus::kSuccess) {
    if (wc.status != WcStatus::kWrFlushErr) {
      violation("status", "%s: receive WR %u failed with '%s'", label(r).c_str(), k, wc_status_str(wc.status));
    }
    r.recv_failed = true;
    return;
  }
  if (r.recv_failed) violation("status", "%s: receive WR %u succeeded after a flushed one", label(r).c_str(), k);
  b.ok = true;
  const QpSide& s = *r.peer;
  const uint8_t* data = r.mem.mr() + b.off;
  switch (r.type) {
    case QpType::kRc: {
      if (k >= s.recv_ops.size()) {
        violation("delivery", "%s: receive %u completed but the peer sent only %zu messages", label(r).c_str(), k,
                  s.recv_ops.size());
        return;
      }
      const uint32_t i = s.recv_ops[k];
      const Op& op = s.ops[i];
      const bool imm = wc.wc_flags & kWcWithImm;
      if (has_imm(op.opcode) != imm || (imm && wc.imm_data != op.imm)) {
        violation("delivery", "%s: receive %u (peer WR %u %s): immediate flag/value wrong (got %s 0x%x)",
                  label(r).c_str(), k, i, op_name(op.opcode), imm ? "imm" : "no imm", wc.imm_data);
      }
      if (op.opcode == WrOpcode::kRdmaWriteWithImm) {
        if (wc.opcode != WcOpcode::kRecvRdmaWithImm) {
          violation("delivery", "%s: receive %u for peer WRITE_IMM WR %u has opcode %u", label(r).c_str(), k, i,
                    unsigned(wc.opcode));
        }
        if (std::memcmp(r.mem.mr() + op.remote_off, s.mem.expect(op.local_off), op.len) != 0) {
          violation("data", "%s: WRITE_IMM WR %u (%u bytes) completed at the receiver before its data landed",
                    label(s).c_str(), i, op.len);
        }
        return;
      }
      if (wc.opcode != WcOpcode::kRecv || wc.byte_len != op.len) {
        violation("delivery", "%s: receive %u for peer %s WR %u: opcode %u byte_len %u, want RECV %u",
                  label(r).c_str(), k, op_name(op.opcode), i, unsigned(wc.opcode), wc.byte_len, op.len);
      } else if (std::memcmp(data, s.mem.expect(op.local_off), op.len) != 0) {
        violation("data", "%s: receive %u: %u bytes of peer %s WR %u differ from what was sent", label(r).c_str(),
                  k, op.len, op_name(op.opcode), i);
      }
      return;
    }
    case QpType::kUc: {
      // As rxe (check_psn) and qib/hfi1 (uc.c) do: a UC responder that sees a PSN other than the
      // expected one drops the message in progress and starts a new one at any
      // FIRST or ONLY packet, whatever its PSN. A duplicated or delayed frame is
      // then delivered again or late: allowed only if the fabric duplicated or
      // reordered frames in this seed.
      int64_t m = match_message(r, wc, data, wc.byte_len, true);
      if (m < 0 && net_dup_or_reorder_) m = match_message(r, wc, data, wc.byte_len, false);
      if (m < 0) {
        violation("delivery", "%s: receive %u (%u bytes, %s) matches no message sent after the last delivered one "
                  "(duplicate, reordered or corrupt)",
                  label(r).c_str(), k, wc.byte_len, wc.opcode == WcOpcode::kRecvRdmaWithImm ? "WRITE_IMM" : "SEND");
      } else {
        r.uc_last = std::max(r.uc_last, m);
        r.uc_delivered[size_t(m)] = true;
      }
      return;
    }
    case QpType::kUd: {
      if (wc.src_qp != s.qp->qp_num) {
        violation("delivery", "%s: datagram from QP 0x%x, want 0x%x", label(r).c_str(), wc.src_qp, s.qp->qp_num);
      }
      if (wc.byte_len < kUdGrh ||
          match_message(r, wc, data + kUdGrh, wc.byte_len - kUdGrh, false) < 0) {
        violation("delivery", "%s: datagram %u (byte_len %u incl. 40-byte GRH) matches no datagram sent",
                  label(r).c_str(), k, wc.byte_len);
      }
      return;
    }
  }
}

uint32_t SeedRun::reap(QpSide& e) {
  Wc wcs[16];
  uint32_t total = 0;
  for (int n; (n = poll_cq(e.scq, 16, wcs)) > 0;) {
    for (int j = 0; j < n; ++j) on_send_wc(e, wcs[j]);
    total += uint32_t(n);
  }
  for (int n; (n = poll_cq(e.rcq, 16, wcs)) > 0;) {
    for (int j = 0; j < n; ++j) on_recv_wc(e, wcs[j]);
    total += uint32_t(n);
  }
  return total;
}

bool SeedRun::all_done() const {
  for (const auto& e : eps_) {
    if (e->outstanding != 0) return false;
    if (!e->abandoned && e->next_post < e->ops.size()) return false;
  }
  return true;
}

// End-of-run expectations of e's ops at the peer and at e, then the memory check.
void SeedRun::final_checks(QpSide& e) {
  QpSide& p = *e.peer;
  for (uint32_t i = 0; i < e.ops.size(); ++i) {
    Op& op = e.ops[i];
    if (op.posted && !op.completed) {
      violation("liveness", "%s: WR %u (%s, %u bytes) never completed (%s)", label(e).c_str(), i,
                op_name(op.opcode), op.len, e.failed ? "QP failed" : "QP alive");
    }
    const bool ok = op.completed && op.status == WcStatus::kSuccess;
    const std::span<const uint8_t> src(e.mem.expect(op.local_off), op.len);
    if (is_rdma_write(op.opcode)) {
      if (ok && e.type == QpType::kRc) {
        p.mem.set_exact(op.remote_off, src);
      } else if (op.posted) {
        // UC may lose or cut a write; a failed RC write may have landed in part.
        bool delivered = false;
        if (e.type == QpType::kUc && op.opcode == WrOpcode::kRdmaWriteWithImm) {
          for (size_t k = 0; k < e.recv_ops.size(); ++k) delivered |= e.recv_ops[k] == i && p.uc_delivered[k];
        }
        if (delivered) {
          p.mem.set_exact(op.remote_off, src);
        } else {
          p.mem.set_alt(op.remote_off, src);
        }
      }
    } else if (op.opcode == WrOpcode::kRdmaRead) {
      if (ok) {
        e.mem.set_exact(op.local_off, op.expect_read);
      } else if (op.posted) {
        e.mem.set_alt(op.local_off, op.expect_read);
      }
    } else if (is_atomic(op.opcode)) {
      if (ok) {
        e.mem.set_exact(op.local_off, {reinterpret_cast<const uint8_t*>(&op.expect_orig), 8});
      } else if (op.posted) {
        e.mem.set_any(op.local_off, 8);
      }
    }
    if (e.type == QpType::kRc && op.recv_index >= 0) {
      const RecvBuf& b = p.recvs[size_t(op.recv_index)];
      if (ok && !b.ok) {
        violation("delivery", "%s: %s WR %u completed successfully but the receiver has no successful receive %d",
                  label(e).c_str(), op_name(op.opcode), i, op.recv_index);
      }
      if (op.opcode != WrOpcode::kRdmaWriteWithImm) {
        if (b.ok) {
          p.mem.set_exact(b.off, src);
        } else if (op.posted) {
          p.mem.set_alt(b.off, src);
        }
      }
    }
  }
  // UC and UD receive buffers may hold any message (or part of an abandoned one):
  // their content was checked at each completion.
  if (e.type != QpType::kRc) e.mem.set_any(e.recv_off, e.recv_len);

  // Atomics at e's slots (issued by the peer): the final value is the model's
  // after a prefix of the peer's atomics that covers every completed one.
  int64_t last_ok = -1;
  for (uint32_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].completed && p.ops[i].status == WcStatus::kSuccess) last_ok = i;
  }
  for (uint32_t s = 0; s < kAtomicSlots; ++s) {
    uint64_t got;
    std::memcpy(&got, e.mem.mr() + e.atom_off + 8 * s, 8);
    const auto& hist = e.slot_hist[s];  // the peer's atomics on our slot s
    size_t kmin = 0, kmax = 0;
    for (const auto& h : hist) {
      kmin += int64_t(h.first) <= last_ok;
      kmax += p.ops[h.first].posted;
    }
    auto state = [&](size_t k) { return k == 0 ? e.slot_init[s] : hist[k - 1].second; };
    bool fits = false;
    for (size_t k = kmin; k <= kmax; ++k) fits |= got == state(k);
    if (!fits) {
      violation("atomics", "%s: slot %u ends as 0x%llx; model after the %zu completed of %zu atomics on it: 0x%llx",
                label(e).c_str(), s, (unsigned long long)got, kmin, hist.size(), (unsigned long long)state(kmin));
    }
    e.mem.set_any(e.atom_off + 8 * s, 8);
  }

}

// After every endpoint's final_checks has set the shadow of the memory its WRs reach.
void SeedRun::check_memory(QpSide& e) {
  const int64_t bad = e.mem.first_mismatch();
  if (bad != INT64_MAX) {
    const char* where = bad < 0                              ? "front guard"
                        : bad >= int64_t(e.mem.area())      ? "back guard"
                        : bad < int64_t(e.land_off)         ? "source area"
                        : bad < int64_t(e.tgt_off)          ? "READ/atomic landing area"
                        : bad < int64_t(e.atom_off)         ? "RDMA target area"
                        : bad < int64_t(e.recv_off)         ? "atomic slots"
                                                            : "receive buffers";
    violation("memory", "%s: MR byte %lld (%s) is 0x%02x, not what any WR may have written",
              label(e).c_str(), (long long)bad, where, e.mem.mr()[bad]);
  }
}

SeedStats SeedRun::run() {
  if (!setup()) {
    st_.setup_failed = true;
    return st_;
  }
  const uint64_t max_idle_step = (4096ull << timeout_code_) / 16;
  uint64_t now = 0, idle_step = 1000;
  int quiet = 0;
  for (;;) {
    fabric_->advance(now);
    for (auto& e : eps_) post(*e);
    uint32_t work = 0;
    for (auto& d : devs_) work += poll(d->ctx.get(), now);
    for (auto& e : eps_) work += reap(*e);
    if (all_done() && fabric_->next_event_ns() == Fabric::kNever && work == 0) {
      if (++quiet >= 3) break;
    } else {
      quiet = 0;
    }
    if (now >= cfg_.time_limit_ns) {
      size_t left = 0;
      for (auto& e : eps_) left += e->outstanding;
      if (left != 0) {
        violation("liveness", "%zu WRs still outstanding after %llu ms of virtual time", left,
                  (unsigned long long)(cfg_.time_limit_ns / 1'000'000));
      }
      break;
    }
    const uint64_t step = work != 0 ? 500 : idle_step;
    idle_step = work != 0 ? 1000 : std::min(idle_step * 2, max_idle_step);
    now = std::max(now + 1, std::min(fabric_->next_event_ns(), now + step));
  }
  st_.virtual_ns = now;
  for (auto& e : eps_) final_checks(*e);
  for (auto& e : eps_) check_memory(*e);
  for (auto& d : devs_) st_.retransmits += query_counters(d->ctx.get()).get(Counter::retransmits);
  st_.fabric = fabric_->totals();
  st_.frames = fabric_->frames_seen();
  if (Status s = fabric_->close_capture(); !s.ok()) violation("capture", "%s", s.message());
  // Devices before the fabric: they may hold its mbufs.
  for (auto& e : eps_) {
    if (e->qp != nullptr) (void)destroy_qp(e->qp);
  }
  eps_.clear();
  devs_.clear();
  fabric_.reset();
  return st_;
}

}  // namespace uroce::apps::sim
