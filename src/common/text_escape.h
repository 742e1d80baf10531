// Escaping for the formats Berth writes by hand: HTML and SVG (the ops report,
// berth-sim's plots) and CSV (berth audit -o csv, berth usage -o csv). Every
// writer of these formats calls these, so a fix lands everywhere at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace berth {

// &, <, >, " and ' as entities (&amp; &lt; &gt; &quot; &#39;): safe in
// element text and in quoted attribute values of HTML, SVG and XML.
std::string HtmlEscape(std::string_view s);

// One CSV field (RFC 4180): quoted when it holds a comma, a double quote, CR
// or LF, with double quotes doubled; as it is otherwise. There is no
// spreadsheet-formula guard (a leading '=', '+', '-' or '@' is kept): the
// files are data for scripts, and no writer had one.
std::string CsvField(std::string_view v);

// One CSV record: the fields as CsvField writes them, joined by commas, ending
// in CRLF (RFC 4180).
std::string CsvRow(const std::vector<std::string>& fields);

}  // namespace berth
