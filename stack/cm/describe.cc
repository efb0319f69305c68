// One-line descriptions of CM MADs on QP1 (IBA 12.6, 13.5).
#include "stack/cm/describe.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>

#include "stack/cm/ip_cm.h"
#include "stack/wire/opcodes.h"

namespace uroce::cm {

namespace {

void appendf(std::string& s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& s, const char* fmt, ...) {
  char buf[160];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0) s.append(buf, size_t(n) < sizeof(buf) ? size_t(n) : sizeof(buf) - 1);
}

void append_addr(std::string& s, uint8_t ip_version, const std::array<uint8_t, 16>& a) {
  if (ip_version == 4) {
    const uint8_t* p = a.data() + kCmaIpv4AddrOffset;
    appendf(s, "%u.%u.%u.%u", p[0], p[1], p[2], p[3]);
    return;
  }
  s += '[';
  for (size_t i = 0; i < 16; i += 2) appendf(s, i ? ":%x" : "%x", unsigned(a[i] << 8 | a[i + 1]));
  s += ']';
}

void append_service_id(std::string& s, uint64_t sid) {
  appendf(s, " sid=0x%016" PRIx64, sid);
  if (!is_ip_cm_service_id(sid)) return;
  const char* ps = nullptr;
  switch (PortSpace(service_id_port_space(sid))) {
    case PortSpace::kTcp: ps = "tcp"; break;
    case PortSpace::kUdp: ps = "udp"; break;
    case PortSpace::kIb: ps = "ib"; break;
    case PortSpace::kIpoib: break;
  }
  if (ps) {
    appendf(s, "(%s:%u)", ps, service_id_port(sid));
  } else {
    appendf(s, "(ps=0x%04x:%u)", service_id_port_space(sid), service_id_port(sid));
  }
}

// rdma_cm puts its header at the start of REQ (and SIDR_REQ) private data
// when the service ID is an IP CM one.
void append_cma(std::string& s, uint64_t sid, std::span<const uint8_t> pd) {
  if (!is_ip_cm_service_id(sid)) return;
  CmaHdrDesc h;
  const CmError e = decode_cma_hdr(pd, h);
  if (e != CmError::kOk) {
    appendf(s, " cma=%.*s", int(cm_error_name(e).size()), cm_error_name(e).data());
    return;
  }
  s += ' ';
  append_addr(s, h.ip_version, h.src_addr);
  appendf(s, ":%u->", h.src_port);
  append_addr(s, h.ip_version, h.dst_addr);
  appendf(s, ":%u", service_id_port(sid));
}

void append_body(std::string& s, const CmBody& body) {
  if (const auto* req = std::get_if<ReqDesc>(&body)) {
    appendf(s, " lcid=0x%08x", req->local_comm_id);
    append_service_id(s, req->service_id);
    appendf(s, " qpn=0x%06x psn=0x%06x pkey=0x%04x mtu=%u rr=%u id=%u", req->local_qpn, req->starting_psn,
            req->pkey, req->path_mtu, req->responder_resources, req->initiator_depth);
    append_cma(s, req->service_id, req->private_data);
  } else if (const auto* rep = std::get_if<RepDesc>(&body)) {
    appendf(s, " lcid=0x%08x rcid=0x%08x qpn=0x%06x psn=0x%06x rr=%u id=%u", rep->local_comm_id,
            rep->remote_comm_id, rep->local_qpn, rep->starting_psn, rep->responder_resources,
            rep->initiator_depth);
  } else if (const auto* rtu = std::get_if<RtuDesc>(&body)) {
    appendf(s, " lcid=0x%08x rcid=0x%08x", rtu->local_comm_id, rtu->remote_comm_id);
  } else if (const auto* dreq = std::get_if<DreqDesc>(&body)) {
    appendf(s, " lcid=0x%08x rcid=0x%08x rqpn=0x%06x", dreq->local_comm_id, dreq->remote_comm_id,
            dreq->remote_qpn);
  } else if (const auto* drep = std::get_if<DrepDesc>(&body)) {
    appendf(s, " lcid=0x%08x rcid=0x%08x", drep->local_comm_id, drep->remote_comm_id);
  } else if (const auto* rej = std::get_if<RejDesc>(&body)) {
    appendf(s, " lcid=0x%08x rcid=0x%08x msg=%u reason=%u ari_len=%u", rej->local_comm_id,
            rej->remote_comm_id, rej->message_rejected, rej->reason, rej->ari_length);
  } else if (const auto* mra = std::get_if<MraDesc>(&body)) {
    appendf(s, " lcid=0x%08x rcid=0x%08x msg=%u timeout=%u", mra->local_comm_id, mra->remote_comm_id,
            mra->message_mraed, mra->service_timeout);
  } else if (const auto* sreq = std::get_if<SidrReqDesc>(&body)) {
    appendf(s, " reqid=0x%08x pkey=0x%04x", sreq->request_id, sreq->pkey);
    append_service_id(s, sreq->service_id);
    append_cma(s, sreq->service_id, sreq->private_data);
  } else if (const auto* srep = std::get_if<SidrRepDesc>(&body)) {
    appendf(s, " reqid=0x%08x status=%u qpn=0x%06x qkey=0x%08x", srep->request_id, srep->status, srep->qpn,
            srep->qkey);
    append_service_id(s, srep->service_id);
  }
}

}  // namespace

bool is_gsi_packet(const wire::PacketDesc& d) {
  return d.opcode == wire::kUdSendOnly && d.dest_qp == kGsiQpn;
}

void set_gsi_framing(wire::PacketDesc& d) {
  d.opcode = wire::kUdSendOnly;
  d.pkey = kDefaultPkeyFull;
  d.dest_qp = kGsiQpn;
  d.deth_qkey = kGsiQkey;
  d.deth_src_qp = kGsiQpn;
  d.payload_len = kMadBytes;
  d.pad = 0;
}

std::string describe_cm_mad(std::span<const uint8_t> mad) {
  std::string s = "CM";
  MadHdrDesc hdr;
  if (decode_mad_hdr(mad, hdr) != CmError::kOk) {
    appendf(s, " malformed(short) len=%zu", mad.size());
    return s;
  }
  const std::string_view name = cm_attr_long_name(hdr.attr_id);
  if (name.empty()) {
    appendf(s, " attr=0x%04x", hdr.attr_id);
  } else {
    appendf(s, " %.*s", int(name.size()), name.data());
  }
  CmMad m;
  const CmError e = decode(mad, m);
  if (e != CmError::kOk) {
    appendf(s, " malformed(%.*s) len=%zu", int(cm_error_name(e).size()), cm_error_name(e).data(), mad.size());
  }
  appendf(s, " tid=0x%016" PRIx64, hdr.tid);
  if (e == CmError::kOk) append_body(s, m.body);
  return s;
}

std::optional<std::string> describe_cm(const wire::PacketDesc& d, std::span<const uint8_t> payload) {
  if (!is_gsi_packet(d)) return std::nullopt;
  if (payload.size() >= 2 && payload[1] != kMgmtClassCm) return std::nullopt;  // SA, PerfMgt, ...
  std::string s = describe_cm_mad(payload);
  if (d.deth_qkey != kGsiQkey) appendf(s, " qkey=0x%08x", d.deth_qkey);
  return s;
}

}  // namespace uroce::cm
