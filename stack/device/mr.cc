// reg_mr / dereg_mr (IBA 11.2.8.1, 11.2.8.5) over the device's key table.
#include "stack/device/context.h"

namespace uroce {

Result<Mr*> reg_mr(Pd* pd, void* addr, size_t length, uint32_t access) {
  if (!pd) return Status(StatusCode::kInvalidArgument, "null pd");
  auto mr = pd->context->mrs.reg(pd->context, pd, addr, length, access);
  if (mr.ok()) ++static_cast<PdImpl*>(pd)->refs;
  return mr;
}

Status dereg_mr(Mr* mr) {
  if (!mr) return Status(StatusCode::kInvalidArgument, "null mr");
  Pd* pd = mr->pd;
  Status s = mr->context->mrs.dereg(mr);
  if (s.ok()) --static_cast<PdImpl*>(pd)->refs;
  return s;
}

}  // namespace uroce
