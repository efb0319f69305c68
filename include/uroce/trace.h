// State trace of a QP: one record for each step of the requester, responder
// and completer state machines (the states of IBA 9.7.4-9.7.5 and 9.9, named
// as in stack/transport/states.h), so that a packet can be watched walking
// through the checks. Off by default and per QP; a QP that is not traced
// pays nothing for it (docs/TRACE.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include <uroce/status.h>

namespace uroce {

struct Qp;

/// The role of the transport engine a step belongs to: the requester sends
/// requests, the responder handles inbound requests, the completer handles
/// the ACKs and responses to our requests.
enum class TraceRole : uint8_t { kRequester, kResponder, kCompleter };

/// "requester", "responder", "completer".
std::string_view trace_role_name(TraceRole role);

/// One step: the state that ran and the state it moved to. The names point
/// at static storage ("chk_psn", "done"). has_psn and has_opcode say whether
/// psn and opcode belong to the step: the responder and completer always
/// have the packet they handle; the requester has the PSN once the WQE has
/// its PSNs, and the opcode of the packet send_packet built.
struct TraceRecord {
  uint32_t qp_num = 0;
  TraceRole role = TraceRole::kRequester;
  std::string_view state;
  std::string_view next;
  uint32_t psn = 0;       ///< 24-bit BTH PSN
  uint8_t opcode = 0;     ///< BTH opcode (IBA Table 38)
  bool has_psn = false;
  bool has_opcode = false;
};

/// Receives the steps of the QPs it is set on (set_qp_trace). on_step runs on
/// the thread that polls the QP's context, inside poll() (or a verb that runs
/// a role, such as modify_qp to ERR), in the order the steps happen; it must
/// not call back into the context. The record is valid during the call only.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void on_step(const TraceRecord& rec) = 0;
};

/// Writes rec as one line without the newline, e.g.
///   qp 0x11 responder chk_psn psn=5 op=rc_rdma_write_only -> chk_op_seq
/// (opcode names are Wireshark's, lower case with underscores) into
/// buf[0, n), NUL-terminated when n > 0. Returns the length of the whole
/// line, as snprintf does (the line was cut if that is >= n).
size_t format_trace_record(const TraceRecord& rec, char* buf, size_t n);

/// A sink that prints each record as format_trace_record writes it, one line
/// each, to out (not owned; it must outlive the sink's use).
class FileTraceSink final : public TraceSink {
 public:
  explicit FileTraceSink(std::FILE* out) : out_(out) {}
  void on_step(const TraceRecord& rec) override;

 private:
  std::FILE* out_;
};

/// Traces every state step of qp's requester, responder and completer to
/// sink, or stops tracing it (sink null). The sink is not owned: it must
/// outlive its use by the QP (until set_qp_trace(qp, nullptr) or
/// destroy_qp). Control path: call it from the thread that polls the QP's
/// context, or while nothing polls it (in an EngineGroup: before the engines
/// start or while they are stopped, as create_qp). Errors: kInvalidArgument
/// (null qp).
Status set_qp_trace(Qp* qp, TraceSink* sink);

}  // namespace uroce
