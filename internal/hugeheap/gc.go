package hugeheap

import (
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
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

// Expect tells the collector that about n bytes are about to be allocated and will stay
// live, such as the syntax trees of a large load: the heap may grow by n before the next
// collection, and GOGC is put back as that collection ends. Collections while such a
// structure is built free almost nothing and mark all of it each time; planning 100k steps
// ran four during parsing, marking ~0.8 GB. It does nothing when the user set GOGC, when
// collection is off, or when GOGC already allows n.
func Expect(n int) {
	if v, set := syscall.Getenv("GOGC"); set && v != "" {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	live := max(ms.HeapAlloc, 1<<20)
	want := int(uint64(n) * 100 / live)
	gcMu.Lock()
	defer gcMu.Unlock()
	prev := debug.SetGCPercent(want)
	if prev < 0 || prev >= want {
		debug.SetGCPercent(prev)
		return
	}
	if !gcDelayed { // a delay in force already knows the default to go back to
		gcDefault, gcDelayed = prev, true
	}
	sentinel := &struct{ _ *int }{}
	runtime.AddCleanup(sentinel, func(struct{}) { restoreGC() }, struct{}{})
}

// restoreGC puts back the GOGC that DelayFirstGC or Expect replaced, once.
func restoreGC() {
	gcMu.Lock()
	defer gcMu.Unlock()
	if gcDelayed {
		debug.SetGCPercent(gcDefault)
		gcDelayed = false
	}
}
