// What every group of cases checks with: verdicts with what was seen, the
// payload pattern, and the target's state through its helper. Control path.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "apps/conform/conform.h"

namespace uroce::apps::conform {

inline Outcome conforms(std::string seen) { return {Verdict::kConforms, std::move(seen)}; }
inline Outcome deviates(std::string seen) { return {Verdict::kDeviates, std::move(seen)}; }
inline Outcome error(const std::string& err) { return {Verdict::kError, err}; }

/// n bytes of a pattern of seed (different seeds, different bytes at each offset).
std::vector<uint8_t> pattern(size_t n, uint8_t seed);

/// nullopt if the target's QP is in state want (the helper's view), else what it is.
std::optional<std::string> qp_state_is(Tester& t, std::string_view want);

/// "'success', 'work request flushed error'" (ibv_wc_status_str's words).
std::string completions_text(std::span<const WcStatus> wcs);

}  // namespace uroce::apps::conform
