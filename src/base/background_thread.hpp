// The threads that work for the application in the background -- the pipeline's worker (seal, L2, L3
// hand-over) and the copy-on-write copier -- run under SCHED_BATCH, the normal time-sharing policy minus
// wake-up preemption: a batch thread does not take the core of the thread that woke it. Without it, the
// worker woken at the end of cairn_checkpoint preempted the application on its own core, and the
// application waited for a core before cairn_checkpoint returned (the figures: docs/performance.md, "What
// the application loses"). Threads that the application waits for (the cow fault handler) keep the normal
// policy.
#pragma once

#include <sched.h>

namespace cairn {

// Puts the calling thread under SCHED_BATCH; a kernel that refuses leaves it as it was.
inline void become_background_thread() {
  sched_param batch{};
  (void)sched_setscheduler(0, SCHED_BATCH, &batch);
}

}  // namespace cairn
