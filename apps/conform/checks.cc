// What every group of cases checks with: see checks.h.
#include "apps/conform/checks.h"

namespace uroce::apps::conform {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed * 31 + i * 7 + 1);
  return v;
}

std::optional<std::string> qp_state_is(Tester& t, std::string_view want) {
  TargetState st;
  std::string err;
  if (!t.state(st, err)) return "no state from the helper: " + err;
  if (st.qp_state == want) return std::nullopt;
  return "the target's QP is " + st.qp_state + ", not " + std::string(want);
}

std::string completions_text(std::span<const WcStatus> wcs) {
  if (wcs.empty()) return "no completion";
  std::string s;
  for (WcStatus w : wcs) s += (s.empty() ? "'" : ", '") + std::string(wc_status_str(w)) + "'";
  return s;
}

}  // namespace uroce::apps::conform
