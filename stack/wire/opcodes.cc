// The opcode table (IBA Vol 1 9.2.1 Table 38; RoCEv2 CNP: Annex A17.9.2).
#include "stack/wire/opcodes.h"

#include <initializer_list>

#include "stack/wire/headers.h"

namespace uroce::wire {
namespace {

constexpr uint8_t hdr_size(Hdr h) {
  switch (h) {
    case Hdr::kDeth: return sizeof(Deth);
    case Hdr::kReth: return sizeof(Reth);
    case Hdr::kAtomicEth: return sizeof(AtomicEth);
    case Hdr::kAeth: return sizeof(Aeth);
    case Hdr::kAtomicAckEth: return sizeof(AtomicAckEth);
    case Hdr::kImmDt: return sizeof(ImmDt);
    case Hdr::kIeth: return sizeof(Ieth);
    case Hdr::kCnp: return sizeof(CnpBody);
    case Hdr::kCount: break;
  }
  return 0;
}

// Lays the given headers out after the BTH in spec order and records offsets.
constexpr OpcodeInfo op(std::string_view name, uint32_t flags, std::initializer_list<Hdr> hdrs) {
  OpcodeInfo info{name, flags | kValid, uint8_t(sizeof(Bth)), {}};
  for (uint8_t h = 0; h < uint8_t(Hdr::kCount); ++h) {
    for (Hdr want : hdrs) {
      if (uint8_t(want) != h) continue;
      info.off[h] = info.hdr_len;
      info.hdr_len = uint8_t(info.hdr_len + hdr_size(want));
    }
  }
  return info;
}

// SEND and WRITE opcodes are laid out identically for RC (0x00) and UC (0x20).
constexpr void add_send_write(std::array<OpcodeInfo, 256>& t, uint8_t base, uint32_t svc_flag) {
  constexpr uint32_t S = kSend | kPayload | kReq, W = kWrite | kPayload | kReq;
  const uint32_t f = svc_flag;
  const bool rc = svc_flag == kRc;
  t[base + 0x00] = op(rc ? "RC Send First" : "UC Send First", f | S | kFirst, {});
  t[base + 0x01] = op(rc ? "RC Send Middle" : "UC Send Middle", f | S | kMiddle, {});
  t[base + 0x02] = op(rc ? "RC Send Last" : "UC Send Last", f | S | kLast | kRwr, {});
  t[base + 0x03] = op(rc ? "RC Send Last Immediate" : "UC Send Last Immediate",
                      f | S | kLast | kImm | kRwr, {Hdr::kImmDt});
  t[base + 0x04] = op(rc ? "RC Send Only" : "UC Send Only", f | S | kOnly | kRwr, {});
  t[base + 0x05] = op(rc ? "RC Send Only Immediate" : "UC Send Only Immediate",
                      f | S | kOnly | kImm | kRwr, {Hdr::kImmDt});
  t[base + 0x06] = op(rc ? "RC RDMA Write First" : "UC RDMA Write First", f | W | kFirst, {Hdr::kReth});
  t[base + 0x07] = op(rc ? "RC RDMA Write Middle" : "UC RDMA Write Middle", f | W | kMiddle, {});
  t[base + 0x08] = op(rc ? "RC RDMA Write Last" : "UC RDMA Write Last", f | W | kLast, {});
  t[base + 0x09] = op(rc ? "RC RDMA Write Last Immediate" : "UC RDMA Write Last Immediate",
                      f | W | kLast | kImm | kRwr, {Hdr::kImmDt});
  t[base + 0x0a] = op(rc ? "RC RDMA Write Only" : "UC RDMA Write Only", f | W | kOnly, {Hdr::kReth});
  t[base + 0x0b] = op(rc ? "RC RDMA Write Only Immediate" : "UC RDMA Write Only Immediate",
                      f | W | kOnly | kImm | kRwr, {Hdr::kReth, Hdr::kImmDt});
}

constexpr std::array<OpcodeInfo, 256> make_table() {
  std::array<OpcodeInfo, 256> t{};
  add_send_write(t, kOpServiceRc, kRc);
  add_send_write(t, kOpServiceUc, kUc);
  constexpr uint32_t kRcReq = kRc | kReq, kRcResp = kRc | kResp;
  t[kRcReadRequest] = op("RC RDMA Read Request", kRcReq | kRead | kOnly, {Hdr::kReth});
  t[kRcReadResponseFirst] =
      op("RC RDMA Read Response First", kRcResp | kRead | kPayload | kFirst, {Hdr::kAeth});
  t[kRcReadResponseMiddle] = op("RC RDMA Read Response Middle", kRcResp | kRead | kPayload | kMiddle, {});
  t[kRcReadResponseLast] =
      op("RC RDMA Read Response Last", kRcResp | kRead | kPayload | kLast, {Hdr::kAeth});
  t[kRcReadResponseOnly] =
      op("RC RDMA Read Response Only", kRcResp | kRead | kPayload | kOnly, {Hdr::kAeth});
  t[kRcAcknowledge] = op("RC Acknowledge", kRcResp | kOnly, {Hdr::kAeth});
  t[kRcAtomicAcknowledge] =
      op("RC Atomic Acknowledge", kRcResp | kAtomic | kOnly, {Hdr::kAeth, Hdr::kAtomicAckEth});
  t[kRcCompareSwap] = op("RC Compare Swap", kRcReq | kAtomic | kOnly, {Hdr::kAtomicEth});
  t[kRcFetchAdd] = op("RC Fetch Add", kRcReq | kAtomic | kOnly, {Hdr::kAtomicEth});
  t[kRcSendLastInv] = op("RC Send Last Invalidate", kRcReq | kSend | kPayload | kLast | kInv | kRwr,
                         {Hdr::kIeth});
  t[kRcSendOnlyInv] = op("RC Send Only Invalidate", kRcReq | kSend | kPayload | kOnly | kInv | kRwr,
                         {Hdr::kIeth});
  t[kUdSendOnly] = op("UD Send Only", kUd | kReq | kSend | kPayload | kOnly | kRwr, {Hdr::kDeth});
  t[kUdSendOnlyImm] = op("UD Send Only Immediate", kUd | kReq | kSend | kPayload | kOnly | kImm | kRwr,
                         {Hdr::kDeth, Hdr::kImmDt});
  t[kCnp] = op("CNP", kCnpOp | kOnly, {Hdr::kCnp});
  return t;
}

}  // namespace

constinit const std::array<OpcodeInfo, 256> kOpcodes = make_table();

}  // namespace uroce::wire
