// The state trace of a QP (include/uroce/trace.h): the call that turns it on
// for one QP and the ready sink that prints each step. The records come from
// the drivers of requester.cc, responder.cc and completer.cc (their
// trace_step), only for a QP with a sink: the untraced driver has no trace
// code at all.
#include <uroce/trace.h>

#include <cinttypes>

#include "stack/transport/qp.h"
#include "stack/wire/opcodes.h"

namespace uroce {

std::string_view trace_role_name(TraceRole role) {
  switch (role) {
    case TraceRole::kRequester: return "requester";
    case TraceRole::kResponder: return "responder";
    case TraceRole::kCompleter: return "completer";
  }
  return "?";
}

size_t format_trace_record(const TraceRecord& rec, char* buf, size_t n) {
  // The opcode as Wireshark names it, lower case with underscores: "RC RDMA
  // Write Only" -> rc_rdma_write_only; the number for an unnamed one.
  char op[48] = "";
  if (rec.has_opcode) {
    const std::string_view name = wire::opcode_info(rec.opcode).name;
    if (name.empty() || name.size() >= sizeof(op)) {
      std::snprintf(op, sizeof(op), "0x%02x", rec.opcode);
    } else {
      size_t i = 0;
      for (const char c : name) op[i++] = c == ' ' ? '_' : (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
      op[i] = '\0';
    }
  }
  char pkt[80] = "";
  if (rec.has_psn && rec.has_opcode) std::snprintf(pkt, sizeof(pkt), " psn=%" PRIu32 " op=%s", rec.psn, op);
  else if (rec.has_psn) std::snprintf(pkt, sizeof(pkt), " psn=%" PRIu32, rec.psn);
  else if (rec.has_opcode) std::snprintf(pkt, sizeof(pkt), " op=%s", op);
  const std::string_view role = trace_role_name(rec.role);
  const int len = std::snprintf(buf, n, "qp 0x%" PRIx32 " %.*s %.*s%s -> %.*s", rec.qp_num, int(role.size()),
                                role.data(), int(rec.state.size()), rec.state.data(), pkt, int(rec.next.size()),
                                rec.next.data());
  return len < 0 ? 0 : size_t(len);
}

void FileTraceSink::on_step(const TraceRecord& rec) {
  char line[256];
  format_trace_record(rec, line, sizeof(line));
  std::fprintf(out_, "%s\n", line);
}

Status set_qp_trace(Qp* qp, TraceSink* sink) {
  if (!qp) return Status(StatusCode::kInvalidArgument, "null qp");
  transport::impl(qp).trace = sink;
  return Status();
}

}  // namespace uroce
