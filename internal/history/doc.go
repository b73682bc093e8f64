// Package history records what lock holders saw and checks it for mutual exclusion.
//
// Each process (or goroutine) taking part records its completed lock operations with a
// [Recorder]: for an acquire, the time just before Lock was called, the time just after it
// returned, the fencing token and the hold count; for a release, the times around Unlock. Times
// come from [Now], a clock that processes on one machine share. The recorders' histories are
// written as JSON lines ([Recorder.WriteFile]) and merged by [ReadFiles].
//
// [Check] then decides whether the merged history could have come from one lock:
//
//   - it is linearizable with respect to a lock (state: the holding process, or free; an
//     acquire is legal only when free, a release only by the holder), checked by
//     github.com/anishathalye/porcupine;
//   - no two critical sections certainly overlap (a cheap check of the same property that
//     does not depend on porcupine, with plain messages);
//   - with fencing, tokens strictly increase in the order of the critical sections.
//
// On a violation [Result.Visualize] writes porcupine's HTML view of the history, with the
// violations as annotations.
//
// Histories hold completed operations only, of locks taken afresh (every acquire reports one
// hold): a process whose Lock or Unlock fails must end the run instead of recording it, since an
// operation of unknown outcome is not modelled.
package history
