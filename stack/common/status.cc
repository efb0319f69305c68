#include <uroce/status.h>

namespace uroce {

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
