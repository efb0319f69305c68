// Communication Management MADs on the wire: the common MAD header (IBA 13.4.2)
// and the CM messages of IBA 12.6 (REQ, MRA, REJ, REP, RTU, DREQ, DREP,
// SIDR_REQ, SIDR_REP), as packed byte-order-typed structs with compile-time
// sizes, named masks and shifts for the sub-byte fields, a decoded description
// per message and encode/decode functions that are exact inverses.
//
// Layouts were checked against IBA Vol 1 r1.4 tables 106-120, Linux
// include/rdma/ibta_vol1_c12.h (CM_FIELD*_LOC offsets and widths), Wireshark's
// packet-infiniband.c (field masks) and real rdma_rxe captures (tests/data).
//
// Control path: nothing here allocates, but nothing here is on the datapath.
// Reserved fields are ignored by decode (IBA 12.6: a receiver ignores them)
// and written as zero by encode, so encode(decode(b)) == b for every MAD whose
// reserved bits are zero (all captured ones), and decode(encode(d)) == d for
// every valid description.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include <uroce/addr.h>

#include "stack/wire/byte_order.h"
#include "stack/wire/headers.h"

namespace uroce::cm {

using wire::be16;
using wire::be32;
using wire::be64;

// ---------------------------------------------------------------------------
// MAD framing (IBA 13.4).

inline constexpr size_t kMadBytes = 256;      // every CM MAD is one 256-byte MAD (13.4.1)
inline constexpr size_t kMadHdrBytes = 24;    // common MAD header (13.4.2)
inline constexpr size_t kMadDataBytes = 232;  // class-specific data after it
inline constexpr uint8_t kMgmtBaseVersion = 0x01;
inline constexpr uint8_t kMgmtClassCm = 0x07;   // Table 127: Communication Management
inline constexpr uint8_t kCmClassVersion = 2;   // IBA 1.2 and later (Linux IB_CM_CLASS_VERSION)

// Common MAD methods (13.4.5 Table 129); CM messages all use Send.
inline constexpr uint8_t kMadMethodGet = 0x01;
inline constexpr uint8_t kMadMethodSet = 0x02;
inline constexpr uint8_t kMadMethodSend = 0x03;
inline constexpr uint8_t kMadMethodGetResp = 0x81;
inline constexpr uint8_t kMadMethodRespBit = 0x80;

// QP1 (the GSI) framing facts (IBA 13.5.1, 13.5.3; Linux ib_mad.h).
using wire::kGsiQpn;
inline constexpr uint32_t kGsiQkey = 0x80010000;      // IB_QP1_QKEY
inline constexpr uint16_t kDefaultPkeyFull = 0xffff;  // IB_DEFAULT_PKEY_FULL

/// CM attribute IDs (IBA 12.6.2 Table 103).
enum class CmAttr : uint16_t {
  kClassPortInfo = 0x0001,
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,
  kApr = 0x001a,
};

/// Short IBA name of a CM attribute ("REQ", "SIDR_REP"), or "" if unknown.
std::string_view cm_attr_short_name(uint16_t attr_id);
/// Wireshark's name for it ("ConnectRequest", "DisconnectReply"), or "" if unknown.
std::string_view cm_attr_long_name(uint16_t attr_id);

struct MadHdr {
  uint8_t base_version;
  uint8_t mgmt_class;
  uint8_t class_version;
  uint8_t method;  // R:1 | Method:7
  be16 status;
  be16 class_specific;
  be64 tid;
  be16 attr_id;
  be16 resv;
  be32 attr_mod;
};
static_assert(sizeof(MadHdr) == kMadHdrBytes && alignof(MadHdr) == 1);

// ---------------------------------------------------------------------------
// CM message bodies: the 232 bytes after the MAD header. Offsets in comments
// are from the start of the body, as IBA's tables and ibta_vol1_c12.h count.

inline constexpr size_t kReqPrivateDataBytes = 92;
inline constexpr size_t kMraPrivateDataBytes = 222;
inline constexpr size_t kRejPrivateDataBytes = 148;
inline constexpr size_t kRejAriBytes = 72;
inline constexpr size_t kRepPrivateDataBytes = 196;
inline constexpr size_t kRtuPrivateDataBytes = 224;
inline constexpr size_t kDreqPrivateDataBytes = 220;
inline constexpr size_t kDrepPrivateDataBytes = 224;
inline constexpr size_t kSidrReqPrivateDataBytes = 216;
inline constexpr size_t kSidrRepPrivateDataBytes = 136;
inline constexpr size_t kSidrRepInfoBytes = 72;  // ClassPortInfo on redirect

// Words of the form Field:24 | Byte:8 (QPN, EECN, PSN followed by a byte).
inline constexpr uint32_t kHi24Shift = 8;
inline constexpr uint32_t kHi24Max = 0x00ffffff;
inline constexpr uint32_t kLo8Mask = 0x000000ff;

// One path in a REQ (Table 106 bytes 52-95 primary, 96-139 alternate).
struct CmPath {
  be16 local_lid;
  be16 remote_lid;
  uint8_t local_gid[16];
  uint8_t remote_gid[16];
  be32 flow_word;        // FlowLabel:20 | resv:6 | PacketRate:6
  uint8_t traffic_class;
  uint8_t hop_limit;
  uint8_t sl_byte;       // SL:4 | SubnetLocal:1 | resv:3
  uint8_t ack_byte;      // LocalACKTimeout:5 | SAPSupported:1 (alternate only) | resv:2
};
static_assert(sizeof(CmPath) == 44 && alignof(CmPath) == 1);
inline constexpr uint32_t kPathFlowLabelShift = 12;
inline constexpr uint32_t kPathFlowLabelMax = 0x000fffff;
inline constexpr uint32_t kPathPacketRateMask = 0x3f;
inline constexpr uint8_t kPathSlShift = 4;
inline constexpr uint8_t kPathSlMax = 0x0f;
inline constexpr uint8_t kPathSubnetLocalBit = 0x08;
inline constexpr uint8_t kPathAckTimeoutShift = 3;
inline constexpr uint8_t kPathAckTimeoutMax = 0x1f;
inline constexpr uint8_t kPathSapSupportedBit = 0x04;

// ConnectRequest, Table 106.
struct ReqMsg {
  be32 local_comm_id;     // 0
  be32 resv4;
  be64 service_id;        // 8
  be64 local_ca_guid;     // 16
  be32 resv24;
  be32 local_qkey;        // 28
  be32 local_qpn_word;    // 32: LocalQPN:24 | ResponderResources:8
  be32 local_eecn_word;   // 36: LocalEECN:24 | InitiatorDepth:8
  be32 remote_eecn_word;  // 40: RemoteEECN:24 | RemoteCMResponseTimeout:5 | TransportServiceType:2 | E2EFlowControl:1
  be32 psn_word;          // 44: StartingPSN:24 | LocalCMResponseTimeout:5 | RetryCount:3
  be16 pkey;              // 48
  uint8_t mtu_byte;       // 50: PathPacketPayloadMTU:4 | RDCExists:1 | RNRRetryCount:3
  uint8_t retries_byte;   // 51: MaxCMRetries:4 | SRQ:1 | ExtendedTransportType:3
  CmPath primary;         // 52
  CmPath alternate;       // 96
  uint8_t private_data[kReqPrivateDataBytes];  // 140
};
static_assert(sizeof(ReqMsg) == kMadDataBytes && alignof(ReqMsg) == 1);
inline constexpr uint32_t kReqCmTimeoutShift = 3;  // both CM response timeouts
inline constexpr uint32_t kReqCmTimeoutMax = 0x1f;
inline constexpr uint32_t kReqTransportShift = 1;
inline constexpr uint32_t kReqTransportMax = 0x3;
inline constexpr uint32_t kReqE2eFlowControlBit = 0x1;
inline constexpr uint32_t kReqRetryCountMax = 0x7;
inline constexpr uint8_t kReqMtuShift = 4;
inline constexpr uint8_t kReqMtuMax = 0x0f;
inline constexpr uint8_t kReqRdcExistsBit = 0x08;
inline constexpr uint8_t kReqRnrRetryMax = 0x07;
inline constexpr uint8_t kReqMaxCmRetriesShift = 4;
inline constexpr uint8_t kReqMaxCmRetriesMax = 0x0f;
inline constexpr uint8_t kReqSrqBit = 0x08;
inline constexpr uint8_t kReqExtTransportMax = 0x07;

// Message Receipt Acknowledgement, Table 107.
struct MraMsg {
  be32 local_comm_id;
  be32 remote_comm_id;
  uint8_t mraed_byte;   // 8: MessageMRAed:2 | resv:6
  uint8_t timeout_byte; // 9: ServiceTimeout:5 | resv:3
  uint8_t private_data[kMraPrivateDataBytes];  // 10
};
static_assert(sizeof(MraMsg) == kMadDataBytes && alignof(MraMsg) == 1);
inline constexpr uint8_t kMsgSelShift = 6;  // MessageMRAed / MessageRejected
inline constexpr uint8_t kMsgSelMax = 0x3;
inline constexpr uint8_t kMraServiceTimeoutShift = 3;
inline constexpr uint8_t kMraServiceTimeoutMax = 0x1f;

// Reject, Table 108.
struct RejMsg {
  be32 local_comm_id;
  be32 remote_comm_id;
  uint8_t msg_byte;   // 8: MessageRejected:2 | resv:6
  uint8_t info_byte;  // 9: RejectedInfoLength:7 | resv:1
  be16 reason;        // 10
  uint8_t ari[kRejAriBytes];                   // 12: Additional Rejection Information
  uint8_t private_data[kRejPrivateDataBytes];  // 84
};
static_assert(sizeof(RejMsg) == kMadDataBytes && alignof(RejMsg) == 1);
inline constexpr uint8_t kRejInfoLengthShift = 1;
inline constexpr uint8_t kRejInfoLengthMax = 0x7f;  // the field; values above 72 are invalid

// ConnectReply, Table 110.
struct RepMsg {
  be32 local_comm_id;
  be32 remote_comm_id;
  be32 local_qkey;       // 8
  be32 local_qpn_word;   // 12: LocalQPN:24 | resv:8
  be32 local_eecn_word;  // 16: LocalEECN:24 | resv:8
  be32 psn_word;         // 20: StartingPSN:24 | resv:8
  uint8_t responder_resources;  // 24
  uint8_t initiator_depth;      // 25
  uint8_t ack_byte;  // 26: TargetACKDelay:5 | FailoverAccepted:2 | E2EFlowControl:1
  uint8_t rnr_byte;  // 27: RNRRetryCount:3 | SRQ:1 | resv:4
  be64 local_ca_guid;  // 28
  uint8_t private_data[kRepPrivateDataBytes];  // 36
};
static_assert(sizeof(RepMsg) == kMadDataBytes && alignof(RepMsg) == 1);
inline constexpr uint8_t kRepTargetAckDelayShift = 3;
inline constexpr uint8_t kRepTargetAckDelayMax = 0x1f;
inline constexpr uint8_t kRepFailoverShift = 1;
inline constexpr uint8_t kRepFailoverMax = 0x3;
inline constexpr uint8_t kRepE2eFlowControlBit = 0x01;
inline constexpr uint8_t kRepRnrRetryShift = 5;
inline constexpr uint8_t kRepRnrRetryMax = 0x7;
inline constexpr uint8_t kRepSrqBit = 0x10;

// ReadyToUse, Table 111; DisconnectReply, Table 113 (same layout).
struct RtuMsg {
  be32 local_comm_id;
  be32 remote_comm_id;
  uint8_t private_data[kRtuPrivateDataBytes];  // 8
};
static_assert(sizeof(RtuMsg) == kMadDataBytes && alignof(RtuMsg) == 1);
using DrepMsg = RtuMsg;
static_assert(kDrepPrivateDataBytes == kRtuPrivateDataBytes);

// DisconnectRequest, Table 112.
struct DreqMsg {
  be32 local_comm_id;
  be32 remote_comm_id;
  be32 remote_qpn_word;  // 8: RemoteQPN/EECN:24 | resv:8
  uint8_t private_data[kDreqPrivateDataBytes];  // 12
};
static_assert(sizeof(DreqMsg) == kMadDataBytes && alignof(DreqMsg) == 1);

// Service ID Resolution Request, Table 119.
struct SidrReqMsg {
  be32 request_id;
  be16 pkey;  // 4
  be16 resv6;
  be64 service_id;  // 8
  uint8_t private_data[kSidrReqPrivateDataBytes];  // 16
};
static_assert(sizeof(SidrReqMsg) == kMadDataBytes && alignof(SidrReqMsg) == 1);

// Service ID Resolution Response, Table 120.
struct SidrRepMsg {
  be32 request_id;
  uint8_t status;            // 4
  uint8_t info_length;       // 5: AdditionalInformationLength
  be16 resv6;
  be32 qpn_word;             // 8: QPN:24 | resv:8
  be64 service_id;           // 12
  be32 qkey;                 // 20
  uint8_t info[kSidrRepInfoBytes];                 // 24: ClassPortInfo
  uint8_t private_data[kSidrRepPrivateDataBytes];  // 96
};
static_assert(sizeof(SidrRepMsg) == kMadDataBytes && alignof(SidrRepMsg) == 1);

struct Mad {
  MadHdr hdr;
  uint8_t data[kMadDataBytes];
};
static_assert(sizeof(Mad) == kMadBytes && alignof(Mad) == 1);

// Two-level accessors for the packed fields the connection setup reads most.
inline uint32_t req_local_qpn(const ReqMsg& m) { return m.local_qpn_word.get() >> kHi24Shift; }
inline uint8_t req_responder_resources(const ReqMsg& m) { return uint8_t(m.local_qpn_word.get() & kLo8Mask); }
inline uint8_t req_initiator_depth(const ReqMsg& m) { return uint8_t(m.local_eecn_word.get() & kLo8Mask); }
inline uint32_t req_starting_psn(const ReqMsg& m) { return m.psn_word.get() >> kHi24Shift; }
inline uint8_t req_path_mtu(const ReqMsg& m) { return uint8_t(m.mtu_byte >> kReqMtuShift); }
inline uint32_t rep_local_qpn(const RepMsg& m) { return m.local_qpn_word.get() >> kHi24Shift; }
inline uint32_t rep_starting_psn(const RepMsg& m) { return m.psn_word.get() >> kHi24Shift; }
inline uint32_t dreq_remote_qpn(const DreqMsg& m) { return m.remote_qpn_word.get() >> kHi24Shift; }
inline uint32_t sidr_rep_qpn(const SidrRepMsg& m) { return m.qpn_word.get() >> kHi24Shift; }
inline uint32_t path_flow_label(const CmPath& p) { return p.flow_word.get() >> kPathFlowLabelShift; }
inline uint8_t path_packet_rate(const CmPath& p) { return uint8_t(p.flow_word.get() & kPathPacketRateMask); }

// ---------------------------------------------------------------------------
// Decoded descriptions.

struct MadHdrDesc {
  uint8_t base_version = kMgmtBaseVersion;
  uint8_t mgmt_class = kMgmtClassCm;
  uint8_t class_version = kCmClassVersion;
  uint8_t method = kMadMethodSend;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t tid = 0;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;
  friend bool operator==(const MadHdrDesc&, const MadHdrDesc&) = default;
};

struct CmPathDesc {
  uint16_t local_lid = 0;
  uint16_t remote_lid = 0;
  Gid local_gid{};
  Gid remote_gid{};
  uint32_t flow_label = 0;  // 20 bits
  uint8_t packet_rate = 0;  // 6 bits, IBA 9.7.8 encoding
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;           // 4 bits
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // 5 bits: 4.096 us * 2^n
  friend bool operator==(const CmPathDesc&, const CmPathDesc&) = default;
};

// MessageMRAed / MessageRejected values (Tables 107, 108).
inline constexpr uint8_t kCmMsgReq = 0;
inline constexpr uint8_t kCmMsgRep = 1;
inline constexpr uint8_t kCmMsgLapOrOther = 2;  // MRA: LAP; REJ: no message / other

struct ReqDesc {
  static constexpr CmAttr kAttr = CmAttr::kReq;
  uint32_t local_comm_id = 0;
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;
  uint8_t remote_cm_response_timeout = 0;  // 5 bits
  uint8_t transport_service_type = 0;      // 2 bits: 0 RC, 1 UC, 2 RD, 3 XRC/extended
  bool end_to_end_flow_control = false;
  // The first PSN this side's receive queue expects, i.e. where the peer's
  // send queue starts (the receiver of the REQ sets its sq_psn from it; the
  // rping capture shows the server's first request with the REQ's PSN).
  uint32_t starting_psn = 0;
  uint8_t local_cm_response_timeout = 0;   // 5 bits
  uint8_t retry_count = 0;                 // 3 bits
  uint16_t pkey = 0;
  uint8_t path_mtu = 0;                    // 4 bits, IBA 9.7.5 encoding (3 = 1024)
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;             // 3 bits
  uint8_t max_cm_retries = 0;              // 4 bits
  bool srq = false;
  uint8_t extended_transport_type = 0;     // 3 bits
  CmPathDesc primary{};
  CmPathDesc alternate{};
  bool sap_supported = false;
  std::array<uint8_t, kReqPrivateDataBytes> private_data{};
  friend bool operator==(const ReqDesc&, const ReqDesc&) = default;
};

struct MraDesc {
  static constexpr CmAttr kAttr = CmAttr::kMra;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_mraed = kCmMsgReq;  // 2 bits
  uint8_t service_timeout = 0;  // 5 bits
  std::array<uint8_t, kMraPrivateDataBytes> private_data{};
  friend bool operator==(const MraDesc&, const MraDesc&) = default;
};

struct RejDesc {
  static constexpr CmAttr kAttr = CmAttr::kRej;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_rejected = kCmMsgReq;  // 2 bits
  uint8_t ari_length = 0;  // RejectedInfoLength, 0..72
  uint16_t reason = 0;     // Table 109; 28 = consumer reject (rdma_cm)
  std::array<uint8_t, kRejAriBytes> ari{};  // all 72 bytes, as carried
  std::array<uint8_t, kRejPrivateDataBytes> private_data{};
  friend bool operator==(const RejDesc&, const RejDesc&) = default;
};

struct RepDesc {
  static constexpr CmAttr kAttr = CmAttr::kRep;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;
  uint32_t local_eecn = 0;
  uint32_t starting_psn = 0;  // the active side's send queue starts here (see ReqDesc)
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;    // 5 bits
  uint8_t failover_accepted = 0;   // 2 bits
  bool end_to_end_flow_control = false;
  uint8_t rnr_retry_count = 0;     // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, kRepPrivateDataBytes> private_data{};
  friend bool operator==(const RepDesc&, const RepDesc&) = default;
};

struct RtuDesc {
  static constexpr CmAttr kAttr = CmAttr::kRtu;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kRtuPrivateDataBytes> private_data{};
  friend bool operator==(const RtuDesc&, const RtuDesc&) = default;
};

struct DreqDesc {
  static constexpr CmAttr kAttr = CmAttr::kDreq;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;  // the receiver's QPN (or EECN)
  std::array<uint8_t, kDreqPrivateDataBytes> private_data{};
  friend bool operator==(const DreqDesc&, const DreqDesc&) = default;
};

struct DrepDesc {
  static constexpr CmAttr kAttr = CmAttr::kDrep;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kDrepPrivateDataBytes> private_data{};
  friend bool operator==(const DrepDesc&, const DrepDesc&) = default;
};

struct SidrReqDesc {
  static constexpr CmAttr kAttr = CmAttr::kSidrReq;
  uint32_t request_id = 0;
  uint16_t pkey = 0;
  uint64_t service_id = 0;
  std::array<uint8_t, kSidrReqPrivateDataBytes> private_data{};
  friend bool operator==(const SidrReqDesc&, const SidrReqDesc&) = default;
};

struct SidrRepDesc {
  static constexpr CmAttr kAttr = CmAttr::kSidrRep;
  uint32_t request_id = 0;
  uint8_t status = 0;       // Table 121; 0 = valid QP
  uint8_t info_length = 0;  // 0..72
  uint32_t qpn = 0;
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, kSidrRepInfoBytes> info{};  // all 72 bytes, as carried
  std::array<uint8_t, kSidrRepPrivateDataBytes> private_data{};
  friend bool operator==(const SidrRepDesc&, const SidrRepDesc&) = default;
};

using CmBody = std::variant<ReqDesc, MraDesc, RejDesc, RepDesc, RtuDesc, DreqDesc, DrepDesc,
                            SidrReqDesc, SidrRepDesc>;

/// A whole CM MAD. hdr.attr_id must agree with the body's kind.
struct CmMad {
  MadHdrDesc hdr{};
  CmBody body{};
  friend bool operator==(const CmMad&, const CmMad&) = default;
};

/// The attribute ID that goes with a body kind.
CmAttr cm_attr_of(const CmBody& b);

// ---------------------------------------------------------------------------
// Errors, encode and decode.

#define UROCE_CM_ERRORS(X)                                                              \
  X(kOk, "ok")                                                                          \
  X(kShort, "short")                      /* fewer bytes than the structure needs */    \
  X(kOversize, "oversize")                /* a MAD longer than 256 bytes */             \
  X(kBadBaseVersion, "bad_base_version")  /* MAD BaseVersion != 1 */                    \
  X(kNotCm, "not_cm_class")               /* MgmtClass != 0x07 */                       \
  X(kBadClassVersion, "bad_class_version")  /* CM ClassVersion != 2 */                  \
  X(kBadMethod, "bad_method")             /* a CM message with a method other than Send */ \
  X(kUnknownAttr, "unknown_attribute")    /* not a CM message this layer decodes */     \
  X(kAttrMismatch, "attribute_mismatch")  /* encode: hdr.attr_id disagrees with body */ \
  X(kBadInfoLength, "bad_info_length")    /* REJ/SIDR_REP additional info length > 72 */ \
  X(kFieldRange, "field_out_of_range")    /* encode: a value wider than its field */    \
  X(kBadCmaVersion, "bad_cma_version")    /* rdma_cm private-data header version != 0 */ \
  X(kBadCmaIpVersion, "bad_cma_ip_version")  /* rdma_cm header IP version not 4 or 6 */

enum class CmError : uint8_t {
#define UROCE_ENUM(e, s) e,
  UROCE_CM_ERRORS(UROCE_ENUM)
#undef UROCE_ENUM
      kCount
};

/// Counter-style name of an error, e.g. "bad_class_version".
std::string_view cm_error_name(CmError e);

/// Decodes the 24-byte MAD header at the start of `mad` (any management
/// class). kShort if mad.size() < 24. Checks nothing else.
CmError decode_mad_hdr(std::span<const uint8_t> mad, MadHdrDesc& out);

/// Decodes one CM MAD: exactly kMadBytes bytes (kShort / kOversize otherwise),
/// base version 1, class 0x07, class version 2, method Send, a known message
/// attribute and valid length fields. Never reads outside `mad`; `out` is
/// unspecified unless kOk is returned.
CmError decode(std::span<const uint8_t> mad, CmMad& out);

/// Writes m as a 256-byte MAD into out[0, 256). kShort if out is smaller,
/// kAttrMismatch if m.hdr.attr_id is not cm_attr_of(m.body), kFieldRange if a
/// field does not fit its width (nothing useful is written then).
CmError encode(const CmMad& m, std::span<uint8_t> out);

// Body-level codecs over the 232 data bytes, for callers that build the
// header themselves. decode_body fails only with kBadInfoLength.
CmError decode_body(const ReqMsg& m, ReqDesc& d);
CmError decode_body(const MraMsg& m, MraDesc& d);
CmError decode_body(const RejMsg& m, RejDesc& d);
CmError decode_body(const RepMsg& m, RepDesc& d);
CmError decode_body(const RtuMsg& m, RtuDesc& d);
CmError decode_body(const DreqMsg& m, DreqDesc& d);
CmError decode_body(const DrepMsg& m, DrepDesc& d);
CmError decode_body(const SidrReqMsg& m, SidrReqDesc& d);
CmError decode_body(const SidrRepMsg& m, SidrRepDesc& d);
CmError encode_body(const ReqDesc& d, ReqMsg& m);
CmError encode_body(const MraDesc& d, MraMsg& m);
CmError encode_body(const RejDesc& d, RejMsg& m);
CmError encode_body(const RepDesc& d, RepMsg& m);
CmError encode_body(const RtuDesc& d, RtuMsg& m);
CmError encode_body(const DreqDesc& d, DreqMsg& m);
CmError encode_body(const DrepDesc& d, DrepMsg& m);
CmError encode_body(const SidrReqDesc& d, SidrReqMsg& m);
CmError encode_body(const SidrRepDesc& d, SidrRepMsg& m);

}  // namespace uroce::cm
