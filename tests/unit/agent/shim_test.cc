// berth-shim run directly on prepared run directories, as the runner would.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "agent/atomic_file.h"
#include "agent/run_files.h"
#include "test_util.h"

extern char** environ;

namespace berth::agent {
namespace {

using testing::Slurp;
using testing::TempDir;

class ShimTest : public ::testing::Test {
 protected:
  // Writes spec.json for `command` and runs the shim to completion.
  ExitRecord Run(std::vector<std::string> command, std::map<std::string, std::string> env = {},
                 std::string working_dir = "") {
    if (!env.contains("PATH")) env["PATH"] = "/usr/bin:/bin";
    ShimSpec spec{std::move(command), std::move(env), std::move(working_dir), LogPath()};
    EXPECT_EQ(WriteFileAtomic(In(kSpecFile), ToJson(spec)), 0);
    EXPECT_EQ(RunShim(), 0);
    auto text = ReadWholeFile(In(kExitFile));
    EXPECT_TRUE(text.has_value());
    auto rec = ParseExitRecord(text.value_or("{}"));
    EXPECT_TRUE(rec.has_value());
    return rec.value_or(ExitRecord{});
  }

  int RunShim() {
    std::string shim = BERTH_SHIM_PATH;
    std::string run_dir = dir_.path().string();
    char* argv[] = {shim.data(), run_dir.data(), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, shim.c_str(), nullptr, nullptr, argv, environ) != 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string In(std::string_view name) const { return (dir_.path() / name).string(); }
  std::string LogPath() const { return In(kLogFile); }

  TempDir dir_;
};

TEST_F(ShimTest, RecordsExitCodeAndBothStreamsInTheLog) {
  auto rec = Run({"sh", "-c", "echo hi; echo err >&2; exit 3"});
  EXPECT_EQ(rec.exit_code, 3);
  EXPECT_EQ(rec.signal, 0);
  EXPECT_TRUE(rec.start_error.empty());
  EXPECT_GT(rec.started_at_ms, 0);
  EXPECT_GE(rec.ended_at_ms, rec.started_at_ms);
  EXPECT_EQ(Slurp(LogPath()), "hi\nerr\n");
  auto pid = ParsePidRecord(ReadWholeFile(In(kPidFile)).value_or(""));
  ASSERT_TRUE(pid.has_value());
  EXPECT_GT(pid->pid, 0);
  EXPECT_EQ(pid->pgid, pid->pid);  // the job leads its own process group
  EXPECT_NE(pid->shim_pid, pid->pid);
  EXPECT_EQ(pid->started_at_ms, rec.started_at_ms);
}

TEST_F(ShimTest, JobKilledBySignalRecordsTheSignal) {
  auto rec = Run({"sh", "-c", "kill -9 $$"});
  EXPECT_EQ(rec.signal, 9);
  EXPECT_TRUE(rec.start_error.empty());
}

TEST_F(ShimTest, CommandNotFoundIs127WithStartError) {
  auto rec = Run({"berth-definitely-not-a-command", "x"});
  EXPECT_EQ(rec.exit_code, 127);
  EXPECT_EQ(rec.signal, 0);
  EXPECT_EQ(rec.start_error,
            "cannot start 'berth-definitely-not-a-command': No such file or directory");
  EXPECT_EQ(Slurp(LogPath()),
            "berth: cannot start 'berth-definitely-not-a-command': No such file or directory\n");
}

TEST_F(ShimTest, NotExecutableIs126) {
  TempDir bin;
  testing::WriteText(bin.path() / "tool", "#!/bin/sh\necho never\n");
  ::chmod((bin.path() / "tool").c_str(), 0644);
  auto rec = Run({(bin.path() / "tool").string()});
  EXPECT_EQ(rec.exit_code, 126);
  EXPECT_NE(rec.start_error.find("Permission denied"), std::string::npos) << rec.start_error;
}

TEST_F(ShimTest, BadWorkingDirectoryIs126) {
  auto rec = Run({"true"}, {}, "/nonexistent/berth-dir");
  EXPECT_EQ(rec.exit_code, 126);
  EXPECT_NE(rec.start_error.find("working directory '/nonexistent/berth-dir'"), std::string::npos)
      << rec.start_error;
}

TEST_F(ShimTest, LooksUpCommandInTheJobsPathAndGivesExactlyTheJobsEnv) {
  TempDir bin;
  testing::WriteText(bin.path() / "berth-hello", "#!/bin/sh\necho \"$GREETING $(pwd)\"\nenv\n");
  ::chmod((bin.path() / "berth-hello").c_str(), 0755);
  TempDir work;
  auto rec = Run({"berth-hello"},
                 {{"PATH", bin.path().string() + ":/usr/bin:/bin"}, {"GREETING", "hello"}},
                 work.path().string());
  EXPECT_EQ(rec.exit_code, 0) << rec.start_error;
  std::string log = Slurp(LogPath());
  EXPECT_EQ(log.rfind("hello " + work.path().string() + "\n", 0), 0u) << log;
  EXPECT_EQ(log.find("HOME="), std::string::npos) << "leaked the caller's environment: " << log;
}

TEST_F(ShimTest, ASecondShimOnAFinishedRunDoesNothing) {
  auto rec = Run({"sh", "-c", "echo once"});
  EXPECT_EQ(rec.exit_code, 0);
  std::string before = Slurp(In(kExitFile));
  EXPECT_EQ(RunShim(), 0);
  EXPECT_EQ(Slurp(LogPath()), "once\n");
  EXPECT_EQ(Slurp(In(kExitFile)), before);
}

TEST_F(ShimTest, SpecErrorsBecomeStartErrors) {
  testing::WriteText(In(kSpecFile), "{not json");
  EXPECT_EQ(RunShim(), 0);
  auto rec = ParseExitRecord(ReadWholeFile(In(kExitFile)).value_or(""));
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->exit_code, 126);
  EXPECT_NE(rec->start_error.find("spec.json"), std::string::npos);
}

}  // namespace
}  // namespace berth::agent
