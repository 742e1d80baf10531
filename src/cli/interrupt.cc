#include "cli/interrupt.h"

#include <fmt/format.h>

#include <atomic>
#include <csignal>

namespace berth::cli {
namespace {

// Lock-free, so storing it is async-signal-safe.
std::atomic<int> g_interrupt_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void BerthCliOnInterrupt(int signal) {
  g_interrupt_signal.store(signal, std::memory_order_relaxed);
}

}  // namespace

void InstallInterruptHandlers() {
  struct sigaction action {};
  action.sa_handler = BerthCliOnInterrupt;
  sigemptyset(&action.sa_mask);
  // Interrupted reads and writes resume: the command notices the flag at
  // its next step or poll, never through a failed call.
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int InterruptSignal() {
  return g_interrupt_signal.load(std::memory_order_relaxed);
}

std::string InterruptSignalName(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return fmt::format("signal {}", signal);
}

}  // namespace berth::cli
