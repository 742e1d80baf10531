// The one strict reader of a YAML mapping in a document from outside (job
// spec, policy, price table, alert rules): before a parser reads a field, the
// mapping it sits in is checked here once, with the same rules and the same
// errors for every document type.
//
// Refused, each a kInvalidArgument naming the full field path:
//  - a node that is not a mapping (the caller's message, which shows the shape);
//  - a key that is a list or a map ("field names must be plain strings");
//  - a key not among the allowed ones ("unknown field 'colour'; allowed
//    fields are: name, command, ...", the field being "resources.colour");
//  - a key given twice ("field 'queues[0].quota.gpus' is given twice; give it
//    once"). yaml-cpp keeps both pairs of a repeated key when it parses, and a
//    lookup returns one of them; which one a reader keeps differs between
//    YAML and JSON readers, so a check made on one copy might not hold for
//    the copy used. Refusing the document is the only safe answer.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace berth::model {

// Reads one document from outside (a job or service spec, a policy, a price
// table, alert rules): at most `max_bytes` of it (0: no bound), a valid YAML
// document whose strings are all UTF-8, then `read` on its root. yaml-cpp
// reports some lookups by exception; here they become an error naming `what`
// ("spec", "policy"), so none leaves the model library.
Status ReadDocument(std::string_view text, std::size_t max_bytes, std::string_view what,
                    const std::function<Status(const YAML::Node&)>& read);

// "resources.gpus"; just "gpus" at the top of a document (parent "").
std::string FieldPath(std::string_view parent, std::string_view key);

// A mapping that passed the checks above, with the path its fields are
// named by.
class YamlObject {
 public:
  // `path` names the mapping itself ("" for a document's root,
  // "queues[0].quota"); `not_a_mapping` is the message when `node` is not a
  // mapping. An undefined `node` (a missing field) is not a mapping either:
  // the caller decides whether a field is required before reading it.
  static Result<YamlObject> Read(const YAML::Node& node, std::string path,
                                 std::span<const std::string_view> allowed,
                                 std::string_view not_a_mapping = "must be a mapping");
  // The same checks, but any plain key is allowed (env, node_selector: maps
  // whose keys are the user's names).
  static Result<YamlObject> ReadAnyKeys(const YAML::Node& node, std::string path,
                                        std::string_view not_a_mapping = "must be a mapping");

  bool Has(std::string_view key) const { return static_cast<bool>(node_[std::string(key)]); }
  // The value of `key`; an undefined node when it is absent.
  YAML::Node Get(std::string_view key) const { return node_[std::string(key)]; }
  // The full path of `key`, as errors name it.
  std::string PathOf(std::string_view key) const { return FieldPath(path_, key); }
  const std::string& path() const { return path_; }
  const YAML::Node& node() const { return node_; }

 private:
  YamlObject(YAML::Node node, std::string path) : node_(std::move(node)), path_(std::move(path)) {}

  YAML::Node node_;
  std::string path_;
};

}  // namespace berth::model
