package hugeheap

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
)

// startGCPercent is the GOGC in force until the first garbage collection: with it the first
// collection waits for a 16 MiB heap instead of the runtime's 4 MiB.
const startGCPercent = 400

var (
	gcMu      sync.Mutex
	gcDelayed bool
	gcDefault int
	// gcDelay numbers the delays: a delay's sentinel may be found by a collection that ran
	// before a later delay began, and its cleanup runs later still, so a cleanup ends only
	// its own delay.
	gcDelay int
	// held is set while a Hold is in force; ended, when a delay's end came during it.
	held, ended bool
)

// delayNextGC sets GOGC to percent until the next collection ends. Call with gcMu held.
func delayNextGC(percent int) {
	prev := debug.SetGCPercent(percent)
	if !gcDelayed { // a delay in force already knows the default to go back to
		gcDefault, gcDelayed = prev, true
	}
	gcDelay++
	// The sentinel is garbage at once, so the next collection finds it. It holds a pointer
	// so it is not a tiny allocation, which a cleanup is not guaranteed to see collected.
	sentinel := &struct{ _ *int }{}
	runtime.AddCleanup(sentinel, endDelay, gcDelay)
}

// endDelay puts back the default GOGC if delay is still the one in force, or, during a
// Hold, leaves that to its release.
func endDelay(delay int) {
	gcMu.Lock()
	defer gcMu.Unlock()
	switch {
	case delay != gcDelay:
	case held:
		ended = true
	default:
		restoreLocked()
	}
}

// A Hold keeps the heap's goal at a given size, collection after collection, while
// goroutines allocate in a burst whose garbage is freed as it goes and whose live heap
// grows slowly: a streamed load, whose syntax trees are garbage as soon as their piece is
// decoded.
//
// Why: Reserve's delay ends in a cleanup, which runs when the scheduler gets to it. While
// every processor was busy loading, that was often the end of the load; when a worker
// blocked for a moment, it was soon after the first collection, and the default GOGC then
// ran one to three more collections during the load. Planning 10k steps took 2 or 4
// collections, at random: 20 runs took 235 ms (median) and up to 500 ms, against 222 ms and
// up to 292 ms with a Hold. With 100k steps the time was the same either way, within noise.
type Hold struct {
	goal   uint64        // the heap each collection waits for
	start  uint64        // the collections counted when the hold began
	cycles atomic.Uint64 // and at the last Renew
}

// NewHold starts a hold of the heap's goal at goal bytes, at most the reservation in force
// (Reserve's n), or returns nil when there is nothing to hold: no reservation, or GOGC set
// by the user. Its methods do nothing on nil. One hold at a time.
func NewHold(goal int) *Hold {
	mu.Lock()
	goal = min(goal, reserved)
	mu.Unlock()
	if goal <= 0 || userGOGC() {
		return nil
	}
	gcMu.Lock()
	defer gcMu.Unlock()
	held, ended = true, false
	h := &Hold{goal: uint64(goal), start: gcCycles()}
	h.cycles.Store(h.start)
	return h
}

// Renew sets the next collection's goal to the held one again if a collection ended since
// the last call: its goal was set from what the collection before it found live. Call it
// from the allocating goroutines between units of work; it costs a read of one metric when
// there is nothing to do.
func (h *Hold) Renew() {
	if h == nil {
		return
	}
	c := gcCycles()
	if c == h.cycles.Load() {
		return
	}
	gcMu.Lock()
	defer gcMu.Unlock()
	if c == h.cycles.Load() || !held {
		return // another goroutine renewed it
	}
	h.cycles.Store(c)
	live, _ := heapNow()
	want := percentFor(h.goal, live)
	if !gcDelayed {
		if want <= gogc() {
			return
		}
		gcDefault, gcDelayed = gogc(), true
	}
	// A live heap near the goal would make collections back to back: never less than the
	// default.
	debug.SetGCPercent(max(want, gcDefault))
}

// Release ends the hold. If a collection ran during it, the default GOGC is back (and may
// start a collection at once); otherwise the delay in force goes on.
func (h *Hold) Release() {
	if h == nil {
		return
	}
	gcMu.Lock()
	defer gcMu.Unlock()
	held = false
	if ended || gcCycles() != h.start {
		restoreLocked()
	}
	ended = false
}

// gcCycles is the number of collections that have ended.
func gcCycles() uint64 { return metric("/gc/cycles/total:gc-cycles") }

// metric reads one runtime metric of kind uint64.
func metric(name string) uint64 {
	sample := []metrics.Sample{{Name: name}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

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
	delayNextGC(startGCPercent)
}

// Expect tells the collector that about n bytes are about to be allocated and will stay
// live, such as the syntax trees of a large load: the heap may grow by n before the next
// collection, and GOGC is put back as that collection ends. Collections while such a
// structure is built free almost nothing and mark all of it each time; planning 100k steps
// ran four during parsing, marking ~0.8 GB. It does nothing when the user set GOGC, when
// collection is off, or when GOGC already allows n.
func Expect(n int) {
	if userGOGC() {
		return
	}
	// The next collection starts when the heap reaches live*(1+GOGC/100), live being what
	// the last collection marked; the heap now also holds what was allocated since.
	live, heap := heapNow()
	delayUntil(heap+uint64(n), live)
}

// userGOGC reports whether the user set GOGC, which this package then leaves alone.
func userGOGC() bool {
	v, set := syscall.Getenv("GOGC")
	return set && v != ""
}

// heapNow returns what the last collection marked live and what the heap holds now.
func heapNow() (live, heap uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/frees:bytes"}}
	metrics.Read(sample)
	live, allocs, frees := sample[0].Value.Uint64(), sample[1].Value.Uint64(), sample[2].Value.Uint64()
	// The counts are not read at one instant: while a collection sweeps, frees may pass
	// allocs, and the difference would wrap around to a heap of exabytes.
	return live, max(allocs, frees) - frees
}

// delayUntil puts off the next collection until the heap holds about goal bytes, given what
// the last collection marked live, unless GOGC already allows that or collection is off.
func delayUntil(goal, live uint64) {
	want := percentFor(goal, live)
	gcMu.Lock()
	defer gcMu.Unlock()
	if cur := gogc(); cur < 0 || cur >= want {
		return
	}
	delayNextGC(want)
}

// percentFor is the GOGC that puts the next collection at a heap of about goal bytes, given
// what the last collection marked live.
func percentFor(goal, live uint64) int {
	// The runtime's goal is at least heapMinimum, 4 MiB scaled by GOGC/100: over a smaller
	// live heap, a GOGC computed from it would put the collection off far beyond goal.
	live = max(live, 4<<20)
	// A goal beyond a tebibyte comes from bad numbers: it must not overflow into a small one,
	// nor turn collection off.
	return int(min(goal, 1<<40)*100/live) - 100
}

// gogc returns the GOGC in force, -1 for off. Reading it with debug.SetGCPercent(-1), as
// this package once did, waits for a collection that is marking to finish.
func gogc() int { return int(int32(metric("/gc/gogc:percent"))) }

// restoreGC puts back the GOGC that DelayFirstGC or Expect replaced, once.
func restoreGC() {
	gcMu.Lock()
	defer gcMu.Unlock()
	restoreLocked()
}

func restoreLocked() {
	if gcDelayed {
		debug.SetGCPercent(gcDefault)
		gcDelayed = false
	}
}
