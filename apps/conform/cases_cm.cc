// The cases of the target's connection manager (IBA chapter 12) on QP1: the
// tester sends CM MADs built with the stack's CM encoder (stack/cm/mad.h),
// one field wrong, to the target's rdma_cm listener (docs/CONFORMANCE.md).
#include <array>
#include <optional>

#include "apps/common/launch.h"
#include "apps/conform/checks.h"
#include "apps/conform/conform.h"
#include "stack/cm/agent.h"
#include "stack/cm/ip_cm.h"
#include "stack/cm/mad.h"

namespace uroce::apps::conform {

namespace {

constexpr uint32_t kOurCommId = 0x5a5a0000;  // + the case's QPN
constexpr uint64_t kOurCaGuid = 0x02000000c0020000;
constexpr uint64_t kTid = 0x0000c0f0000000aa;

/// A well-formed RC REQ from our QP to service_id on the target.
cm::ReqDesc make_req(const Tester& t, uint64_t service_id) {
  cm::ReqDesc r;
  r.local_comm_id = kOurCommId + t.our_qpn();
  r.service_id = service_id;
  r.local_ca_guid = kOurCaGuid;
  r.local_qpn = t.our_qpn();
  r.responder_resources = 1;
  r.initiator_depth = 1;
  r.remote_cm_response_timeout = 20;
  r.starting_psn = t.psn();
  r.local_cm_response_timeout = 20;
  r.retry_count = 7;
  r.pkey = 0xffff;
  r.path_mtu = 3;  // 1024
  r.rnr_retry_count = 7;
  r.max_cm_retries = 1;
  r.primary.local_lid = 0xffff;
  r.primary.remote_lid = 0xffff;
  r.primary.local_gid = t.req(0).sgid;
  r.primary.remote_gid = t.target().gid;
  r.primary.hop_limit = 64;
  r.primary.local_ack_timeout = cm::kCmLocalAckTimeout;
  return r;
}

/// Sends body as a CM MAD; false (with out set to an error) if it does not encode.
bool send_cm(Tester& t, const cm::CmBody& body, Outcome& out) {
  cm::CmMad m;
  m.hdr.tid = kTid;
  m.hdr.attr_id = uint16_t(cm::cm_attr_of(body));
  m.body = body;
  std::array<uint8_t, cm::kMadBytes> buf{};
  if (cm::encode(m, buf) != cm::CmError::kOk) {
    out = error("the CM encoder refused the case's MAD");
    return false;
  }
  t.send_mad(buf);
  return true;
}

/// The CM MADs among rs, decoded; what else came goes to text.
std::vector<cm::CmMad> cm_mads(std::span<const Reply> rs, std::string& text) {
  std::vector<cm::CmMad> out;
  for (const Reply& r : rs) {
    cm::CmMad m;
    if (r.d.dest_qp == wire::kGsiQpn && cm::decode(r.payload, m) == cm::CmError::kOk) {
      out.push_back(m);
      text += (text.empty() ? "" : "; ") + std::string(cm::cm_attr_long_name(m.hdr.attr_id));
      if (const auto* j = std::get_if<cm::RejDesc>(&m.body)) text += strf(" reason %u", j->reason);
    } else {
      text += (text.empty() ? "" : "; ") + describe(std::span(&r, 1));
    }
  }
  if (text.empty()) text = "nothing";
  return out;
}

/// One REJ of our REQ with reason want, else what came.
Outcome expect_rej(Tester& t, uint16_t want) {
  std::string text;
  const auto mads = cm_mads(t.collect(1), text);
  const auto* j = mads.size() == 1 ? std::get_if<cm::RejDesc>(&mads[0].body) : nullptr;
  if (!j || j->remote_comm_id != kOurCommId + t.our_qpn() || j->message_rejected != cm::kCmMsgReq ||
      mads[0].hdr.tid != kTid) {
    return deviates(text + strf(" (want one REJ of the REQ, reason %u)", want));
  }
  if (j->reason != want) return deviates(text + strf(" (want reason %u)", want));
  return conforms(text + ", rejecting the REQ (our comm ID and TID)");
}

// Send: an RC REQ to a service ID nobody listens on (the listener's port + 1).
// Expect: REJ, MessageRejected REQ, reason 8 (Invalid Service ID).
Outcome req_unknown_service(Tester& t) {
  if (!t.target().cm_port) return {Verdict::kNotApplicable, "the helper runs no rdma_cm listener"};
  Outcome out;
  const uint16_t port = uint16_t(t.target().cm_port + 1);
  if (!send_cm(t, make_req(t, cm::rdma_cm_service_id(cm::PortSpace::kTcp, port)), out)) return out;
  return expect_rej(t, cm::kRejInvalidServiceId);
}

// Send: a REQ to the listening service whose transport service type is RD (2).
// Expect: REJ, MessageRejected REQ, reason 9 (Invalid Transport Service Type).
Outcome req_bad_transport(Tester& t) {
  if (!t.target().cm_port) return {Verdict::kNotApplicable, "the helper runs no rdma_cm listener"};
  Outcome out;
  cm::ReqDesc r = make_req(t, cm::rdma_cm_service_id(cm::PortSpace::kTcp, t.target().cm_port));
  r.transport_service_type = 2;
  if (!send_cm(t, r, out)) return out;
  return expect_rej(t, cm::kRejInvalidTransportType);
}

// Send: a DREQ naming comm IDs no connection of the target has.
// Expect: a DREP with the comm IDs swapped back, so that our disconnect completes.
Outcome dreq_unknown_connection(Tester& t) {
  if (!t.target().cm_port) return {Verdict::kNotApplicable, "the helper runs no rdma_cm listener"};
  Outcome out;
  cm::DreqDesc d;
  d.local_comm_id = kOurCommId + t.our_qpn();
  d.remote_comm_id = 0x00c0ffee;
  d.remote_qpn = t.target().qpn;
  if (!send_cm(t, d, out)) return out;
  std::string text;
  const auto mads = cm_mads(t.collect(1), text);
  const auto* p = mads.size() == 1 ? std::get_if<cm::DrepDesc>(&mads[0].body) : nullptr;
  if (!p || p->local_comm_id != d.remote_comm_id || p->remote_comm_id != d.local_comm_id) {
    return deviates(text + " (want one DREP with the DREQ's comm IDs swapped)");
  }
  return conforms(text + " with the DREQ's comm IDs swapped");
}

/// The connection requests the target's listener handed its consumer, or an error.
std::optional<int> conn_requests(Tester& t, Outcome& out) {
  TargetState st;
  std::string err;
  if (!t.state(st, err)) {
    out = error(err);
    return std::nullopt;
  }
  if (st.conn_requests < 0) {
    out = error("the helper does not report connection requests (creq=)");
    return std::nullopt;
  }
  return st.conn_requests;
}

// Send: an RC REQ to the listener with rdma_cm's private data (the CMA
// header: IPv4, our address and a port, the target's address), so that it
// reaches REQ Rcvd and the consumer gets a connection request (which the
// helper leaves unanswered); then the same REQ again (same comm ID, CA GUID
// and TID), as a sender whose CM response timeout ran out sends it.
// Expect: to the duplicate one MRA of the REQ (or a REP, had the consumer
// accepted), never a REJ; still one connection request at the consumer.
Outcome duplicate_req(Tester& t) {
  if (!t.target().cm_port) return {Verdict::kNotApplicable, "the helper runs no rdma_cm listener"};
  Outcome out;
  cm::ReqDesc r = make_req(t, cm::rdma_cm_service_id(cm::PortSpace::kTcp, t.target().cm_port));
  const cm::CmaHdrDesc hdr = cm::cma_hdr_ipv4(t.req(0).sgid.raw + 12, uint16_t(0xc000 | (t.our_qpn() & 0x3fff)),
                                              t.target().gid.raw + 12);
  if (cm::encode_cma_hdr(hdr, r.private_data) != cm::CmError::kOk) return error("the CMA header does not encode");
  if (!send_cm(t, r, out)) return out;
  std::string text;
  const auto first = cm_mads(t.collect(0), text);
  for (const cm::CmMad& m : first) {
    if (std::holds_alternative<cm::RejDesc>(m.body)) return deviates("the REQ with rdma_cm's private data got: " + text);
  }
  const auto before = conn_requests(t, out);
  if (!before) return out;
  if (*before != 1) return deviates(strf("after the REQ (answered: %s) the consumer has %d connection requests, want 1", text.c_str(), *before));
  if (!send_cm(t, r, out)) return out;
  std::string dup_text;
  const auto dup = cm_mads(t.collect(1), dup_text);
  const uint32_t ours = kOurCommId + t.our_qpn();
  const auto* mra = dup.size() == 1 ? std::get_if<cm::MraDesc>(&dup[0].body) : nullptr;
  const auto* rep = dup.size() == 1 ? std::get_if<cm::RepDesc>(&dup[0].body) : nullptr;
  const bool ok = (mra && mra->remote_comm_id == ours && mra->message_mraed == cm::kCmMsgReq) ||
                  (rep && rep->remote_comm_id == ours);
  if (!ok) return deviates("to the duplicate REQ: " + dup_text + " (want one MRA of the REQ or a REP, for our comm ID)");
  const auto after = conn_requests(t, out);
  if (!after) return out;
  if (*after != 1) return deviates(dup_text + strf(" to the duplicate, but the consumer has %d connection requests, want 1", *after));
  return conforms("to the REQ: " + text + "; to its duplicate: " + dup_text + " for our comm ID; one connection request at the consumer");
}

constexpr Case kCases[] = {
    {.name = "cm.req_unknown_service", .group = "cm",
     .rule = "IBA 12.6.7.2 Table 109: a REQ for a service no one listens on is rejected, reason 8 (Invalid Service ID)",
     .expect = "REJ of the REQ (our comm ID, TID), reason 8", .brk = Break::kTxRejConsumer,
     .run = req_unknown_service},
    {.name = "cm.req_bad_transport", .group = "cm",
     .rule = "IBA 12.6.7.2 Table 109: a REQ with a transport service type the listener lacks (RD) is rejected, reason 9",
     .expect = "REJ of the REQ (our comm ID, TID), reason 9", .brk = Break::kTxRejConsumer,
     .run = req_bad_transport},
    {.name = "cm.dreq_unknown_connection", .group = "cm",
     .rule = "IBA 12.9.8.5: a DREQ for a connection the CM does not know is still answered with a DREP",
     .expect = "DREP with the DREQ's comm IDs swapped", .brk = Break::kTxNoCmAnswer,
     .run = dreq_unknown_connection},
    {.name = "cm.duplicate_req", .group = "cm",
     .rule = "IBA 12.9.8.1 (a duplicate REQ, same comm ID and CA GUID: the REP or MRA sent again), 12.6.5 (MRA)",
     .expect = "a REQ with rdma_cm private data, then again: one MRA (or REP) to the duplicate, no REJ; one connection request",
     .brk = Break::kTxNoCmAnswer, .run = duplicate_req},
};

}  // namespace

std::span<const Case> cm_cases() { return kCases; }

}  // namespace uroce::apps::conform
