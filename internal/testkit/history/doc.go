// Package history records what lock holders saw and checks it for mutual exclusion.
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
// On a violation [Result.Visualize] writes porcupine's HTML view of the history, with the
// violations as annotations.
//
// Histories hold completed operations only, of locks taken afresh (every acquire reports one
// hold): a process whose Lock or Unlock fails must end the run instead of recording it, since an
// operation of unknown outcome is not modelled.
package history
