// A tiny template language for the reason catalogue (model/reason_catalogue.h):
// the words of a sentence live in the template, the numbers come in as named
// arguments, so a sentence's English and Chinese share one argument list.
//
//   {name}       the value of argument `name`. A name with no value is left
//                as "{name}" in the output, so a missing argument shows.
//   [a|b|...]    optional segment: the first alternative whose placeholders
//                all have values; nothing when none has. An alternative with
//                no placeholder always matches, so it serves as "otherwise":
//                "[cancelled by {by}|cancelled]". Segments do not nest.
//
// Templates never hold '[', ']', '|', '{' or '}' as text; argument values are
// copied as they are and never read as template syntax.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace berth::model {

// Named values for one template. Names are string literals (the view must
// outlive the arguments); a handful per sentence, so a flat list is fastest.
class TemplateArgs {
 public:
  TemplateArgs& Set(std::string_view name, std::string value);
  TemplateArgs& Set(std::string_view name, std::int64_t value);
  // nullptr when `name` has no value.
  [[nodiscard]] const std::string* Find(std::string_view name) const;

 private:
  std::vector<std::pair<std::string_view, std::string>> values_;
};

// `tmpl` with its placeholders and optional segments filled from `args`.
std::string FillTemplate(std::string_view tmpl, const TemplateArgs& args);

// The names `tmpl` refers to, sorted and without repeats.
std::vector<std::string> TemplatePlaceholders(std::string_view tmpl);

// Empty when `tmpl` is well formed; otherwise what is wrong with it (an
// unclosed or nested bracket or brace, '|' outside a segment, an empty name).
std::string TemplateSyntaxError(std::string_view tmpl);

}  // namespace berth::model
