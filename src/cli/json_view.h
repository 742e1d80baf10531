// Null-tolerant reading of berthd's JSON. The API contract lets any key be
// absent or null, and a CLI that throws on a partial object is useless in
// exactly the moments (half-migrated server, odd job) people need it, so every
// read here falls back to "-" or std::nullopt instead.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace berth::cli {

// The value at a dotted path ("spec.resources.gpus"), or nullptr when any step
// is missing, null, or not an object.
const nlohmann::json* Field(const nlohmann::json& obj, std::string_view path);

// Strings as they are, numbers and booleans printed, anything else "-".
std::string Text(const nlohmann::json& obj, std::string_view path);

// A boolean value; `fallback` when it is absent, null or not a boolean (a
// server that sends "yes" is not taken at its word, nor thrown on).
bool Bool(const nlohmann::json& obj, std::string_view path, bool fallback = false);

// An integer value; floats with an integral value count, others do not.
std::optional<std::int64_t> Int(const nlohmann::json& obj, std::string_view path);

// One value printed the way Text() prints it.
std::string ValueText(const nlohmann::json& value);

// The array's elements printed and joined with `sep`; "-" when empty.
std::string Join(const nlohmann::json& array, std::string_view sep);

// Int() printed, or "-".
std::string IntText(const nlohmann::json& obj, std::string_view path);

// The array at `path`, or an empty array, so callers can always iterate.
const nlohmann::json& Array(const nlohmann::json& obj, std::string_view path);

}  // namespace berth::cli
