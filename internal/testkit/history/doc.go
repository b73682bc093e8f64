// Package history records what lock holders saw and checks it for mutual exclusion (or, for a
// semaphore, that at most n held it at once).
//
// Each process (or goroutine) taking part records its completed lock operations with a
// [Recorder]: for an acquire, the time just before Lock (or RLock, a shared acquire) was called,
// the time just after it returned, the fencing token and the hold count; for a release, the
// times around Unlock. Times come from [Now], a clock that processes on one machine share. The
// recorders' histories are written as JSON lines ([Recorder.WriteFile]) and merged by
// [ReadFiles].
//
// [Check] then decides whether the merged history could have come from one lock:
//
//   - it is linearizable with respect to a readers/writer lock (state: free, the process holding
//     it exclusively, or the set of processes holding it shared; an exclusive acquire is legal
//     only when free, a shared one when free or shared, a release only by a holder of its kind),
//     checked by github.com/anishathalye/porcupine;
//   - no exclusive critical section certainly overlaps another section, exclusive or shared
//     (a cheap check of the same property that does not depend on porcupine, with plain
//     messages); shared sections may overlap each other;
//   - with fencing, the tokens of exclusive sections strictly increase in their order, and a
//     shared section reports the token of the exclusive section before it.
//
// A history of a semaphore's permits (Acquire, TryAcquire and the Unlock of their leases:
// [Recorder.AcquiredPermit], [Recorder.ReleasedPermit], whose operations carry the semaphore's
// number of permits n) is checked as that of one semaphore instead:
//
//   - it is linearizable with respect to a semaphore of n permits (state: the set of processes
//     holding a permit; an acquire by p is legal only when fewer than n hold one and p does not,
//     a release only by a holder), checked by porcupine;
//   - at no instant are more than n sections certainly held (the cheap check, which names the
//     n+1 sections held at once);
//   - with fencing, every permit's token is above 0, larger than the token of every permit whose
//     acquire returned before its acquire was called, and unlike every other permit's (permits
//     whose acquires overlap in time may have drawn their tokens in either order).
//
// On a violation [Result.Visualize] writes porcupine's HTML view of the history, with the
// violations as annotations.
//
// Histories hold completed operations only, of locks taken afresh (every acquire reports one
// hold; fresh permits): a process whose Lock or Unlock fails must end the run instead of
// recording it, since an operation of unknown outcome is not modelled.
package history
