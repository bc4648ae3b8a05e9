// Who holds the flock that refused a pool's open: for the Busy message
// only (docs/pool-format.md, "What open checks", step 2).
#pragma once

namespace pmindex::pm {

// True if this process holds a flock on the file open as `fd` (a second
// Pool::Open of a pool this process has open, or a lock it took itself),
// as /proc/locks reports it. False when it cannot tell (no /proc).
bool FlockHeldByThisProcess(int fd);

}  // namespace pmindex::pm
