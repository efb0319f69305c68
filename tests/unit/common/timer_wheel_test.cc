// The hashed timer wheel (stack/common/timer_wheel.h): deadlines, cancel and
// re-arm, against a model under random jumps of the clock.
#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "stack/common/rng.h"
#include "stack/common/timer_wheel.h"

namespace uroce::test {
namespace {

// Arm timers at various distances (beyond one revolution too), cancel one,
// re-arm one. Expect: each fires exactly once, at the first advance at or after its deadline.
TEST(TimerWheel, FiresAtDeadlineOnly) {
  TimerWheel w;
  w.init(4, 0);
  std::vector<std::pair<uint32_t, uint64_t>> fired;
  auto at = [&](uint64_t t) { w.advance(t, [&](uint32_t id) { fired.push_back({id, t}); }); };
  w.arm(0, 5'000);
  w.arm(1, 10'000'000);  // > one 4.19 ms revolution
  w.arm(2, 7'000);
  w.arm(3, 8'000);
  w.cancel(2);
  w.arm(3, 9'500);
  at(4'999);
  EXPECT_TRUE(fired.empty());
  at(5'000);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].first, 0u);
  at(9'000);
  EXPECT_EQ(fired.size(), 1u);
  at(9'600);
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[1].first, 3u);
  at(9'999'999);
  EXPECT_EQ(fired.size(), 2u);
  at(50'000'000);
  ASSERT_EQ(fired.size(), 3u);
  EXPECT_EQ(fired[2].first, 1u);
  EXPECT_FALSE(w.armed(1));
}

// Random arms, re-arms, cancels and clock steps from 1 ns to many
// revolutions (the big jumps a virtual clock or a descheduled engine makes).
// Expect: the wheel fires exactly what a plain list of deadlines says is due,
// no more and no earlier, and armed_count() agrees.
TEST(TimerWheel, MatchesModelUnderRandomJumps) {
  constexpr uint32_t kIds = 64;
  TimerWheel w;
  uint64_t now = 123'456;
  w.init(kIds, now);
  std::vector<uint64_t> model(kIds, 0);  // 0: disarmed
  uint64_t rng = 0x7177;
  auto draw = [&rng](uint64_t n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (rng >> 33) % n;
  };
  for (int step = 0; step < 20000; ++step) {
    const uint32_t id = uint32_t(draw(kIds));
    switch (draw(4)) {
      case 0: w.cancel(id); model[id] = 0; break;
      default: {
        const uint64_t d = now + (draw(8) == 0 ? draw(50'000'000) : draw(20'000)) + 1;
        w.arm(id, d);
        model[id] = d;
      }
    }
    const uint64_t jump = draw(16) == 0 ? draw(100'000'000) : draw(3'000);
    now += jump;
    std::vector<uint32_t> fired;
    w.advance(now, [&](uint32_t f) { fired.push_back(f); });
    std::vector<uint32_t> due;
    for (uint32_t i = 0; i < kIds; ++i) {
      if (model[i] && model[i] <= now) {
        due.push_back(i);
        model[i] = 0;
      }
    }
    std::sort(fired.begin(), fired.end());
    ASSERT_EQ(fired, due) << "step " << step << " now " << now;
    uint32_t armed = 0;
    for (uint32_t i = 0; i < kIds; ++i) {
      ASSERT_EQ(w.armed(i), model[i] != 0) << "id " << i;
      armed += model[i] != 0;
    }
    ASSERT_EQ(w.armed_count(), armed);
  }
}

}  // namespace
}  // namespace uroce::test
