#include "model/yaml_object.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "common/utf8.h"
#include "model/names.h"
#include "model/yaml_utf8.h"

namespace berth::model {
namespace {

// `allowed` nullopt: any plain key.
Status CheckKeys(const YAML::Node& node, const std::string& path,
                 std::optional<std::span<const std::string_view>> allowed) {
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    // A key that is a list or a map has no name to check (and as<string>
    // would throw).
    if (!it->first.IsScalar()) return InvalidField(path, "field names must be plain strings");
    const std::string& key = it->first.Scalar();
    std::string field = FieldPath(path, key);
    if (allowed && std::find(allowed->begin(), allowed->end(), key) == allowed->end()) {
      return InvalidField(
          std::move(field),
          fmt::format("unknown field '{}'; allowed fields are: {}", key, JoinNames(*allowed)));
    }
    if (!seen.insert(key).second) {
      std::string message = fmt::format("field '{}' is given twice; give it once", field);
      return InvalidField(std::move(field), std::move(message));
    }
  }
  return Ok();
}

}  // namespace

std::string FieldPath(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

Result<YamlObject> YamlObject::Read(const YAML::Node& node, std::string path,
                                    std::span<const std::string_view> allowed,
                                    std::string_view not_a_mapping) {
  if (!node.IsMap()) return InvalidField(std::move(path), std::string(not_a_mapping));
  BERTH_RETURN_IF_ERROR(CheckKeys(node, path, allowed));
  return YamlObject(node, std::move(path));
}

Result<YamlObject> YamlObject::ReadAnyKeys(const YAML::Node& node, std::string path,
                                           std::string_view not_a_mapping) {
  if (!node.IsMap()) return InvalidField(std::move(path), std::string(not_a_mapping));
  BERTH_RETURN_IF_ERROR(CheckKeys(node, path, std::nullopt));
  return YamlObject(node, std::move(path));
}

Status ReadDocument(std::string_view text, std::size_t max_bytes, std::string_view what,
                    const std::function<Status(const YAML::Node&)>& read) {
  if (max_bytes > 0 && text.size() > max_bytes) {
    return InvalidField("", fmt::format("the {} is {} bytes; at most {} are allowed", what,
                                        text.size(), max_bytes));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidField(
        "", fmt::format("the {} is not a valid YAML document: line {}, column {}: {}", what,
                        e.mark.line + 1, e.mark.column + 1, EscapeInvalidUtf8(e.msg)));
  }
  try {
    BERTH_RETURN_IF_ERROR(CheckYamlUtf8(root, text.size()));
    return read(root);
  } catch (const YAML::Exception& e) {
    return InvalidField(
        "", fmt::format("could not read the {}: {}", what, EscapeInvalidUtf8(e.what())));
  }
}

}  // namespace berth::model
