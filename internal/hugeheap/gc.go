package hugeheap

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// startGCPercent is the GOGC in force until the first garbage collection: with it the first
// collection waits for a 16 MiB heap instead of the runtime's 4 MiB.
const startGCPercent = 400

var (
	gcMu      sync.Mutex
	gcDelayed bool
	gcDefault int
)

// DelayFirstGC lets a short command finish before its first garbage collection, and puts
// GOGC back as that collection ends (or when Reserve announces a burst), as cmd/compile
// does for the same reason (base.AdjustStartingHeap). A cached re-apply of a 41-step chain
// otherwise ran two collections, ~5 ms of its 60 (span sets, stopping the world, mark
// workers). Call it first thing in main, and not when the user set GOGC.
func DelayFirstGC() {
	gcMu.Lock()
	defer gcMu.Unlock()
	if gcDelayed {
		return
	}
	gcDefault, gcDelayed = debug.SetGCPercent(startGCPercent), true
	// The sentinel is garbage at once, so the first collection finds it. It holds a pointer
	// so it is not a tiny allocation, which a cleanup is not guaranteed to see collected.
	sentinel := &struct{ _ *int }{}
	runtime.AddCleanup(sentinel, func(struct{}) { restoreGC() }, struct{}{})
}

// restoreGC puts back the GOGC that DelayFirstGC replaced, once.
func restoreGC() {
	gcMu.Lock()
	defer gcMu.Unlock()
	if gcDelayed {
		debug.SetGCPercent(gcDefault)
		gcDelayed = false
	}
}
