// Typed results for the control path (after Abseil's Status / StatusOr).
// The data path never returns these for protocol faults: those become NAK
// syndromes on the wire or WcStatus values in completions.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <variant>

namespace uroce {

enum class StatusCode : uint8_t {
  kOk,
  kInvalidArgument,     ///< a parameter is out of range or inconsistent
  kInvalidQpState,      ///< the call is not allowed in the QP's current state
  kResourceExhausted,   ///< a ring, table or pool is full
  kNotFound,            ///< no object with that handle, key or number
  kBusy,                ///< the object is still referenced (e.g. a PD with MRs)
  kPermissionDenied,    ///< access flags forbid the operation
  kUnavailable,         ///< the port or device is not usable now
  kDataLoss,            ///< input is truncated or corrupt (files, frames)
  kInternal,            ///< a bug: an invariant did not hold
};

/// Returns the enumerator name without the k prefix, e.g. "InvalidArgument".
std::string_view status_code_name(StatusCode c);

/// A status code plus a static message. Messages are string literals so that
/// returning a Status never allocates.
class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  constexpr Status(StatusCode code, const char* msg) : code_(code), msg_(msg) {}

  static constexpr Status ok_status() { return Status(); }
  constexpr bool ok() const { return code_ == StatusCode::kOk; }
  constexpr StatusCode code() const { return code_; }
  constexpr const char* message() const { return msg_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  const char* msg_ = "";
};

/// A Status message with run-time detail (a file name, an errno text),
/// printf-style. The text is interned: each distinct one is stored once for
/// the life of the process, so a Status may point at it and retries do not
/// grow memory. Control path (it takes a lock and may allocate).
[[gnu::format(printf, 1, 2)]] const char* status_message(const char* fmt, ...);

/// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Status s) : v_(s) {}                         // NOLINT: implicit by design
  Result(StatusCode c, const char* msg) : v_(Status(c, msg)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace uroce
