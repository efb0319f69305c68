// The target helper on uroce itself (`uroce conform --serve PORT`): see target.cc.
#pragma once

#include <cstdint>
#include <string>

#include "apps/common/endpoint.h"

namespace uroce::apps::conform {

struct ServeConfig {
  EndpointConfig endpoint;       ///< the target's port and addresses
  std::string host = "127.0.0.1";  ///< the control channel listens here
  uint16_t port = 0;
  uint32_t timeout_s = 60;       ///< wait this long for the tester
  bool breaks = false;           ///< --self-test-breaks: run the broken variants a setup asks for
};

/// Serves one tester until it sends quit or closes the channel. Returns the
/// process exit code.
int serve(const ServeConfig& sc);

}  // namespace uroce::apps::conform
