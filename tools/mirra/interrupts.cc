// The interrupt watcher: pthread_sigmask in main, sigwait on a detached thread, and a handler for the
// threads that libraries started before main (OpenBLAS's), which do not block the signals.
#include "tools/mirra/interrupts.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <thread>

namespace mirra::runner {

namespace {

std::atomic<int> received{0};
std::atomic<int> scopes{0};

void on_signal(int signal) {
  if (scopes.load() == 0 || received.load() != 0) std::_Exit(128 + signal);
  received.store(signal);
}

extern "C" void on_signal_handler(int signal) { on_signal(signal); }

sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void start_interrupt_watcher() {
  static_assert(std::atomic<int>::is_always_lock_free, "the handler needs lock-free atomics");
  const sigset_t set = interrupt_signals();
  struct sigaction action {};
  action.sa_handler = on_signal_handler;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int signal = 0;
      if (sigwait(&set, &signal) == 0) on_signal(signal);
    }
  }).detach();
}

InterruptibleScope::InterruptibleScope() { scopes.fetch_add(1); }
InterruptibleScope::~InterruptibleScope() { scopes.fetch_sub(1); }

int interrupt_signal() { return received.load(); }

}  // namespace mirra::runner
