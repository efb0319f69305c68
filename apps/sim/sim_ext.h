// `uroce sim --ext`: the transport extension (issue 23, docs/LOSS_RECOVERY.md)
// the sim's RC QP pairs ask for, one word per variant. Both ends of a pair
// set the same QpExt at INIT -> RTR (kQpExt); kOff sets none, so those QPs
// are plain RoCE, go-back-N on one UDP source port.
#pragma once

#include <cstdint>
#include <string_view>

#include <uroce/verbs.h>

namespace uroce::apps::sim {

enum class ExtMode : uint8_t {
  kOff,      ///< no extension: go-back-N, one source port
  kSpray,    ///< go-back-N sprayed over --paths source ports (reordering looks like loss to it)
  kSr,       ///< selective repeat on one source port
  kSrSpray,  ///< selective repeat, sprayed over --paths source ports
};

/// The words of --ext, in ExtMode's order.
inline constexpr std::string_view kExtChoices = "off|spray|sr|sr-spray";

inline constexpr std::string_view ext_name(ExtMode m) {
  switch (m) {
    case ExtMode::kOff: return "off";
    case ExtMode::kSpray: return "spray";
    case ExtMode::kSr: return "sr";
    case ExtMode::kSrSpray: return "sr-spray";
  }
  return "?";
}

/// The mode a --ext word names (a word kExtChoices lists; anything else is kOff).
inline ExtMode ext_mode(std::string_view word) {
  for (ExtMode m : {ExtMode::kSpray, ExtMode::kSr, ExtMode::kSrSpray}) {
    if (ext_name(m) == word) return m;
  }
  return ExtMode::kOff;
}

/// The QpExt of a mode with `paths` source ports when it sprays.
inline QpExt qp_ext(ExtMode m, uint16_t paths) {
  QpExt e;
  e.selective_repeat = m == ExtMode::kSr || m == ExtMode::kSrSpray;
  e.paths = m == ExtMode::kSpray || m == ExtMode::kSrSpray ? paths : 1;
  e.path_mode = PathMode::kPacket;
  return e;
}

}  // namespace uroce::apps::sim
