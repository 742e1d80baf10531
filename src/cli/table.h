// Plain-text tables for the CLI's human output: left-aligned columns sized to
// their widest cell, kubectl-style. Rendering is pure so tests can compare
// exact text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace berth::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers);

  // Rows shorter than the header are padded with "-"; extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  // Columns are separated by three spaces; lines carry no trailing blanks.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Width in terminal columns: one per UTF-8 code point, two for East Asian
// wide characters (server strings such as reason messages, and every label
// of `berth why --lang zh`, hold Chinese text).
std::size_t DisplayWidth(std::string_view text);

// Cuts `text` to at most `width` columns, ending in "..." when cut.
std::string Truncate(std::string_view text, std::size_t width);

// Replaces newlines and tabs with spaces so one value stays on one line.
std::string OneLine(std::string_view text);

}  // namespace berth::cli
