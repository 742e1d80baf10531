// `berth poc rerun REPORT --failed` (docs/poc.md "Re-testing what failed"):
// the pure parts. An earlier report.json is read back, the suite given now
// must be the one it ran (same SHA-256, else the verdicts would not be
// comparable), and only the cases that failed run again (RunOptions::
// only_cases; the others are left out of the new report). The new report
// says which report it re-tests (`rerun_of`) and each case's verdict there
// (`previous_verdict`), and its Markdown and HTML gain a short section
// listing them, before the environment.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/poc_suite.h"
#include "common/status.h"

namespace berth::cli::poc {

// An earlier report as read back.
struct EarlierReport {
  std::string path;  // the report.json read
  nlohmann::json doc;
};

// Reads `path`: a report.json, or a directory holding one. Errors name the
// path and say what is wrong (missing, not JSON, not a berth poc report).
Result<EarlierReport> ReadEarlierReport(const std::string& path);

// The ids of the cases whose verdict is "fail", in the report's order.
std::set<std::string> FailedCases(const nlohmann::json& report);

// The cases a rerun runs: those that failed (with `failed`) and those
// `ids` names (--case, repeatable), in the report's order, duplicates once.
// An id the report has no case of is InvalidArgument (field `case`) naming
// it and listing the report's ids; neither --failed nor --case is
// InvalidArgument saying to give one.
Result<std::set<std::string>> SelectRerunCases(const nlohmann::json& report, bool failed,
                                               const std::vector<std::string>& ids);

// OK when `suite` is the one the report ran (environment.suite.sha256);
// else FailedPrecondition naming both hashes, --suite and the fix.
// `suite_path` is the --suite given ("" for the built-in suite).
Status CheckSameSuite(const EarlierReport& earlier, const Suite& suite,
                      const std::string& suite_path);

// Adds "rerun_of" {run, path, started_ms} and, to each case, its
// "previous_verdict" (and "previous_reason") in the earlier report.
void MarkRerun(nlohmann::json& report, const EarlierReport& earlier);

// The rendered report with the re-run section inserted before the
// environment (appended where the renderer has no such heading); the
// report unchanged when it is not a re-run.
std::string WithRerunMarkdown(std::string rendered, const nlohmann::json& report);
std::string WithRerunHtml(std::string rendered, const nlohmann::json& report);

}  // namespace berth::cli::poc
