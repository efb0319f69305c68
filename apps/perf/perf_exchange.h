// uroce perf's out-of-band exchange with perftest (see perf.h for the
// message sequence): the QP info in its text (TCP) and binary (-R) forms,
// the bandwidth reports, and the channel (Oob) that every handshake of a
// test goes through, pumping the engine while it waits. Control path.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "apps/common/endpoint.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/common/perf_report.h"
#include "apps/perf/perf.h"

namespace uroce::apps::perftest {

/// The 108-byte text QP info: "%04x:%04x:%06x:%06x:%08x:%016llx:" LID,
/// OUT_READS, QPN, PSN, RKEY, VADDR, 16 x "%02x:" GID, "%08x:" SRQN, NUL.
void format_dest(const Dest& d, char (&msg)[kKeyMsgBytes]);
/// Splits on ':' as perftest's reader does (23 hex fields); false if malformed.
bool parse_dest(const char (&msg)[kKeyMsgBytes], Dest& d);

/// uroce's extension (QpAttr::ext, docs/LOSS_RECOVERY.md) is negotiated in
/// the QP info's SRQN field, which perftest reads only for XRC and sends as 0:
/// ext_offer(e) is "URO" and one bit per feature asked for (0 if none), and
/// agreed_ext gives what both sides asked for, a default QpExt (plain RoCE)
/// when either side, a stock perftest among them, asked for nothing. The
/// source ports a side sprays over are its own choice (ours: mine.paths).
uint32_t ext_offer(const QpExt& e);
QpExt agreed_ext(const QpExt& mine, uint32_t peer_srqn);

/// -R: struct pingpong_dest as perftest sends it over the rdma_cm channel
/// (rdma_write_keys, HAVE_ENDIAN): lid, out_reads, qpn, psn, rkey (u32), 4
/// bytes of padding, vaddr (u64), gid[16], srqn, gid_index (u32), all
/// big-endian; 56 bytes. The reader (rdma_read_keys) takes lid .. gid only.
inline constexpr size_t kBinDestBytes = 56;
void format_dest_bin(const Dest& d, uint32_t gid_index, uint8_t (&msg)[kBinDestBytes]);
void parse_dest_bin(const uint8_t (&msg)[kBinDestBytes], Dest& d);

/// Where -R's rdma_cm connections go: the server binds --listen, the client
/// dials SERVER, both on -p (perftest 4.5: IPv4, port space TCP).
CmPeer cm_peer(const Config& cfg);

// ---------------------------------------------------------------- reports (wire form)

inline uint64_t be64_bits(uint64_t v) { return __builtin_bswap64(v); }
inline uint64_t double_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof(u));
  return u;
}
inline double bits_double(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof(d));
  return d;
}

/// perftest's out-of-band exchange: the client writes then reads, the server
/// reads then writes; every wait pumps the engine. The channel is TCP, or with
/// -R an rdma_cm connection (CmChannel); the messages are the same except the
/// QP info (text over TCP, binary over rdma_cm) and the close ("done" over TCP only).
class Oob {
 public:
  Oob(Perf& perf, const Config& cfg) : perf_(perf), cfg_(cfg) {
    if (cfg.rdma_cm) {
      cm_.emplace(perf.endpoint());
    } else {
      tcp_.emplace(&g_stop);
    }
  }

  /// A TCP server listens now, before its port waits for the link
  /// (TcpChannel::listen); open() accepts.
  bool listen(std::string& err) {
    if (!tcp_ || !cfg_.server) return true;
    if (tcp_->listen(cfg_.listen, cfg_.port, err)) return true;
    err = "Unable to init the socket connection: " + err;
    return false;
  }

  bool open(std::string& err) {
    auto idle = [this] { perf_.pump(); };
    if (cm_) {
      if (cm_->open(cm_peer(cfg_), err)) return true;
      err = "Unable to init the rdma_cm connection to " + (cfg_.server ? cfg_.listen : cfg_.host) + ":" +
            std::to_string(cfg_.port) + ": " + err;
      return false;
    }
    if (cfg_.server) return tcp_->accept_one(cfg_.listen, cfg_.port, cfg_.timeout_s, idle, err);
    if (!tcp_->connect_to(cfg_.host, cfg_.port, cfg_.timeout_s, idle, err)) {
      err = "Couldn't connect to " + cfg_.host + ":" + std::to_string(cfg_.port) + ": " + err;
      return false;
    }
    return true;
  }

  bool xchg(const void* mine, void* theirs, size_t n, const char* what, std::string& err) {
    // The responder of a bw test does all its work in here: poll the engine a
    // burst of times per look at the socket (one recv() syscall and a clock
    // read per look took half the responder's core and capped the rate).
    auto idle = [this] {
      for (int i = 0; i < kPumpsPerOobPoll; ++i) perf_.pump();
    };
    auto send = [&] {
      if (cm_ ? cm_->send_wait(mine, n, cfg_.timeout_s, err) : tcp_->send_bytes(mine, n)) return true;
      err = std::string("Couldn't send ") + what + (cm_ ? ": " + err : "");
      return false;
    };
    auto recv = [&] {
      if (cm_ ? cm_->recv_wait(theirs, n, cfg_.timeout_s, err) : tcp_->recv_wait(theirs, n, cfg_.timeout_s, idle, err)) {
        return true;
      }
      err = std::string("Couldn't read ") + what + ": " + err;
      return false;
    };
    return cfg_.server ? recv() && send() : send() && recv();
  }

  /// ctx_hand_shake for QP qi: 108-byte QP info each way (-R: 56 bytes, binary).
  bool hs(uint32_t qi, std::string& err) { return hs_dest(perf_.me()[qi], perf_.rem()[qi], err); }
  bool hs_all(std::string& err) {
    for (uint32_t i = 0; i < cfg_.num_qp; ++i) {
      if (!hs(i, err)) return false;
    }
    return true;
  }
  /// -R: the handshakes before and after the QPs' rdma_cm connections
  /// (create_rdma_cm_connection), made with the still all-zero QP info.
  bool hs_zero(std::string& err) {
    Dest zero, ignored;
    return hs_dest(zero, ignored, err);
  }
  /// ctx_close_connection: one more handshake, then over TCP "done\0" (never read back).
  bool close(std::string& err) {
    if (!hs(0, err)) return false;
    if (tcp_ && !tcp_->send_bytes(kDone, sizeof(kDone))) {
      err = "Couldn't write \"done\"";
      return false;
    }
    return true;
  }
  /// -R: rdma_disconnect of the channel's connection (the peer destroys its id).
  void disconnect() {
    if (cm_) cm_->disconnect(1000);
  }
  /// xchg_bw_reports: size, iters (u64 since the peer is >= 5.33), peak, average,
  /// message rate, each 8 bytes big-endian, each its own exchange.
  bool reports(const BwReport& mine, BwReport& theirs, std::string& err) {
    const uint64_t out[5] = {be64_bits(mine.size), be64_bits(mine.iters), be64_bits(double_bits(mine.bw_peak)),
                             be64_bits(double_bits(mine.bw_avg)), be64_bits(double_bits(mine.msg_rate))};
    uint64_t in[5] = {};
    for (int i = 0; i < 5; ++i) {
      if (!xchg(&out[i], &in[i], 8, "the bw reports", err)) return false;
    }
    theirs.size = be64_bits(in[0]);
    theirs.iters = be64_bits(in[1]);
    theirs.bw_peak = bits_double(be64_bits(in[2]));
    theirs.bw_avg = bits_double(be64_bits(in[3]));
    theirs.msg_rate = bits_double(be64_bits(in[4]));
    return true;
  }
  uint32_t handshakes() const { return handshakes_; }

 private:
  bool hs_dest(const Dest& me, Dest& rem, std::string& err) {
    if (cm_) {
      uint8_t mine[kBinDestBytes], theirs[kBinDestBytes];
      format_dest_bin(me, cfg_.gid_idx, mine);
      if (!xchg(mine, theirs, sizeof(mine), "the QP info", err)) return false;
      ++handshakes_;
      parse_dest_bin(theirs, rem);
      return true;
    }
    char mine[kKeyMsgBytes], theirs[kKeyMsgBytes];
    format_dest(me, mine);
    if (!xchg(mine, theirs, sizeof(mine), "the QP info", err)) return false;
    ++handshakes_;
    if (!parse_dest(theirs, rem)) {
      err = "Couldn't parse line <" + std::string(theirs, strnlen(theirs, sizeof(theirs))) + ">";
      return false;
    }
    return true;
  }

  Perf& perf_;
  const Config& cfg_;
  std::optional<TcpChannel> tcp_;
  std::optional<CmChannel> cm_;
  uint32_t handshakes_ = 0;
};

}  // namespace uroce::apps::perftest
