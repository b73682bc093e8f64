package rediscore

// Scripts lists every canonical script: each is declared in the Go file of the operation that
// runs it (AcquireScript in acquire.go, RaiseScript in fence.go…), its text embedded from lua/.
func Scripts() []*Script {
	return []*Script{AcquireScript, ReleaseScript, RenewScript, InspectScript, ForceScript, RaiseScript, DequeueScript, HandOffScript}
}

// PrepareScripts wraps the source of every canonical script in a driver's script object, for an
// adapter to look up by *Script.
func PrepareScripts[T any](wrap func(source string) T) map[*Script]T {
	m := make(map[*Script]T)
	for _, s := range Scripts() {
		m[s] = wrap(s.Source)
	}
	return m
}
