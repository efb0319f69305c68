// Completion queues, the verbs (IBA 11.4.2): create, destroy, poll, and the
// status strings of libibverbs.
#include <array>

#include "stack/device/context.h"
#include "stack/transport/cq.h"

namespace uroce {

namespace {
constexpr uint32_t kMaxCqe = 1u << 20;
}

const char* wc_status_str(WcStatus s) {
  // The words of libibverbs' ibv_wc_status_str, in WcStatus order.
  static constexpr std::array<const char*, 22> kNames = {
      "success", "local length error", "local QP operation error", "local EE context operation error",
      "local protection error", "Work Request Flushed Error", "memory management operation error",
      "bad response error", "local access error", "remote invalid request error", "remote access error",
      "remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
      "local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
      "invalid EE context state", "fatal error", "response timeout error", "general error"};
  return size_t(s) < kNames.size() ? kNames[size_t(s)] : "unknown";
}

Result<Cq*> create_cq(Context* ctx, uint32_t cqe, void* cq_context) {
  if (!ctx || cqe == 0 || cqe > kMaxCqe) return Status(StatusCode::kInvalidArgument, "cqe out of range");
  auto* cq = ctx->cqs.add();
  if (!cq) return Status(StatusCode::kResourceExhausted, "max_cq reached");
  cq->ring.init(cqe);
  cq->context = ctx;
  cq->cq_context = cq_context;
  cq->cqe = cq->ring.capacity();
  return static_cast<Cq*>(cq);
}

Status destroy_cq(Cq* cq) {
  if (!cq) return Status(StatusCode::kInvalidArgument, "null cq");
  if (transport::impl(cq).refs) return Status(StatusCode::kBusy, "cq still used by a qp");
  if (!cq->context->cqs.remove(&transport::impl(cq))) return Status(StatusCode::kNotFound, "unknown cq");
  return {};
}

int poll_cq(Cq* cq, int num_entries, Wc* wc) {
  auto& ring = transport::impl(cq).ring;
  int n = 0;
  for (; n < num_entries && !ring.empty(); ++n) {
    wc[n] = ring.front();
    ring.pop();
  }
  return n;
}

void set_cq_event_handler(Cq* cq, CqEventFn fn, void* arg) {
  transport::CqImpl& c = transport::impl(cq);
  c.on_event = fn;
  c.event_arg = arg;
}

Status req_notify_cq(Cq* cq, bool solicited_only) {
  if (!cq) return Status(StatusCode::kInvalidArgument, "null cq");
  transport::CqImpl& c = transport::impl(cq);
  // A next-completion arming is not narrowed by a later solicited-only one.
  if (c.arm != transport::CqArm::kNext) c.arm = solicited_only ? transport::CqArm::kSolicited : transport::CqArm::kNext;
  return {};
}

}  // namespace uroce
