#include "model/message_template.h"

#include <algorithm>

namespace berth::model {

TemplateArgs& TemplateArgs::Set(std::string_view name, std::string value) {
  for (auto& [n, v] : values_) {
    if (n == name) {
      v = std::move(value);
      return *this;
    }
  }
  values_.emplace_back(name, std::move(value));
  return *this;
}

TemplateArgs& TemplateArgs::Set(std::string_view name, std::int64_t value) {
  return Set(name, std::to_string(value));
}

const std::string* TemplateArgs::Find(std::string_view name) const {
  for (const auto& [n, v] : values_) {
    if (n == name) return &v;
  }
  return nullptr;
}

namespace {

// Calls f(name) for each "{name}" in `text` (text holds no segment syntax).
template <typename F>
void ForEachPlaceholder(std::string_view text, F&& f) {
  for (std::size_t open = text.find('{'); open != std::string_view::npos;
       open = text.find('{', open + 1)) {
    const std::size_t close = text.find('}', open);
    if (close == std::string_view::npos) return;
    f(text.substr(open + 1, close - open - 1));
  }
}

bool AllHaveValues(std::string_view text, const TemplateArgs& args) {
  bool all = true;
  ForEachPlaceholder(text, [&](std::string_view name) { all = all && args.Find(name) != nullptr; });
  return all;
}

// Appends `text` (no segments) with its placeholders filled.
void AppendFilled(std::string& out, std::string_view text, const TemplateArgs& args) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t open = text.find('{', at);
    const std::size_t close = open == std::string_view::npos ? open : text.find('}', open);
    if (close == std::string_view::npos) {
      out += text.substr(at);
      return;
    }
    out += text.substr(at, open - at);
    const std::string_view name = text.substr(open + 1, close - open - 1);
    if (const std::string* value = args.Find(name)) {
      out += *value;
    } else {
      out += text.substr(open, close - open + 1);
    }
    at = close + 1;
  }
}

// Calls f(alternative) for each '|'-separated part of a segment's inside.
template <typename F>
bool ForEachAlternative(std::string_view inside, F&& f) {
  while (true) {
    const std::size_t bar = inside.find('|');
    if (f(inside.substr(0, bar))) return true;
    if (bar == std::string_view::npos) return false;
    inside.remove_prefix(bar + 1);
  }
}

}  // namespace

std::string FillTemplate(std::string_view tmpl, const TemplateArgs& args) {
  std::string out;
  out.reserve(tmpl.size() + 32);
  std::size_t at = 0;
  while (at < tmpl.size()) {
    const std::size_t open = tmpl.find('[', at);
    const std::size_t close = open == std::string_view::npos ? open : tmpl.find(']', open);
    if (close == std::string_view::npos) {
      AppendFilled(out, tmpl.substr(at), args);
      break;
    }
    AppendFilled(out, tmpl.substr(at, open - at), args);
    ForEachAlternative(tmpl.substr(open + 1, close - open - 1), [&](std::string_view alt) {
      if (!AllHaveValues(alt, args)) return false;
      AppendFilled(out, alt, args);
      return true;
    });
    at = close + 1;
  }
  return out;
}

std::vector<std::string> TemplatePlaceholders(std::string_view tmpl) {
  std::vector<std::string> names;
  ForEachPlaceholder(tmpl, [&](std::string_view name) { names.emplace_back(name); });
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string TemplateSyntaxError(std::string_view tmpl) {
  bool in_segment = false;
  bool in_name = false;
  std::size_t name_start = 0;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    const char c = tmpl[i];
    if (in_name) {
      if (c == '}') {
        if (i == name_start) return "an empty placeholder at byte " + std::to_string(i);
        in_name = false;
      } else if (c == '{' || c == '[' || c == ']' || c == '|') {
        return "a placeholder not closed before byte " + std::to_string(i);
      }
      continue;
    }
    switch (c) {
      case '{':
        in_name = true;
        name_start = i + 1;
        break;
      case '}':
        return "a '}' with no '{' at byte " + std::to_string(i);
      case '[':
        if (in_segment) return "a nested '[' at byte " + std::to_string(i);
        in_segment = true;
        break;
      case ']':
        if (!in_segment) return "a ']' with no '[' at byte " + std::to_string(i);
        in_segment = false;
        break;
      case '|':
        if (!in_segment) return "a '|' outside [...] at byte " + std::to_string(i);
        break;
      default:
        break;
    }
  }
  if (in_name) return "an unclosed '{'";
  if (in_segment) return "an unclosed '['";
  return "";
}

}  // namespace berth::model
