#include "integration/fixture.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "model/policy.h"

namespace berth::it {

void OwnedByTenant(const std::filesystem::path& dir, const std::string& tenant) {
  std::filesystem::create_directories(dir);
  const std::uint32_t id = model::DerivedUid(tenant);
  if (::chown(dir.c_str(), id, id) != 0)
    ADD_FAILURE() << "chown " << dir << ": " << std::strerror(errno);
}
namespace {

std::string Tail(const std::string& text, std::size_t lines) {
  std::size_t pos = text.size();
  for (std::size_t n = 0; n <= lines && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

}  // namespace

std::string JobSpecJson(const std::string& name, const std::vector<std::string>& command, int gpus,
                        const nlohmann::json& extra) {
  nlohmann::json spec{{"name", name}, {"command", command}};
  if (gpus > 0) spec["resources"] = {{"gpus", gpus}};
  spec.update(extra);
  return spec.dump();
}

Berthd& IntegrationTest::NewBerthd(BerthdOptions options) {
  berthds_.push_back(std::make_unique<Berthd>(dir_, std::move(options)));
  return *berthds_.back();
}

Process& IntegrationTest::NewAgent(const Berthd& berthd, const std::filesystem::path& data_dir,
                                   const std::filesystem::path& simulate,
                                   const std::string& log_name,
                                   const std::map<std::string, std::string>& env,
                                   const std::vector<std::string>& extra_args) {
  agents_.push_back(StartAgent(dir_, berthd, data_dir, simulate, log_name, env, extra_args));
  return *agents_.back();
}

void IntegrationTest::TearDown() {
  if (!HasFailure()) return;
  dir_.keep();
  for (std::size_t i = 0; i < berthds_.size(); ++i) {
    if (!berthds_[i]->running()) continue;
    auto out = dir_ / fmt::format("berthd-{}.stacks", i);
    DumpStacks(berthds_[i]->pid(), out);
    std::cerr << fmt::format("berthd was still running; its stacks are in {}\n", out.string());
  }
  for (std::size_t i = 0; i < agents_.size(); ++i) {
    if (!agents_[i]->running()) continue;
    auto out = dir_ / fmt::format("agent-{}.stacks", i);
    DumpStacks(agents_[i]->pid(), out);
    std::cerr << fmt::format("an agent was still running; its stacks are in {}\n", out.string());
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path(), ec)) {
    if (entry.path().extension() != ".log") continue;
    std::cerr << fmt::format("---- last lines of {} ----\n{}\n", entry.path().string(),
                             Tail(ReadFile(entry.path()), 40));
  }
}

CommandResult IntegrationTest::Cli(const Berthd& berthd,
                                   const std::vector<std::string>& args) const {
  std::vector<std::string> all{"--server", berthd.url()};
  if (berthd.tls()) all.insert(all.end(), {"--ca", berthd.ca_file().string()});
  all.insert(all.end(), args.begin(), args.end());
  return RunCommand(BinDir() / "berth", all, dir_.path());
}

std::filesystem::path IntegrationTest::WriteCluster(const std::string& node, int gpus) const {
  return WriteCluster(std::vector<std::string>{node}, gpus);
}

std::filesystem::path IntegrationTest::WriteCluster(const std::vector<std::string>& nodes,
                                                    int gpus) const {
  auto path = dir_ / "cluster.yaml";
  std::string text = "nodes:\n";
  for (const auto& node : nodes) {
    text += fmt::format(
        "  - name: {}\n"
        "    cpus: 16\n"
        "    memory: 64Gi\n"
        "    gpus: {{model: H100-80GB, memory: 80Gi, count: {}}}\n",
        node, gpus);
  }
  WriteFile(path, text);
  return path;
}

void PostgresIntegrationTest::SetUp() {
  if (auto why = tests::PgServerUnavailable()) GTEST_SKIP() << *why;
  auto server = tests::PgServer::Start();
  ASSERT_TRUE(server.has_value()) << server.error();
  server_ = std::move(*server);
}

}  // namespace berth::it
