#include "cli/table.h"

#include <algorithm>
#include <utility>

namespace berth::cli {
namespace {

constexpr std::string_view kGap = "   ";

bool IsContinuationByte(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

}  // namespace

std::size_t DisplayWidth(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return !IsContinuationByte(c); }));
}

std::string Truncate(std::string_view text, std::size_t width) {
  if (DisplayWidth(text) <= width) return std::string(text);
  constexpr std::string_view kEllipsis = "...";
  if (width <= kEllipsis.size()) return std::string(kEllipsis.substr(0, width));
  // Keep whole code points only: never split a multi-byte character.
  std::size_t keep = width - kEllipsis.size();
  std::size_t end = 0;
  for (std::size_t seen = 0; end < text.size(); ++end) {
    if (!IsContinuationByte(text[end])) {
      if (seen == keep) break;
      ++seen;
    }
  }
  std::string out(text.substr(0, end));
  out += kEllipsis;
  return out;
}

std::string OneLine(std::string_view text) {
  std::string out(text);
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  return out;
}

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size(), "-");
  for (auto& cell : cells) {
    cell = cell.empty() ? "-" : OneLine(cell);
  }
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<std::size_t> widths(headers_.size());
  for (std::size_t c = 0; c < headers_.size(); ++c) widths[c] = DisplayWidth(headers_[c]);
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], DisplayWidth(row[c]));
    }
  }
  std::string out;
  auto append_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      line += cells[c];
      if (c + 1 < cells.size()) {
        line.append(widths[c] - DisplayWidth(cells[c]), ' ');
        line += kGap;
      }
    }
    out += line;
    out += '\n';
  };
  append_line(headers_);
  for (const auto& row : rows_) append_line(row);
  return out;
}

}  // namespace berth::cli
