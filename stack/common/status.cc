#include <uroce/status.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_set>

namespace uroce {

const char* status_message(const char* fmt, ...) {
  static std::mutex mu;
  static std::unordered_set<std::string> texts;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(mu);
  return texts.emplace(buf).first->c_str();
}

std::string_view status_code_name(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "Ok";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kInvalidQpState: return "InvalidQpState";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kBusy: return "Busy";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

}  // namespace uroce
