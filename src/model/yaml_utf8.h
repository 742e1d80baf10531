// The first check every parser of a YAML (or JSON) document from outside
// runs: each key and each string value must be valid UTF-8. Berth stores
// and serves what it accepts as JSON and protobuf strings, which cannot hold
// other bytes; refused here, such a byte is a 400 naming its field instead
// of a failure wherever the value is written out later.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>

#include "common/status.h"

namespace berth::model {

// How far a document may grow through its aliases (*name): its nodes, and
// the bytes of its keys and scalars, may number at most this many times its
// own size (plus a little). Without aliases neither can exceed the size; a
// few lines of nested aliases could otherwise make the walk (and the parser
// after it) visit billions of values.
inline constexpr std::size_t kMaxYamlExpansion = 16;
// How deep the walk goes. No Berth document nests more than a dozen levels;
// an alias that refers to its own anchor (`&a [*a]`) nests without end.
inline constexpr std::size_t kMaxYamlDepth = 512;

// kInvalidArgument for the first key or scalar (in document order) that is
// not valid UTF-8, with `field` its path as the parsers name fields
// ("command[1]", "env.FOO", "resources.gpu_model"; a bad key is named with
// its bytes escaped) and the offending byte and its offset in the message.
// `text_size` is the size of the document `root` was loaded from.
Status CheckYamlUtf8(const YAML::Node& root, std::size_t text_size);

}  // namespace berth::model
