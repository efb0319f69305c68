// Protection domains and address handles (IBA 10.2.3, 10.2.2.2).
#include "stack/device/context.h"
#include "stack/transport/frame.h"

namespace uroce {

Result<Pd*> alloc_pd(Context* ctx) {
  if (!ctx) return Status(StatusCode::kInvalidArgument, "null context");
  uint32_t index = 0;
  auto* pd = ctx->pds.add(&index);
  if (!pd) return Status(StatusCode::kResourceExhausted, "pd table full");
  pd->context = ctx;
  pd->handle = index;
  return static_cast<Pd*>(pd);
}

Status dealloc_pd(Pd* pd) {
  if (!pd) return Status(StatusCode::kInvalidArgument, "null pd");
  if (static_cast<PdImpl*>(pd)->refs) return Status(StatusCode::kBusy, "pd still has mrs, qps, srqs or ahs");
  if (!pd->context->pds.remove(static_cast<PdImpl*>(pd))) return Status(StatusCode::kNotFound, "unknown pd");
  return {};
}

Result<Ah*> create_ah(Pd* pd, const AhAttr& attr) {
  if (!pd) return Status(StatusCode::kInvalidArgument, "null pd");
  if (attr.port_num != 1 || attr.flow_label > wire::kFlowLabelMask) {
    return Status(StatusCode::kInvalidArgument, "port_num or flow_label out of range");
  }
  auto src = transport::path_source(*pd->context->net, attr);
  if (!src.ok()) return src.status();
  auto* ah = pd->context->ahs.add();
  if (!ah) return Status(StatusCode::kResourceExhausted, "ah table full");
  static_cast<Ah&>(*ah) = Ah{pd->context, pd, attr};
  ah->sgid = *src;
  ++static_cast<PdImpl*>(pd)->refs;
  return ah;
}

Status destroy_ah(Ah* ah) {
  if (!ah) return Status(StatusCode::kInvalidArgument, "null ah");
  Pd* pd = ah->pd;
  if (!ah->context->ahs.remove(static_cast<transport::AhImpl*>(ah))) return Status(StatusCode::kNotFound, "unknown ah");
  --static_cast<PdImpl*>(pd)->refs;
  return {};
}

}  // namespace uroce
