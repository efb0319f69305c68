// Encode and decode CM MADs (IBA 12.6, 13.4.2). See mad.h for the contract.
#include "stack/cm/mad.h"

#include <cstring>
#include <type_traits>

namespace uroce::cm {

namespace {

struct AttrNames {
  uint16_t id;
  std::string_view short_name;
  std::string_view long_name;  // as Wireshark's InfiniBand dissector names it
};

constexpr std::array<AttrNames, 12> kAttrNames = {{
    {uint16_t(CmAttr::kClassPortInfo), "ClassPortInfo", "ClassPortInfo"},
    {uint16_t(CmAttr::kReq), "REQ", "ConnectRequest"},
    {uint16_t(CmAttr::kMra), "MRA", "MsgRcptAck"},
    {uint16_t(CmAttr::kRej), "REJ", "ConnectReject"},
    {uint16_t(CmAttr::kRep), "REP", "ConnectReply"},
    {uint16_t(CmAttr::kRtu), "RTU", "ReadyToUse"},
    {uint16_t(CmAttr::kDreq), "DREQ", "DisconnectRequest"},
    {uint16_t(CmAttr::kDrep), "DREP", "DisconnectReply"},
    {uint16_t(CmAttr::kSidrReq), "SIDR_REQ", "ServiceIDResReq"},
    {uint16_t(CmAttr::kSidrRep), "SIDR_REP", "ServiceIDResReqResp"},
    {uint16_t(CmAttr::kLap), "LAP", "LoadAlternatePath"},
    {uint16_t(CmAttr::kApr), "APR", "AlternatePathResponse"},
}};

const AttrNames* find_attr(uint16_t id) {
  for (const auto& a : kAttrNames) {
    if (a.id == id) return &a;
  }
  return nullptr;
}

// Field:24 | byte:8 words.
uint32_t hi24(const be32& w) { return w.get() >> kHi24Shift; }
void set_hi24_lo8(be32& w, uint32_t hi, uint8_t lo) { w.set(hi << kHi24Shift | lo); }

template <size_t N>
void copy_out(std::array<uint8_t, N>& dst, const uint8_t (&src)[N]) {
  std::memcpy(dst.data(), src, N);
}
template <size_t N>
void copy_in(uint8_t (&dst)[N], const std::array<uint8_t, N>& src) {
  std::memcpy(dst, src.data(), N);
}

Gid gid_of(const uint8_t (&raw)[16]) {
  Gid g;
  std::memcpy(g.raw, raw, 16);
  return g;
}

void decode_path(const CmPath& p, CmPathDesc& d) {
  d.local_lid = p.local_lid.get();
  d.remote_lid = p.remote_lid.get();
  d.local_gid = gid_of(p.local_gid);
  d.remote_gid = gid_of(p.remote_gid);
  d.flow_label = path_flow_label(p);
  d.packet_rate = path_packet_rate(p);
  d.traffic_class = p.traffic_class;
  d.hop_limit = p.hop_limit;
  d.sl = uint8_t(p.sl_byte >> kPathSlShift);
  d.subnet_local = p.sl_byte & kPathSubnetLocalBit;
  d.local_ack_timeout = uint8_t(p.ack_byte >> kPathAckTimeoutShift);
}

bool path_in_range(const CmPathDesc& d) {
  return d.flow_label <= kPathFlowLabelMax && d.packet_rate <= kPathPacketRateMask &&
         d.sl <= kPathSlMax && d.local_ack_timeout <= kPathAckTimeoutMax;
}

void encode_path(const CmPathDesc& d, CmPath& p) {
  p.local_lid.set(d.local_lid);
  p.remote_lid.set(d.remote_lid);
  std::memcpy(p.local_gid, d.local_gid.raw, 16);
  std::memcpy(p.remote_gid, d.remote_gid.raw, 16);
  p.flow_word.set(d.flow_label << kPathFlowLabelShift | d.packet_rate);
  p.traffic_class = d.traffic_class;
  p.hop_limit = d.hop_limit;
  p.sl_byte = uint8_t(d.sl << kPathSlShift | (d.subnet_local ? kPathSubnetLocalBit : 0));
  p.ack_byte = uint8_t(d.local_ack_timeout << kPathAckTimeoutShift);
}

}  // namespace

std::string_view cm_attr_short_name(uint16_t attr_id) {
  const AttrNames* a = find_attr(attr_id);
  return a ? a->short_name : std::string_view();
}

std::string_view cm_attr_long_name(uint16_t attr_id) {
  const AttrNames* a = find_attr(attr_id);
  return a ? a->long_name : std::string_view();
}

std::string_view cm_error_name(CmError e) {
  static constexpr std::array<std::string_view, size_t(CmError::kCount)> kNames = {
#define UROCE_NAME(e, s) s,
      UROCE_CM_ERRORS(UROCE_NAME)
#undef UROCE_NAME
  };
  return size_t(e) < kNames.size() ? kNames[size_t(e)] : "invalid";
}

CmAttr cm_attr_of(const CmBody& b) {
  return std::visit([](const auto& d) { return std::decay_t<decltype(d)>::kAttr; }, b);
}

// ---------------------------------------------------------------------------
// Bodies.

CmError decode_body(const ReqMsg& m, ReqDesc& d) {
  d.local_comm_id = m.local_comm_id.get();
  d.service_id = m.service_id.get();
  d.local_ca_guid = m.local_ca_guid.get();
  d.local_qkey = m.local_qkey.get();
  d.local_qpn = req_local_qpn(m);
  d.responder_resources = req_responder_resources(m);
  d.local_eecn = hi24(m.local_eecn_word);
  d.initiator_depth = req_initiator_depth(m);
  const uint32_t re = m.remote_eecn_word.get();
  d.remote_eecn = re >> kHi24Shift;
  d.remote_cm_response_timeout = uint8_t((re & kLo8Mask) >> kReqCmTimeoutShift);
  d.transport_service_type = uint8_t((re >> kReqTransportShift) & kReqTransportMax);
  d.end_to_end_flow_control = re & kReqE2eFlowControlBit;
  const uint32_t psn = m.psn_word.get();
  d.starting_psn = psn >> kHi24Shift;
  d.local_cm_response_timeout = uint8_t((psn & kLo8Mask) >> kReqCmTimeoutShift);
  d.retry_count = uint8_t(psn & kReqRetryCountMax);
  d.pkey = m.pkey.get();
  d.path_mtu = req_path_mtu(m);
  d.rdc_exists = m.mtu_byte & kReqRdcExistsBit;
  d.rnr_retry_count = m.mtu_byte & kReqRnrRetryMax;
  d.max_cm_retries = uint8_t(m.retries_byte >> kReqMaxCmRetriesShift);
  d.srq = m.retries_byte & kReqSrqBit;
  d.extended_transport_type = m.retries_byte & kReqExtTransportMax;
  decode_path(m.primary, d.primary);
  decode_path(m.alternate, d.alternate);
  d.sap_supported = m.alternate.ack_byte & kPathSapSupportedBit;
  copy_out(d.private_data, m.private_data);
  return CmError::kOk;
}

CmError encode_body(const ReqDesc& d, ReqMsg& m) {
  if (d.local_qpn > kHi24Max || d.local_eecn > kHi24Max || d.remote_eecn > kHi24Max ||
      d.starting_psn > kHi24Max || d.remote_cm_response_timeout > kReqCmTimeoutMax ||
      d.transport_service_type > kReqTransportMax || d.local_cm_response_timeout > kReqCmTimeoutMax ||
      d.retry_count > kReqRetryCountMax || d.path_mtu > kReqMtuMax || d.rnr_retry_count > kReqRnrRetryMax ||
      d.max_cm_retries > kReqMaxCmRetriesMax || d.extended_transport_type > kReqExtTransportMax ||
      !path_in_range(d.primary) || !path_in_range(d.alternate)) {
    return CmError::kFieldRange;
  }
  std::memset(&m, 0, sizeof(m));
  m.local_comm_id.set(d.local_comm_id);
  m.service_id.set(d.service_id);
  m.local_ca_guid.set(d.local_ca_guid);
  m.local_qkey.set(d.local_qkey);
  set_hi24_lo8(m.local_qpn_word, d.local_qpn, d.responder_resources);
  set_hi24_lo8(m.local_eecn_word, d.local_eecn, d.initiator_depth);
  set_hi24_lo8(m.remote_eecn_word, d.remote_eecn,
               uint8_t(d.remote_cm_response_timeout << kReqCmTimeoutShift |
                       d.transport_service_type << kReqTransportShift |
                       (d.end_to_end_flow_control ? kReqE2eFlowControlBit : 0)));
  set_hi24_lo8(m.psn_word, d.starting_psn,
               uint8_t(d.local_cm_response_timeout << kReqCmTimeoutShift | d.retry_count));
  m.pkey.set(d.pkey);
  m.mtu_byte = uint8_t(d.path_mtu << kReqMtuShift | (d.rdc_exists ? kReqRdcExistsBit : 0) |
                       d.rnr_retry_count);
  m.retries_byte = uint8_t(d.max_cm_retries << kReqMaxCmRetriesShift | (d.srq ? kReqSrqBit : 0) |
                           d.extended_transport_type);
  encode_path(d.primary, m.primary);
  encode_path(d.alternate, m.alternate);
  if (d.sap_supported) m.alternate.ack_byte |= kPathSapSupportedBit;
  copy_in(m.private_data, d.private_data);
  return CmError::kOk;
}

CmError decode_body(const MraMsg& m, MraDesc& d) {
  d.local_comm_id = m.local_comm_id.get();
  d.remote_comm_id = m.remote_comm_id.get();
  d.message_mraed = uint8_t(m.mraed_byte >> kMsgSelShift);
  d.service_timeout = uint8_t(m.timeout_byte >> kMraServiceTimeoutShift);
  copy_out(d.private_data, m.private_data);
  return CmError::kOk;
}

CmError encode_body(const MraDesc& d, MraMsg& m) {
  if (d.message_mraed > kMsgSelMax || d.service_timeout > kMraServiceTimeoutMax) return CmError::kFieldRange;
  std::memset(&m, 0, sizeof(m));
  m.local_comm_id.set(d.local_comm_id);
  m.remote_comm_id.set(d.remote_comm_id);
  m.mraed_byte = uint8_t(d.message_mraed << kMsgSelShift);
  m.timeout_byte = uint8_t(d.service_timeout << kMraServiceTimeoutShift);
  copy_in(m.private_data, d.private_data);
  return CmError::kOk;
}

CmError decode_body(const RejMsg& m, RejDesc& d) {
  d.ari_length = uint8_t(m.info_byte >> kRejInfoLengthShift);
  if (d.ari_length > kRejAriBytes) return CmError::kBadInfoLength;
  d.local_comm_id = m.local_comm_id.get();
  d.remote_comm_id = m.remote_comm_id.get();
  d.message_rejected = uint8_t(m.msg_byte >> kMsgSelShift);
  d.reason = m.reason.get();
  copy_out(d.ari, m.ari);
  copy_out(d.private_data, m.private_data);
  return CmError::kOk;
}

CmError encode_body(const RejDesc& d, RejMsg& m) {
  if (d.message_rejected > kMsgSelMax || d.ari_length > kRejAriBytes) return CmError::kFieldRange;
  std::memset(&m, 0, sizeof(m));
  m.local_comm_id.set(d.local_comm_id);
  m.remote_comm_id.set(d.remote_comm_id);
  m.msg_byte = uint8_t(d.message_rejected << kMsgSelShift);
  m.info_byte = uint8_t(d.ari_length << kRejInfoLengthShift);
  m.reason.set(d.reason);
  copy_in(m.ari, d.ari);
  copy_in(m.private_data, d.private_data);
  return CmError::kOk;
}

CmError decode_body(const RepMsg& m, RepDesc& d) {
  d.local_comm_id = m.local_comm_id.get();
  d.remote_comm_id = m.remote_comm_id.get();
  d.local_qkey = m.local_qkey.get();
  d.local_qpn = rep_local_qpn(m);
  d.local_eecn = hi24(m.local_eecn_word);
  d.starting_psn = rep_starting_psn(m);
  d.responder_resources = m.responder_resources;
  d.initiator_depth = m.initiator_depth;
  d.target_ack_delay = uint8_t(m.ack_byte >> kRepTargetAckDelayShift);
  d.failover_accepted = uint8_t((m.ack_byte >> kRepFailoverShift) & kRepFailoverMax);
  d.end_to_end_flow_control = m.ack_byte & kRepE2eFlowControlBit;
  d.rnr_retry_count = uint8_t(m.rnr_byte >> kRepRnrRetryShift);
  d.srq = m.rnr_byte & kRepSrqBit;
  d.local_ca_guid = m.local_ca_guid.get();
  copy_out(d.private_data, m.private_data);
  return CmError::kOk;
}

CmError encode_body(const RepDesc& d, RepMsg& m) {
  if (d.local_qpn > kHi24Max || d.local_eecn > kHi24Max || d.starting_psn > kHi24Max ||
      d.target_ack_delay > kRepTargetAckDelayMax || d.failover_accepted > kRepFailoverMax ||
      d.rnr_retry_count > kRepRnrRetryMax) {
    return CmError::kFieldRange;
  }
  std::memset(&m, 0, sizeof(m));
  m.local_comm_id.set(d.local_comm_id);
  m.remote_comm_id.set(d.remote_comm_id);
  m.local_qkey.set(d.local_qkey);
  set_hi24_lo8(m.local_qpn_word, d.local_qpn, 0);
  set_hi24_lo8(m.local_eecn_word, d.local_eecn, 0);
  set_hi24_lo8(m.psn_word, d.starting_psn, 0);
  m.responder_resources = d.responder_resources;
  m.initiator_depth = d.initiator_depth;
  m.ack_byte = uint8_t(d.target_ack_delay << kRepTargetAckDelayShift | d.failover_accepted << kRepFailoverShift |
                       (d.end_to_end_flow_control ? kRepE2eFlowControlBit : 0));
  m.rnr_byte = uint8_t(d.rnr_retry_count << kRepRnrRetryShift | (d.srq ? kRepSrqBit : 0));
  m.local_ca_guid.set(d.local_ca_guid);
  copy_in(m.private_data, d.private_data);
  return CmError::kOk;
}

CmError decode_body(const RtuMsg& m, RtuDesc& d) {
  d.local_comm_id = m.local_comm_id.get();
  d.remote_comm_id = m.remote_comm_id.get();
  copy_out(d.private_data, m.private_data);
  return CmError::kOk;
}

CmError encode_body(const RtuDesc& d, RtuMsg& m) {
  m.local_comm_id.set(d.local_comm_id);
  m.remote_comm_id.set(d.remote_comm_id);
  copy_in(m.private_data, d.private_data);
  return CmError::kOk;
}

CmError decode_body(const DrepMsg& m, DrepDesc& d) {
  d.local_comm_id = m.local_comm_id.get();
  d.remote_comm_id = m.remote_comm_id.get();
  copy_out(d.private_data, m.private_data);
  return CmError::kOk;
}

CmError encode_body(const DrepDesc& d, DrepMsg& m) {
  m.local_comm_id.set(d.local_comm_id);
  m.remote_comm_id.set(d.remote_comm_id);
  copy_in(m.private_data, d.private_data);
  return CmError::kOk;
}

CmError decode_body(const DreqMsg& m, DreqDesc& d) {
  d.local_comm_id = m.local_comm_id.get();
  d.remote_comm_id = m.remote_comm_id.get();
  d.remote_qpn = dreq_remote_qpn(m);
  copy_out(d.private_data, m.private_data);
  return CmError::kOk;
}

CmError encode_body(const DreqDesc& d, DreqMsg& m) {
  if (d.remote_qpn > kHi24Max) return CmError::kFieldRange;
  m.local_comm_id.set(d.local_comm_id);
  m.remote_comm_id.set(d.remote_comm_id);
  set_hi24_lo8(m.remote_qpn_word, d.remote_qpn, 0);
  copy_in(m.private_data, d.private_data);
  return CmError::kOk;
}

CmError decode_body(const SidrReqMsg& m, SidrReqDesc& d) {
  d.request_id = m.request_id.get();
  d.pkey = m.pkey.get();
  d.service_id = m.service_id.get();
  copy_out(d.private_data, m.private_data);
  return CmError::kOk;
}

CmError encode_body(const SidrReqDesc& d, SidrReqMsg& m) {
  m.request_id.set(d.request_id);
  m.pkey.set(d.pkey);
  m.resv6.set(0);
  m.service_id.set(d.service_id);
  copy_in(m.private_data, d.private_data);
  return CmError::kOk;
}

CmError decode_body(const SidrRepMsg& m, SidrRepDesc& d) {
  if (m.info_length > kSidrRepInfoBytes) return CmError::kBadInfoLength;
  d.request_id = m.request_id.get();
  d.status = m.status;
  d.info_length = m.info_length;
  d.qpn = sidr_rep_qpn(m);
  d.service_id = m.service_id.get();
  d.qkey = m.qkey.get();
  copy_out(d.info, m.info);
  copy_out(d.private_data, m.private_data);
  return CmError::kOk;
}

CmError encode_body(const SidrRepDesc& d, SidrRepMsg& m) {
  if (d.info_length > kSidrRepInfoBytes || d.qpn > kHi24Max) return CmError::kFieldRange;
  m.request_id.set(d.request_id);
  m.status = d.status;
  m.info_length = d.info_length;
  m.resv6.set(0);
  set_hi24_lo8(m.qpn_word, d.qpn, 0);
  m.service_id.set(d.service_id);
  m.qkey.set(d.qkey);
  copy_in(m.info, d.info);
  copy_in(m.private_data, d.private_data);
  return CmError::kOk;
}

// ---------------------------------------------------------------------------
// Whole MADs.

CmError decode_mad_hdr(std::span<const uint8_t> mad, MadHdrDesc& out) {
  if (mad.size() < sizeof(MadHdr)) return CmError::kShort;
  const auto& h = *reinterpret_cast<const MadHdr*>(mad.data());
  out.base_version = h.base_version;
  out.mgmt_class = h.mgmt_class;
  out.class_version = h.class_version;
  out.method = h.method;
  out.status = h.status.get();
  out.class_specific = h.class_specific.get();
  out.tid = h.tid.get();
  out.attr_id = h.attr_id.get();
  out.attr_mod = h.attr_mod.get();
  return CmError::kOk;
}

namespace {

template <typename Msg, typename Desc>
CmError decode_as(const uint8_t* data, CmBody& body) {
  static_assert(sizeof(Msg) == kMadDataBytes);
  Desc d;
  const CmError e = decode_body(*reinterpret_cast<const Msg*>(data), d);
  if (e == CmError::kOk) body = d;
  return e;
}

template <typename Desc>
struct MsgOf;
template <> struct MsgOf<ReqDesc> { using type = ReqMsg; };
template <> struct MsgOf<MraDesc> { using type = MraMsg; };
template <> struct MsgOf<RejDesc> { using type = RejMsg; };
template <> struct MsgOf<RepDesc> { using type = RepMsg; };
template <> struct MsgOf<RtuDesc> { using type = RtuMsg; };
template <> struct MsgOf<DreqDesc> { using type = DreqMsg; };
template <> struct MsgOf<DrepDesc> { using type = DrepMsg; };
template <> struct MsgOf<SidrReqDesc> { using type = SidrReqMsg; };
template <> struct MsgOf<SidrRepDesc> { using type = SidrRepMsg; };

}  // namespace

CmError decode(std::span<const uint8_t> mad, CmMad& out) {
  if (mad.size() < kMadBytes) return CmError::kShort;
  if (mad.size() > kMadBytes) return CmError::kOversize;
  static_cast<void>(decode_mad_hdr(mad, out.hdr));
  if (out.hdr.base_version != kMgmtBaseVersion) return CmError::kBadBaseVersion;
  if (out.hdr.mgmt_class != kMgmtClassCm) return CmError::kNotCm;
  if (out.hdr.class_version != kCmClassVersion) return CmError::kBadClassVersion;
  const uint8_t* data = mad.data() + kMadHdrBytes;
  // Switch on the 16-bit value: unknown IDs fall to the default.
  switch (out.hdr.attr_id) {
    case uint16_t(CmAttr::kReq):
    case uint16_t(CmAttr::kMra):
    case uint16_t(CmAttr::kRej):
    case uint16_t(CmAttr::kRep):
    case uint16_t(CmAttr::kRtu):
    case uint16_t(CmAttr::kDreq):
    case uint16_t(CmAttr::kDrep):
    case uint16_t(CmAttr::kSidrReq):
    case uint16_t(CmAttr::kSidrRep):
      // IBA 12.6.1: every CM message is sent with the Send method.
      if (out.hdr.method != kMadMethodSend) return CmError::kBadMethod;
      break;
    default:
      return CmError::kUnknownAttr;
  }
  switch (CmAttr(out.hdr.attr_id)) {
    case CmAttr::kReq: return decode_as<ReqMsg, ReqDesc>(data, out.body);
    case CmAttr::kMra: return decode_as<MraMsg, MraDesc>(data, out.body);
    case CmAttr::kRej: return decode_as<RejMsg, RejDesc>(data, out.body);
    case CmAttr::kRep: return decode_as<RepMsg, RepDesc>(data, out.body);
    case CmAttr::kRtu: return decode_as<RtuMsg, RtuDesc>(data, out.body);
    case CmAttr::kDreq: return decode_as<DreqMsg, DreqDesc>(data, out.body);
    case CmAttr::kDrep: return decode_as<DrepMsg, DrepDesc>(data, out.body);
    case CmAttr::kSidrReq: return decode_as<SidrReqMsg, SidrReqDesc>(data, out.body);
    case CmAttr::kSidrRep: return decode_as<SidrRepMsg, SidrRepDesc>(data, out.body);
    case CmAttr::kClassPortInfo:
    case CmAttr::kLap:
    case CmAttr::kApr:
      break;
  }
  return CmError::kUnknownAttr;
}

CmError encode(const CmMad& m, std::span<uint8_t> out) {
  if (out.size() < kMadBytes) return CmError::kShort;
  if (m.hdr.attr_id != uint16_t(cm_attr_of(m.body))) return CmError::kAttrMismatch;
  Mad mad;
  std::memset(&mad, 0, sizeof(mad));
  const CmError e = std::visit(
      [&mad](const auto& d) {
        using Msg = typename MsgOf<std::decay_t<decltype(d)>>::type;
        return encode_body(d, *reinterpret_cast<Msg*>(mad.data));
      },
      m.body);
  if (e != CmError::kOk) return e;
  mad.hdr.base_version = m.hdr.base_version;
  mad.hdr.mgmt_class = m.hdr.mgmt_class;
  mad.hdr.class_version = m.hdr.class_version;
  mad.hdr.method = m.hdr.method;
  mad.hdr.status.set(m.hdr.status);
  mad.hdr.class_specific.set(m.hdr.class_specific);
  mad.hdr.tid.set(m.hdr.tid);
  mad.hdr.attr_id.set(m.hdr.attr_id);
  mad.hdr.resv.set(0);
  mad.hdr.attr_mod.set(m.hdr.attr_mod);
  std::memcpy(out.data(), &mad, sizeof(mad));
  return CmError::kOk;
}

}  // namespace uroce::cm
