// One EAL for a gtest program: including this header registers a global
// test environment that starts EAL (--no-huge --no-pci: runs anywhere)
// before the first test. An inline variable, so a program whose files
// include it more than once still registers it once.
#pragma once

#include <gtest/gtest.h>

#include <uroce/eal.h>

namespace uroce::test {

class EalEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const Status s = init_eal();
    ASSERT_TRUE(s.ok()) << s.message();
  }
};

inline const auto* const kEalEnvironment = ::testing::AddGlobalTestEnvironment(new EalEnvironment);

}  // namespace uroce::test
