#include "cli/registry.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/api_error.h"
#include "cli/table.h"

namespace berth::cli {

Result<std::string> ReadDocument(const std::string& path, std::istream& in, std::string_view what) {
  std::ostringstream text;
  if (path == "-") {
    text << in.rdbuf();
    if (in.bad()) {
      return berth::Fail(Code::kInvalidArgument,
                         fmt::format("cannot read the {} from stdin", what));
    }
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return berth::Fail(Code::kInvalidArgument,
                         fmt::format("cannot read {} '{}': it is a directory", what, path));
    }
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      char buf[128];
      return berth::Fail(Code::kInvalidArgument, fmt::format("cannot read {} '{}': {}", what, path,
                                                             strerror_r(errno, buf, sizeof(buf))));
    }
    text << file.rdbuf();
  }
  std::string spec = std::move(text).str();
  if (spec.find_first_not_of(" \t\r\n") == std::string::npos) {
    return berth::Fail(Code::kInvalidArgument,
                       fmt::format("{} '{}' is empty", what, path == "-" ? "<stdin>" : path));
  }
  return spec;
}

CLI::Option* AddJobId(CLI::App* cmd, std::uint64_t& id) {
  return cmd->add_option("ID", id, "job id")->required();
}

CLI::Option* AddBase(CLI::App* cmd, std::int64_t& base) {
  return cmd
      ->add_option("--base", base,
                   "the version the file was written against: refused (409) if another "
                   "version was applied since")
      ->check(CLI::PositiveNumber);
}

void CommandRegistry::ReadsDocument(const CLI::App* cmd, const std::string& path, std::string what,
                                    std::string& text) {
  OnCheck(cmd, [this, &path, what = std::move(what), &text] {
    auto read = ReadDocument(path, env_.in, what);
    if (!read) return Fail(kExitError, FormatError(read.error()));
    text = std::move(*read);
    return kExitOk;
  });
}

int CommandRegistry::Fail(int code, std::string_view message) const {
  env_.err << "berth: " << OneLine(message) << '\n';
  return code;
}

const CommandRegistry::Command* CommandRegistry::Find(const CLI::App* cmd) const {
  auto it = commands_.find(cmd);
  return it == commands_.end() ? nullptr : &it->second;
}

std::map<std::string, bool> CommandRegistry::Table() const {
  std::map<std::string, bool> table;
  auto walk = [&](auto& self, const CLI::App* app, const std::string& prefix) -> void {
    for (const CLI::App* sub : app->get_subcommands({})) {
      const std::string name = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
      if (sub->get_subcommands({}).empty() || sub->get_require_subcommand_min() == 0) {
        const Command* cmd = Find(sub);
        table[name] = cmd != nullptr && cmd->runnable();
      }
      self(self, sub, name);
    }
  };
  walk(walk, &app_, "");
  return table;
}

}  // namespace berth::cli
