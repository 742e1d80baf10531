#include "cli/json_view.h"

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace berth::cli {

using nlohmann::json;

const json* Field(const json& obj, std::string_view path) {
  const json* cur = &obj;
  while (true) {
    std::size_t dot = path.find('.');
    std::string_view key = path.substr(0, dot);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end() || it->is_null()) return nullptr;
    cur = &*it;
    if (dot == std::string_view::npos) return cur;
    path.remove_prefix(dot + 1);
  }
}

std::string ValueText(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number() || value.is_boolean()) return value.dump();
  return "-";
}

std::string Text(const json& obj, std::string_view path) {
  const json* value = Field(obj, path);
  return value == nullptr ? "-" : ValueText(*value);
}

std::string Join(const json& array, std::string_view sep) {
  if (!array.is_array() || array.empty()) return "-";
  std::string out;
  for (const auto& element : array) {
    if (!out.empty()) out += sep;
    out += ValueText(element);
  }
  return out;
}

bool Bool(const json& obj, std::string_view path, bool fallback) {
  const json* value = Field(obj, path);
  return value != nullptr && value->is_boolean() ? value->get<bool>() : fallback;
}

std::optional<std::int64_t> Int(const json& obj, std::string_view path) {
  const json* value = Field(obj, path);
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned()) {
    auto u = value->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (value->is_number_integer()) return value->get<std::int64_t>();
  if (value->is_number_float()) {
    double d = value->get<double>();
    // The bounds keep the cast defined.
    if (std::trunc(d) == d && d >= -9.2e18 && d <= 9.2e18) return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

std::string IntText(const json& obj, std::string_view path) {
  auto value = Int(obj, path);
  return value ? std::to_string(*value) : "-";
}

const json& Array(const json& obj, std::string_view path) {
  static const json kEmpty = json::array();
  const json* value = Field(obj, path);
  return value != nullptr && value->is_array() ? *value : kEmpty;
}

}  // namespace berth::cli
