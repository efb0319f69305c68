// The report of a `uroce conform` run: the Markdown table (stdout), JSON and
// JUnit XML (--report-dir), each with, per case, the rule, what was expected,
// what was seen and the verdict. Control path.
#pragma once

#include <cstdio>
#include <span>
#include <string>

#include "apps/conform/conform.h"

namespace uroce::apps::conform {

struct RunInfo {
  std::string target;      ///< what was tested ("127.0.0.1:18515", "self", ...)
  bool broken = false;     ///< the self-test's broken variants: every case must deviate
  bool strict = false;     ///< not applicable fails too (the self-test: uroce must be able to run every case)
  uint32_t wait_ms = 0;    ///< the quiet period that bounds "no answer"
};

/// The verdict a case must reach in this run: deviates against a broken variant, else conforms.
Verdict wanted(const RunInfo& info);
/// True if r passes in this run (not applicable passes unless strict; an error never does).
bool passes(const RunInfo& info, const CaseResult& r);

void write_markdown(std::FILE* f, const RunInfo& info, std::span<const CaseResult> results);
std::string json_report(const RunInfo& info, std::span<const CaseResult> results);
std::string junit_report(const RunInfo& info, std::span<const CaseResult> results);

}  // namespace uroce::apps::conform
