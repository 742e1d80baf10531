// The report of a `berth poc run` (docs/poc.md): the runner's document
// (poc_run.h) scored and rendered. Scores are weighted pass rates per
// capability and per perspective over the cases judged (skipped cases count
// in neither the numerator nor the denominator, and are listed apart); the
// must-fix, limited-launch and later-optimization lists come from the failed
// cases' risk. Markdown and one self-contained HTML file (inline style, no
// script, nothing fetched) are made from the JSON alone, and every value
// that came from the suite or the server is escaped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace berth::cli::poc {

// Adds "summary", "scores" {capabilities, perspectives, overall} and
// "conclusions" {must_fix, limited_launch, later_optimization, not_evaluated}
// to `report` from its "cases".
void ScoreReport(nlohmann::json& report);

std::string RenderMarkdown(const nlohmann::json& report);
std::string RenderHtml(const nlohmann::json& report);

}  // namespace berth::cli::poc
