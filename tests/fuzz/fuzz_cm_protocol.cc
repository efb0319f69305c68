// libFuzzer target: the CM state machine (stack/cm/protocol.cc, gsi.cc,
// rdma_cm.cc) of one Context, driven by the consumer calls (listen, connect,
// accept, reject, disconnect, destroy) and by CM MADs from a scripted peer
// (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR REQ / REP), valid and mutated,
// duplicated, and interleaved with timer expiries of up to 67 s of virtual time.
//
// Input: a sequence of operations, each one op byte then its arguments:
//   op % 10 = 0  listen       [a] port space a&1 (TCP / UDP), port kPorts[a>>1 & 1]
//             1  connect      [a] a new id (TCP / UDP by a&1) resolves the peer's
//                             address kPorts[a>>1 & 1]; the events then resolve the
//                             route, create the QP and connect (REQ / SIDR REQ)
//             2  accept       [a] the pending connect request number a & 0x7f (QP made
//                             first: UD for UDP, else UC if a & 0x80, else RC)
//             3  reject       [a] the pending connect request number a
//             4  disconnect   [a] owned id number a
//             5  destroy      [a] owned id number a
//             6  inject MAD   [attr][fix][seed 16 bytes]: a MAD of CM attribute
//                             kAttrs[(attr & 15) % 9] whose fields come from the seed
//                             bytes, then the fix-ups fix asks for; attr bit 7: the
//                             consumer is busy: the engine polls but the events stay
//                             queued until after the next operation (so that one can
//                             destroy a listener whose request is still undelivered)
//               fix bit 0     remote comm ID (SIDR REP: request ID) := one of ours
//                             (the conversation attr >> 4 & 7 picks, from the MADs we sent)
//                   bit 1     local comm ID := the peer's one in that conversation
//                   bit 2     REQ / SIDR REQ: a listened service ID and a valid rdma_cm
//                             header (peer -> us); REQ: RC or UC, MTU 1024, P_Key 0xffff;
//                             REP: one of two peer QPNs and CA GUIDs; SIDR REP: status 0,
//                             a peer QPN, Q_Key 0x01234567
//                   bit 3     DREQ: remote QPN := our QPN in that conversation;
//                             REJ / SIDR REP: info length <= 72
//                   bit 4     framing: Q_Key other than the GSI's (IBA 13.5.3)
//                   bit 5     framing: payload one byte short of a MAD
//                   bit 6     MAD header: base version, class, class version or method
//                             (seed[15] & 3 picks) := seed[14]
//                   bit 7     byte seed[13] of the MAD := seed[12] (anywhere, any field)
//             7  duplicate    the last injected frame again
//             8  clock        [a] advance the virtual clock by 2^(a % 27) us, polling
//             9  reflect      [a] one of the MADs we sent, sent back to us from the peer
// After every operation the engine is polled and every CM event is taken (the
// consumer side owns the ids it created and the ones kConnectRequest gave it).
//
// Invariants, checked after each operation (a failure aborts):
//  - every frame injected to QP1 is counted once in mad_rcvd, and exactly
//    the malformed ones (bad framing, a MAD the codec refuses) in
//    mad_drop_framing / mad_drop_malformed / mad_drop_unsupported, by reason;
//  - every frame the stack sends parses (ICRC checked), and every MAD it
//    sends decodes as a CM MAD to the peer;
//  - cm_id_count() equals the ids the consumer owns (no id exists that no
//    one can destroy), and the QPs in the device are exactly those of
//    owned ids (no leaked QP);
// and at the end, after every owned id is destroyed and 10 minutes of virtual
// time: no id, no QP, and after close_device the mempool is full again
// (ASan / UBSan / LSan: no memory error, undefined behaviour or leak).
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <variant>
#include <vector>

#include <uroce/cm.h>
#include <uroce/counters.h>
#include <uroce/eal.h>
#include <uroce/packet_io.h>
#include <uroce/verbs.h>

#include "stack/cm/agent.h"
#include "stack/cm/describe.h"
#include "stack/cm/ip_cm.h"
#include "stack/cm/mad.h"
#include "stack/device/context.h"
#include "stack/wire/packet.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace uroce;
using namespace uroce::cm;

constexpr char kFuzzTarget[] = "fuzz_cm_protocol";

constexpr unsigned kPoolFrames = 1024;
constexpr MacAddr kOurMac{{0x02, 0, 0, 0, 0, 0x01}};
constexpr MacAddr kPeerMac{{0x02, 0, 0, 0, 0, 0x02}};
constexpr uint8_t kOurIp[4] = {10, 0, 0, 1};
constexpr uint8_t kPeerIp[4] = {10, 0, 0, 2};
constexpr uint16_t kPorts[2] = {7174, 18515};
constexpr uint32_t kPeerQpns[2] = {0x11, 0x12};
constexpr uint64_t kPeerGuids[2] = {0x000000fffe000002ull, 0x000000fffe000003ull};
constexpr CmAttr kAttrs[9] = {CmAttr::kReq, CmAttr::kMra,  CmAttr::kRej,     CmAttr::kRep,    CmAttr::kRtu,
                              CmAttr::kDreq, CmAttr::kDrep, CmAttr::kSidrReq, CmAttr::kSidrRep};
constexpr size_t kMaxOwned = 24;

// One conversation as our sent MADs show it: our comm ID (or SIDR request
// ID), the peer's comm ID, our QPN.
struct Conv {
  uint32_t ours = 0;
  uint32_t peer = 0;
  uint32_t our_qpn = 0;
};

// The in-memory port (fuzz_support.h). Frames the stack sends are checked,
// ARP requests answered for the peer, CM MADs recorded (conversations, and
// the frames to reflect).
class FuzzPort final : public fuzz::InboxPort {
 public:
  explicit FuzzPort(rte_mempool* pool) : InboxPort(pool, kOurMac, 1500) {}

  void reset() {
    clear();
    convs.clear();
    sent.clear();
  }

  std::vector<Conv> convs;                           // most recent last, at most 16
  std::vector<std::array<uint8_t, kMadBytes>> sent;  // MADs we sent, most recent last, at most 16
  bool trace = false;

 private:
  void on_tx(const rte_mbuf& m) override {
    const std::span<const uint8_t> f(rte_pktmbuf_mtod(&m, const uint8_t*), rte_pktmbuf_data_len(&m));
    wire::PacketDesc d;
    const auto e = wire::parse(f, d);
    FUZZ_CHECK(e == wire::ParseError::kOk || wire::is_not_roce(e));  // the stack sends valid RoCE
    if (e == wire::ParseError::kOk && is_gsi_packet(d)) {
      on_sent_mad(d, f);
    } else if (e != wire::ParseError::kOk) {
      maybe_answer_arp(f);
    }
  }
  void on_sent_mad(const wire::PacketDesc& d, std::span<const uint8_t> f) {
    FUZZ_CHECK(d.payload_len == kMadBytes && d.dest_qp == kGsiQpn && d.deth_qkey == kGsiQkey);
    FUZZ_CHECK(d.dst_mac == kPeerMac && d.dgid == Gid::from_ipv4(kPeerIp));
    std::array<uint8_t, kMadBytes> mad;
    std::memcpy(mad.data(), f.data() + d.payload_off, kMadBytes);
    CmMad m;
    FUZZ_CHECK(decode(mad, m) == CmError::kOk);  // everything we send is a valid CM MAD
    Conv c;
    std::visit(
        [&](const auto& b) {
          using T = std::decay_t<decltype(b)>;
          if constexpr (std::is_same_v<T, SidrReqDesc> || std::is_same_v<T, SidrRepDesc>) {
            c.ours = b.request_id;
          } else if constexpr (std::is_same_v<T, ReqDesc>) {
            c.ours = b.local_comm_id;
            c.our_qpn = b.local_qpn;
          } else {
            c.ours = b.local_comm_id;
            c.peer = b.remote_comm_id;
            if constexpr (std::is_same_v<T, RepDesc>) c.our_qpn = b.local_qpn;
          }
        },
        m.body);
    const bool sidr_rep = std::holds_alternative<SidrRepDesc>(m.body);
    if (!sidr_rep) {  // a SIDR REP's request ID is the peer's
      auto it = std::find_if(convs.begin(), convs.end(), [&](const Conv& x) { return x.ours == c.ours; });
      if (it != convs.end()) {
        if (!c.peer) c.peer = it->peer;
        if (!c.our_qpn) c.our_qpn = it->our_qpn;
        convs.erase(it);
      }
      convs.push_back(c);
      if (convs.size() > 16) convs.erase(convs.begin());
    }
    sent.push_back(mad);
    if (sent.size() > 16) sent.erase(sent.begin());
    if (trace) std::fprintf(stderr, "  sent: %s\n", describe_cm_mad(mad).c_str());
  }
  // ARP request for the peer's IPv4 address: answer it (the peer is at kPeerMac).
  void maybe_answer_arp(std::span<const uint8_t> f) {
    if (f.size() < 42 || f[12] != 0x08 || f[13] != 0x06 || f[21] != 1) return;
    if (std::memcmp(f.data() + 38, kPeerIp, 4) != 0) return;
    std::array<uint8_t, 60> r{};
    std::memcpy(r.data(), kOurMac.b, 6);
    std::memcpy(r.data() + 6, kPeerMac.b, 6);
    const uint8_t arp[10] = {0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 2};
    std::memcpy(r.data() + 12, arp, sizeof(arp));
    std::memcpy(r.data() + 22, kPeerMac.b, 6);
    std::memcpy(r.data() + 28, kPeerIp, 4);
    std::memcpy(r.data() + 32, kOurMac.b, 6);
    std::memcpy(r.data() + 38, kOurIp, 4);
    inject(r);
  }
};

FuzzPort* g_port = nullptr;
bool g_trace = false;

// Reads the input; past its end every read is 0.
struct Reader {
  const uint8_t* p;
  size_t n;
  size_t off = 0;
  bool more() const { return off < n; }
  uint8_t u8() { return off < n ? p[off++] : 0; }
  uint32_t u32() { return uint32_t(u8()) | uint32_t(u8()) << 8 | uint32_t(u8()) << 16 | uint32_t(u8()) << 24; }
};

// The consumer: the ids it owns (created, or given by kConnectRequest), and
// the connect requests it has not answered yet.
struct Consumer {
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  std::vector<CmId*> owned;
  std::vector<CmId*> pending;

  void forget(CmId* id) {
    std::erase(owned, id);
    std::erase(pending, id);
  }
  QpInitAttr qp_attr(const CmId* id, bool uc = false) const {
    QpInitAttr ia;
    ia.send_cq = cq;
    ia.recv_cq = cq;
    ia.cap.max_send_wr = 4;
    ia.cap.max_recv_wr = 4;
    ia.qp_type = id->ps == CmPortSpace::kUdp ? QpType::kUd : uc ? QpType::kUc : QpType::kRc;
    return ia;
  }
  // What librdmacm's examples do with each event.
  void on_event(const CmEvent& ev) {
    switch (ev.event) {
      case CmEventType::kAddrResolved:
        (void)cm_resolve_route(ev.id, 2000);
        return;
      case CmEventType::kRouteResolved:
        if (cm_create_qp(ev.id, pd, qp_attr(ev.id)).ok()) (void)cm_connect(ev.id, CmConnParam{});
        return;
      case CmEventType::kConnectRequest:
        FUZZ_CHECK(ev.id && ev.listen_id);
        if (owned.size() >= kMaxOwned) {  // as a busy server: refuse, and let the id go
          (void)cm_reject(ev.id, nullptr, 0);
          (void)cm_destroy_id(ev.id);
          return;
        }
        owned.push_back(ev.id);
        pending.push_back(ev.id);
        return;
      case CmEventType::kAddrError:
      case CmEventType::kRouteError:
      case CmEventType::kConnectResponse:
      case CmEventType::kConnectError:
      case CmEventType::kUnreachable:
      case CmEventType::kRejected:
      case CmEventType::kEstablished:
      case CmEventType::kDisconnected:
      case CmEventType::kDeviceRemoval:
      case CmEventType::kMulticastJoin:
      case CmEventType::kMulticastError:
      case CmEventType::kAddrChange:
      case CmEventType::kTimewaitExit:
        FUZZ_CHECK(ev.id && std::find(owned.begin(), owned.end(), ev.id) != owned.end());  // only about live ids
        return;
    }
  }
};

uint32_t live_qps(const Context& ctx) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < ctx.qps.capacity(); ++i) n += ctx.qps.at(i) != nullptr;
  return n;
}

// Polls and takes every CM event until nothing more happens (an ARP answer,
// then address and route events, then the REQ take a few rounds), then checks
// the ownership invariants.
void settle(Consumer& c, uint64_t now) {
  for (int round = 0; round < 8; ++round) {
    poll(c.ctx, now);
    CmEvent ev;
    bool any = false;
    while (cm_get_event(c.ctx, &ev)) {
      if (g_port->trace) std::fprintf(stderr, "  event: %s\n", cm_event_str(ev.event));
      c.on_event(ev);
      any = true;
    }
    if (round >= 3 && !any && g_port->idle()) break;  // resolve_addr's ARP request leaves one poll late
  }
  FUZZ_CHECK(cm_id_count(c.ctx) == c.owned.size());
  uint32_t qps = 0;
  for (CmId* id : c.owned) qps += id->qp != nullptr;
  FUZZ_CHECK(live_qps(*c.ctx) == qps);
}

// The frame of a MAD from the peer to our QP1.
size_t frame_mad(std::span<const uint8_t> mad, bool bad_qkey, bool short_payload, uint32_t psn,
                 std::array<uint8_t, 512>& out) {
  wire::PacketDesc d;
  d.dst_mac = kOurMac;
  d.src_mac = kPeerMac;
  d.sgid = Gid::from_ipv4(kPeerIp);
  d.dgid = Gid::from_ipv4(kOurIp);
  d.udp_sport = 0xc001;
  set_gsi_framing(d);
  d.psn = psn;
  if (bad_qkey) d.deth_qkey = 0x80010001;
  if (short_payload) d.payload_len = kMadBytes - 1;
  d.pad = wire::pad_for(d.payload_len);
  return wire::build(d, mad.first(d.payload_len), out);
}

// The CM's own verdict on a MAD, as gsi_rx must count it.
enum class Verdict : uint8_t { kFraming, kUnsupported, kMalformed, kValid };
Verdict expected(std::span<const uint8_t> mad, bool bad_framing) {
  if (bad_framing) return Verdict::kFraming;
  CmMad m;
  const CmError e = decode(mad, m);
  if (e == CmError::kUnknownAttr || e == CmError::kNotCm || e == CmError::kBadMethod) return Verdict::kUnsupported;
  return e == CmError::kOk ? Verdict::kValid : Verdict::kMalformed;
}

struct Injector {
  Consumer& c;
  std::array<uint8_t, 512> last{};
  size_t last_len = 0;
  Verdict last_verdict = Verdict::kValid;
  uint32_t psn = 0;

  // Injects a frame, polls, and checks that the CM counted it as it must.
  // busy: the consumer takes no events (they stay queued; no ownership check).
  void send(std::span<const uint8_t> frame, Verdict v, uint64_t now, bool busy = false) {
    if (g_port->trace) {
      wire::PacketDesc d;
      if (wire::parse(frame, d) == wire::ParseError::kOk) {
        std::fprintf(stderr, "  rcvd: %s\n", describe_cm(d, frame.subspan(d.payload_off, d.payload_len))->c_str());
      }
    }
    // Before the first cm_create_id the context has no QP1: the engine counts
    // the frame as rx_drop_unknown_qp and the CM sees nothing.
    const bool qp1 = uroce::cm::find_agent(*c.ctx) != nullptr;
    const CmCounters before = query_cm_counters(c.ctx);
    const uint64_t unknown_qp = query_counters(c.ctx).get(Counter::rx_drop_unknown_qp);
    g_port->inject(frame);
    if (busy) {
      for (int i = 0; i < 4; ++i) poll(c.ctx, now);
    } else {
      settle(c, now);
    }
    const CmCounters after = query_cm_counters(c.ctx);
    auto delta = [&](CmCounter k) { return after.get(k) - before.get(k); };
    FUZZ_CHECK(delta(CmCounter::mad_rcvd) == qp1);
    FUZZ_CHECK(query_counters(c.ctx).get(Counter::rx_drop_unknown_qp) - unknown_qp == !qp1);
    FUZZ_CHECK(delta(CmCounter::mad_drop_framing) == (qp1 && v == Verdict::kFraming));
    FUZZ_CHECK(delta(CmCounter::mad_drop_unsupported) == (qp1 && v == Verdict::kUnsupported));
    FUZZ_CHECK(delta(CmCounter::mad_drop_malformed) == (qp1 && v == Verdict::kMalformed));
    std::memcpy(last.data(), frame.data(), frame.size());
    last_len = frame.size();
    last_verdict = v;
  }
};

// A MAD of attribute attr whose fields come from seed, fixed up as fix asks.
std::array<uint8_t, kMadBytes> make_mad(CmAttr attr, uint8_t fix, const uint8_t (&seed)[16], const Consumer& c,
                                         uint8_t conv_pick) {
  std::array<uint8_t, kMadBytes> raw{};
  // Fields from the seed: the 16 bytes repeated over the body, varied per position.
  for (size_t i = kMadHdrBytes; i < kMadBytes; ++i) raw[i] = uint8_t(seed[i % 16] ^ (i * 37));
  raw[0] = kMgmtBaseVersion;
  raw[1] = kMgmtClassCm;
  raw[2] = kCmClassVersion;
  raw[3] = kMadMethodSend;
  raw[16] = uint8_t(uint16_t(attr) >> 8);
  raw[17] = uint8_t(attr);
  for (int i = 8; i < 16; ++i) raw[size_t(i)] = seed[i];  // TID
  const Conv conv = g_port->convs.empty() ? Conv{} : g_port->convs[conv_pick % g_port->convs.size()];
  const uint64_t sid_tcp = rdma_cm_service_id(PortSpace::kTcp, kPorts[seed[0] & 1]);
  const uint64_t sid_udp = rdma_cm_service_id(PortSpace::kUdp, kPorts[seed[0] & 1]);
  auto cma = [&](std::span<uint8_t> pd) {
    CmaHdrDesc h;
    h.ip_version = 4;
    h.src_port = uint16_t(0xc000 | seed[1]);
    std::memcpy(h.src_addr.data() + 12, kPeerIp, 4);
    std::memcpy(h.dst_addr.data() + 12, kOurIp, 4);
    (void)encode_cma_hdr(h, pd);
  };
  if (fix & 0x08) {  // the length fields decode checks (REJ, SIDR REP: at most 72)
    if (attr == CmAttr::kRej) raw[kMadHdrBytes + offsetof(RejMsg, info_byte)] &= 0x01;
    if (attr == CmAttr::kSidrRep) raw[kMadHdrBytes + offsetof(SidrRepMsg, info_length)] %= 73;
  }
  CmMad m;
  if (decode(raw, m) == CmError::kOk) {
    std::visit(
        [&](auto& b) {
          using T = std::decay_t<decltype(b)>;
          if constexpr (std::is_same_v<T, ReqDesc>) {
            if (fix & 0x02) b.local_comm_id = conv.peer ? conv.peer : b.local_comm_id;
            if (fix & 0x04) {
              b.service_id = sid_tcp;
              cma(b.private_data);
              b.transport_service_type = seed[2] & 1;  // RC or UC
              b.path_mtu = 3;
              b.pkey = 0xffff;
              b.local_qpn = kPeerQpns[seed[3] & 1];
              b.local_ca_guid = kPeerGuids[seed[4] & 1];
              b.primary.local_gid = Gid::from_ipv4(kPeerIp);
              b.primary.remote_gid = Gid::from_ipv4(kOurIp);
              b.remote_cm_response_timeout = uint8_t(seed[5] & 0x1f);
              b.local_cm_response_timeout = uint8_t(seed[6] & 0x1f);
              b.max_cm_retries = uint8_t(seed[7] & 0x0f);
            }
          } else if constexpr (std::is_same_v<T, SidrReqDesc>) {
            if (fix & 0x04) {
              b.service_id = sid_udp;
              b.pkey = 0xffff;
              cma(b.private_data);
            }
          } else if constexpr (std::is_same_v<T, SidrRepDesc>) {
            if (fix & 0x01) b.request_id = conv.ours;
            if (fix & 0x04) {  // IBA 12.11.2: status 0, the server's QPN and Q_Key
              b.status = 0;
              b.qpn = kPeerQpns[seed[3] & 1];
              b.qkey = kRdmaUdpQkey;
              b.service_id = sid_udp;
            }
          } else {
            if (fix & 0x01) b.remote_comm_id = conv.ours;
            if (fix & 0x02) b.local_comm_id = conv.peer ? conv.peer : b.local_comm_id;
            if constexpr (std::is_same_v<T, DreqDesc>) {
              if (fix & 0x08) b.remote_qpn = conv.our_qpn;
            }
            if constexpr (std::is_same_v<T, RepDesc>) {
              if (fix & 0x04) {
                b.local_qpn = kPeerQpns[seed[3] & 1];
                b.local_ca_guid = kPeerGuids[seed[4] & 1];
              }
            }
          }
        },
        m.body);
    std::array<uint8_t, kMadBytes> out{};
    if (encode(m, out) == CmError::kOk) raw = out;
  }
  if (fix & 0x40) raw[seed[15] & 3] = seed[14];  // base version, class, class version or method
  if (fix & 0x80) raw[seed[13]] = seed[12];       // any byte, any field
  (void)c;
  return raw;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!init_eal_unpinned().ok()) uroce::fuzz::fail(kFuzzTarget, "init_eal");  // run.sh runs fuzzers side by side
  auto pool = create_frame_pool("fuzz_cm_protocol", kPoolFrames);
  if (!pool.ok()) uroce::fuzz::fail(kFuzzTarget, "create_frame_pool");
  g_port = new FuzzPort(*pool);
  g_trace = std::getenv("FUZZ_CM_TRACE") != nullptr;
  g_port->trace = g_trace;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t now = 1'000'000'000;
  {
    DeviceConfig cfg;
    cfg.mac = kOurMac;
    cfg.gid = Gid::from_ipv4(kOurIp);
    cfg.max_qp = 32;
    cfg.max_mr = 2;
    cfg.max_cq = 2;
    cfg.max_srq = 1;
    cfg.max_pd = 2;
    cfg.max_ah = 2;
    cfg.key_seed = 0x5eed;
    auto ctx = open_device(*g_port, cfg);
    if (!ctx.ok()) uroce::fuzz::fail(kFuzzTarget, "open_device");
    Consumer c;
    c.ctx = ctx->get();
    c.pd = alloc_pd(c.ctx).value();
    c.cq = create_cq(c.ctx, 256).value();
    Injector inj{c};
    std::array<uint8_t, 512> frame{};
    Reader r{data, size};
    bool busy = false;  // the last operation left the events queued
    while (r.more()) {
      const uint8_t op = r.u8() % 10;
      busy = false;
      switch (op) {
        case 0: {  // listen
          const uint8_t a = r.u8();
          if (c.owned.size() >= kMaxOwned) break;
          auto id = cm_create_id(c.ctx, nullptr, (a & 1) ? CmPortSpace::kUdp : CmPortSpace::kTcp);
          if (!id.ok()) break;
          c.owned.push_back(*id);
          if (cm_bind_addr(*id, SockAddr{Gid{}, kPorts[(a >> 1) & 1]}).ok()) (void)cm_listen(*id, 4);
          break;
        }
        case 1: {  // connect
          const uint8_t a = r.u8();
          if (c.owned.size() >= kMaxOwned) break;
          auto id = cm_create_id(c.ctx, nullptr, (a & 1) ? CmPortSpace::kUdp : CmPortSpace::kTcp);
          if (!id.ok()) break;
          c.owned.push_back(*id);
          (void)cm_resolve_addr(*id, nullptr, SockAddr{Gid::from_ipv4(kPeerIp), kPorts[(a >> 1) & 1]}, 2000);
          for (int ms = 0; ms < 4; ++ms) {  // the consumer waits: ARP, address and route, REQ / SIDR REQ
            now += 1'000'000;
            settle(c, now);
          }
          break;
        }
        case 2:
        case 3: {  // accept / reject a pending request
          const uint8_t a = r.u8();
          if (c.pending.empty()) break;
          CmId* id = c.pending[a % c.pending.size()];
          std::erase(c.pending, id);
          if (op == 3) {
            (void)cm_reject(id, "no", 3);
          } else if (cm_create_qp(id, c.pd, c.qp_attr(id, a & 0x80)).ok()) {
            (void)cm_accept(id, CmConnParam{});
          }
          break;
        }
        case 4:
        case 5: {  // disconnect / destroy an owned id
          const uint8_t a = r.u8();
          if (c.owned.empty()) break;
          CmId* id = c.owned[a % c.owned.size()];
          if (op == 4) {
            (void)cm_disconnect(id);
          } else {
            FUZZ_CHECK(cm_destroy_id(id).ok());
            c.forget(id);
          }
          break;
        }
        case 6: {  // inject a MAD
          const uint8_t attr = r.u8(), fix = r.u8();
          uint8_t seed[16];
          for (uint8_t& s : seed) s = r.u8();
          const auto mad = make_mad(kAttrs[(attr & 15) % 9], fix, seed, c, uint8_t(attr >> 4 & 7));
          const bool bad_framing = fix & 0x30;
          const size_t len = frame_mad(mad, fix & 0x10, fix & 0x20, inj.psn++, frame);
          FUZZ_CHECK(len > 0);
          busy = attr & 0x80;
          inj.send(std::span<const uint8_t>(frame.data(), len), expected(mad, bad_framing), now, busy);
          break;
        }
        case 7:  // the last frame again
          if (inj.last_len) {
            const std::array<uint8_t, 512> copy = inj.last;
            inj.send(std::span<const uint8_t>(copy.data(), inj.last_len), inj.last_verdict, now);
          }
          break;
        case 8:  // timers
          now += 1000ull << (r.u8() % 27);
          break;
        case 9: {  // one of our own MADs, back from the peer
          const uint8_t a = r.u8();
          if (g_port->sent.empty()) break;
          const auto mad = g_port->sent[a % g_port->sent.size()];
          const size_t len = frame_mad(mad, false, false, inj.psn++, frame);
          inj.send(std::span<const uint8_t>(frame.data(), len), expected(mad, false), now);
          break;
        }
        default:
          break;
      }
      if (!busy) settle(c, now);
    }
    settle(c, now);  // the events a busy last operation left
    if (g_trace) {  // FUZZ_CM_TRACE=1: what the input reached (replay a corpus with -runs=0 to see it)
      const CmCounters cc = query_cm_counters(c.ctx);
      std::fprintf(stderr, "fuzz_cm_protocol: %zu ops bytes, ids %zu:", size, c.owned.size());
      for (size_t i = 0; i < size_t(CmCounter::kCount); ++i) {
        if (cc.v[i]) std::fprintf(stderr, " %s=%llu", kCmCounterNames[i], (unsigned long long)cc.v[i]);
      }
      std::fprintf(stderr, "\n");
    }
    // Teardown: the consumer destroys what it owns; then 10 minutes of
    // timers (retries, time wait) in 1 s steps. Nothing may remain.
    while (!c.owned.empty()) {
      FUZZ_CHECK(cm_destroy_id(c.owned.back()).ok());
      c.forget(c.owned.back());
    }
    for (int s = 0; s < 3; ++s) {  // few big steps: each walks the timer wheels
      now += 200'000'000'000ull;
      settle(c, now);
    }
    FUZZ_CHECK(cm_id_count(c.ctx) == 0);
    FUZZ_CHECK(live_qps(*c.ctx) == 0);
    (void)destroy_cq(c.cq);
    (void)dealloc_pd(c.pd);
    g_port->reset();
  }  // close_device
  FUZZ_CHECK(rte_mempool_avail_count(g_port->pool()) == kPoolFrames);
  return 0;
}
