#include "cli/table.h"

#include <algorithm>
#include <utility>

namespace berth::cli {
namespace {

constexpr std::string_view kGap = "   ";

bool IsContinuationByte(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// The code point that starts at text[i], and its length in bytes; a byte
// that starts no valid sequence counts as one column of its own.
std::pair<char32_t, std::size_t> CodePointAt(std::string_view text, std::size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  std::size_t len = b < 0x80           ? 1
                    : (b >> 5) == 0x6  ? 2
                    : (b >> 4) == 0xE  ? 3
                    : (b >> 3) == 0x1E ? 4
                                       : 1;
  if (i + len > text.size()) len = 1;
  if (len == 1) return {b, 1};
  char32_t cp = b & (0x7F >> len);
  for (std::size_t k = 1; k < len; ++k) {
    if (!IsContinuationByte(text[i + k])) return {b, 1};
    cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  }
  return {cp, len};
}

// Columns a terminal gives the code point: two for East Asian wide and
// full-width characters (Han, Hangul, kana, full-width punctuation such as
// "："), one for the rest.
std::size_t Columns(char32_t cp) {
  const bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0x303E) ||
                    (cp >= 0x3041 && cp <= 0xA4CF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
                    (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) ||
                    (cp >= 0xFF00 && cp <= 0xFF60) || (cp >= 0xFFE0 && cp <= 0xFFE6) ||
                    (cp >= 0x20000 && cp <= 0x3FFFD);
  return wide ? 2 : 1;
}

}  // namespace

std::size_t DisplayWidth(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    auto [cp, len] = CodePointAt(text, i);
    width += Columns(cp);
    i += len;
  }
  return width;
}

std::string Truncate(std::string_view text, std::size_t width) {
  if (DisplayWidth(text) <= width) return std::string(text);
  constexpr std::string_view kEllipsis = "...";
  if (width <= kEllipsis.size()) return std::string(kEllipsis.substr(0, width));
  // Keep whole code points only: never split a multi-byte character, nor
  // go past the width with a wide one.
  const std::size_t keep = width - kEllipsis.size();
  std::size_t end = 0;
  for (std::size_t seen = 0; end < text.size();) {
    auto [cp, len] = CodePointAt(text, end);
    if (seen + Columns(cp) > keep) break;
    seen += Columns(cp);
    end += len;
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
