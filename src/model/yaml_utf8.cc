#include "model/yaml_utf8.h"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"

namespace berth::model {
namespace {

// One step of the path to the node being looked at: a key or a list index.
struct Step {
  std::string_view key;  // empty with `index` set: a list element
  std::size_t index = 0;
  bool is_index = false;
};

class Walker {
 public:
  explicit Walker(std::size_t text_size)
      : max_(kMaxYamlExpansion * text_size + 4096), text_size_(text_size) {}

  Status Walk(const YAML::Node& node) {
    if (++nodes_ > max_) return TooBig();
    if (path_.size() > kMaxYamlDepth) {
      return InvalidField(Path(), fmt::format("nests more than {} levels deep (is a YAML alias "
                                              "inside its own anchor?)",
                                              kMaxYamlDepth));
    }
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        return Text(node.Scalar(), false);
      case YAML::NodeType::Sequence: {
        std::size_t i = 0;
        for (auto it = node.begin(); it != node.end(); ++it, ++i) {
          path_.push_back({{}, i, true});
          BERTH_RETURN_IF_ERROR(Walk(*it));
          path_.pop_back();
        }
        return Ok();
      }
      case YAML::NodeType::Map:
        for (auto it = node.begin(); it != node.end(); ++it) {
          if (it->first.IsScalar()) {
            path_.push_back({it->first.Scalar(), 0, false});
            BERTH_RETURN_IF_ERROR(Text(it->first.Scalar(), true));
          } else {
            // A key that is a list or a map: the parsers refuse it, but it
            // holds text too. Its values are named by the map's path.
            BERTH_RETURN_IF_ERROR(Walk(it->first));
            path_.push_back({"?", 0, false});
          }
          BERTH_RETURN_IF_ERROR(Walk(it->second));
          path_.pop_back();
        }
        return Ok();
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        break;
    }
    return Ok();
  }

 private:
  Status Text(const std::string& s, bool is_key) {
    bytes_ += s.size();
    if (bytes_ > max_) return TooBig();
    if (ValidUtf8(s)) return Ok();
    auto st = CheckUtf8(s, Path());
    if (is_key) st.error().message = "the field name " + st.error().message;
    return st;
  }

  // "command[1]", "env.FOO": the parsers' names for fields.
  std::string Path() const {
    std::string out;
    for (const Step& s : path_) {
      if (s.is_index) {
        out += fmt::format("[{}]", s.index);
      } else {
        if (!out.empty()) out += '.';
        out += s.key;
      }
    }
    return out;
  }

  Status TooBig() const {
    return InvalidField("", fmt::format("the document of {} bytes expands to more than {} values "
                                        "or bytes of text through its YAML aliases (*name); "
                                        "write the values out",
                                        text_size_, max_));
  }

  std::size_t max_;
  std::size_t text_size_;
  std::vector<Step> path_;
  std::size_t nodes_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace

Status CheckYamlUtf8(const YAML::Node& root, std::size_t text_size) {
  // Depth first, in document order, so the first bad value in the text is
  // the one named; the recursion stops at kMaxYamlDepth (yaml-cpp parses
  // 2000 levels, and an alias inside its own anchor makes a cycle).
  return Walker(text_size).Walk(root);
}

}  // namespace berth::model
