// Ctrl-C and SIGTERM, kept away from the compute threads: both signals are blocked in main before any
// thread starts (so mirra's, oneTBB's and OpenMP's threads inherit the mask) and taken by a watcher
// thread with sigwait; a handler covers only threads that libraries started before main. (With a
// handler and the signals deliverable to every thread, about one interrupted run in seven crashed.) While a training run has asked for it, a signal only asks training to stop after the
// current step (a second one ends the process at once); otherwise it ends the process with
// exit code 128 + the signal, as the default action would.
#pragma once

namespace mirra::runner {

// Call first in main, before any other thread exists (threads inherit the blocked signals).
void start_interrupt_watcher();

// While an InterruptibleScope lives, signals are recorded instead of ending the process.
class InterruptibleScope {
 public:
  InterruptibleScope();
  ~InterruptibleScope();
  InterruptibleScope(const InterruptibleScope&) = delete;
  InterruptibleScope& operator=(const InterruptibleScope&) = delete;
};

// The signal received inside a scope, or 0.
int interrupt_signal();

}  // namespace mirra::runner
