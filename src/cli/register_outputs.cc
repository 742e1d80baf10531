// berth outputs and cp: what a job's run left in its output directory.
#include <string>

#include "cli/registry.h"

namespace berth::cli {
namespace {

struct OutputFlags {
  std::uint64_t job_id = 0;
  std::uint32_t replica = 0;
  std::uint32_t attempt = 0;
  std::string path;
  std::string cp_from;
  std::string cp_to;
  bool cp_recursive = false;

  // --replica and --attempt, which both commands take; returns --attempt.
  CLI::Option* AddSource(CLI::App* cmd) {
    cmd->add_option("--replica", replica, "the replica's outputs (default: 0)")
        ->check(CLI::NonNegativeNumber);
    return cmd
        ->add_option("--attempt", attempt,
                     "this attempt's (default: the latest attempt that started)")
        ->check(CLI::NonNegativeNumber);
  }
  OutputSource SourceOf(const CLI::Option* attempt_opt) const {
    OutputSource src;
    src.replica = replica;
    if (attempt_opt->count() > 0) src.attempt = attempt;
    return src;
  }
};

}  // namespace

void RegisterOutputCommands(CommandRegistry& registry) {
  auto& f = registry.Keep<OutputFlags>();
  auto* outputs = registry.app().add_subcommand(
      "outputs", "list what a job's run left in its output directory (BERTH_OUTPUT_DIR)");
  AddJobId(outputs, f.job_id);
  outputs->add_option("PATH", f.path, "a directory or file below it (default: all of it)");
  auto* outputs_attempt = f.AddSource(outputs);
  registry.OnRun(outputs, [&f, outputs_attempt](ApiClient& api, const Output& out) {
    return ListOutputs(api, f.job_id, f.SourceOf(outputs_attempt), f.path, out);
  });

  auto* cp =
      registry.app().add_subcommand("cp", "download a job's outputs: berth cp JOB:PATH [DEST]");
  cp->add_option("SOURCE", f.cp_from, "JOB:PATH below the job's output directory (JOB: for all)")
      ->required();
  cp->add_option("DEST", f.cp_to, "a file, or a directory to copy into (default: .)");
  cp->add_flag("-r,--recursive", f.cp_recursive, "copy a directory and everything below it");
  auto* cp_attempt = f.AddSource(cp);
  registry.OnRun(cp, [&f, cp_attempt](ApiClient& api, const Output& out) -> Status {
    auto source = ParseCopySource(f.cp_from);
    if (!source) return std::unexpected(source.error());
    return CopyOutputs(api, *source, f.SourceOf(cp_attempt), f.cp_to, f.cp_recursive, out);
  });
}

}  // namespace berth::cli
