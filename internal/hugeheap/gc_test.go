package hugeheap

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// waitForDefaultGC runs collections until GOGC is back to 100: the cleanup that puts it
// back runs after the collection that finds its sentinel.
func waitForDefaultGC(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for gogc() != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is still %d after collections; want the default 100 back", gogc())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// liveKiB allocates n KiB that stay live, in small objects as syntax trees are: with GOGC
// at 100 and a small heap, allocating them runs several collections.
func liveKiB(n int) [][]byte {
	live := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		live = append(live, make([]byte, 1024))
	}
	return live
}

// The first collection waits for a larger heap; the collection itself puts GOGC back.
func TestDelayFirstGCEndsWithTheFirstCollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	DelayFirstGC()
	if p := gogc(); p != startGCPercent {
		t.Fatalf("GOGC after DelayFirstGC = %d, want %d", p, startGCPercent)
	}
	waitForDefaultGC(t)
}

// A large Reserve announces a burst of allocation: the default GOGC is back before it
// returns. A small one (every load calls Reserve) leaves a short command's delay alone.
func TestReserveEndsTheDelay(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	// Reserve once first, so that the Reserve under test has nothing left to do: it then
	// runs no collection, and only its own restore can bring GOGC back.
	forgetReservations()
	Reserve(Threshold, 0)
	DelayFirstGC()
	Reserve(Threshold-1, 0)
	if p := gogc(); p != startGCPercent {
		t.Fatalf("GOGC after a small Reserve = %d, want still %d", p, startGCPercent)
	}
	Reserve(Threshold, 0)
	if p := gogc(); p != 100 {
		t.Fatalf("GOGC after a large Reserve = %d, want the default 100", p)
	}
}

// Expect lets the heap grow by what is announced before collecting, then puts GOGC back.
func TestExpectDelaysTheNextCollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Expect(256 << 20)
	if p := gogc(); p <= 100 {
		t.Fatalf("GOGC after Expect(256 MiB) = %d, want more than 100", p)
	}
	live := liveKiB(64 << 10)
	runtime.ReadMemStats(&after)
	if n := after.NumGC - before.NumGC; n != 0 {
		t.Errorf("%d collections while allocating 64 MiB of an expected 256 MiB", n)
	}
	runtime.KeepAlive(live)
	waitForDefaultGC(t)
	// Nothing to do when GOGC already allows the expected growth.
	Expect(1 << 10)
	if p := gogc(); p != 100 {
		t.Errorf("GOGC after a small Expect = %d, want 100", p)
	}
}

// A delay's cleanup can run after a later delay began (the collection that found its
// sentinel ran before): it must not end the later one.
func TestStaleCleanupKeepsALaterDelay(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	DelayFirstGC()
	gcMu.Lock()
	first := gcDelay
	gcMu.Unlock()
	restoreGC() // as a large Reserve does, with the first sentinel still pending
	Expect(256 << 20)
	if p := gogc(); p <= 100 {
		t.Fatalf("GOGC after Expect = %d, want more than 100", p)
	}
	endDelay(first) // the first sentinel's cleanup, late
	if p := gogc(); p <= 100 {
		t.Fatalf("a stale cleanup put GOGC back to %d", p)
	}
}

// After a reservation, the first collection waits until the heap has grown into the touched
// memory (so the scavenger does not hand it back meanwhile), and not much longer: over a
// small live heap the runtime's minimum heap scales with GOGC, which once put the collection
// off by gigabytes.
func TestReserveDelaysTheFirstCollectionToTheTouchedSize(t *testing.T) {
	collectionsFromScratch(t)
	const touch = 64 << 20
	if !Reserve(2*touch, touch) {
		t.Fatal("Reserve(128 MiB, touch 64 MiB) did nothing")
	}
	if p := gogc(); p <= 100 {
		t.Fatalf("GOGC after Reserve = %d, want more than 100", p)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	live := liveKiB(32 << 10) // half the touched size
	runtime.ReadMemStats(&after)
	if n := after.NumGC - before.NumGC; n != 0 {
		t.Errorf("%d collections within the touched size", n)
	}
	// Twice the touched size more, as garbage: a collection must have run by then.
	var sink []byte
	for i := 0; i < 128<<10 && after.NumGC == before.NumGC; i++ {
		sink = make([]byte, 1024)
		if i%1024 == 0 {
			runtime.ReadMemStats(&after)
		}
	}
	runtime.KeepAlive(sink)
	if after.NumGC == before.NumGC {
		t.Errorf("no collection after allocating three times the touched size")
	}
	runtime.KeepAlive(live)
	waitForDefaultGC(t)
}

// gogc reads GOGC as SetGCPercent set it, off included.
func TestGOGCReadsTheSetting(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, p := range []int{250, 100, 12345, -1} {
		debug.SetGCPercent(p)
		if got := gogc(); got != p {
			t.Errorf("gogc() after SetGCPercent(%d) = %d", p, got)
		}
	}
}

// collectionsFromScratch prepares a test of when collections run after a reservation: not
// under the race detector, whose allocations change that; GOGC at 100 until the test ends;
// no reservation in force; and a collected heap.
func collectionsFromScratch(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("the race detector's allocations change when collections run")
	}
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	forgetReservations()
	runtime.GC()
}

// heapGoal is the heap size at which the next collection is to end.
func heapGoal() uint64 { return metric("/gc/heap/goal:bytes") }

// A hold keeps every collection waiting until the heap fills the reservation, not only the
// first, even when the first delay's cleanup runs during it; its release puts GOGC back.
func TestHoldKeepsTheGoalAtTheReservation(t *testing.T) {
	collectionsFromScratch(t)
	const reserve, touch = 128 << 20, 32 << 20
	if !Reserve(reserve, touch) {
		t.Fatal("Reserve(128 MiB, touch 32 MiB) did nothing")
	}
	if h := NewHold(reserve * 2); h == nil || h.goal != reserve {
		t.Fatalf("a hold beyond the reservation: %+v, want its goal at the reservation", h)
	} else {
		h.Release()
	}
	h := NewHold(reserve)
	if h == nil {
		t.Fatal("no hold with a reservation in force")
	}
	live := liveKiB(32 << 10)
	start := gcCycles()
	var sink []byte
	for ended := 0; ended < 2; {
		for i := 0; i < 1024; i++ { // 1 MiB of garbage between renewals, as pieces of a load
			sink = make([]byte, 1024)
		}
		if c := gcCycles(); c != start {
			start = c
			ended++
			// The first delay's cleanup may run before or after a renewal.
			time.Sleep(time.Millisecond)
			h.Renew()
			gcMu.Lock()
			delay := gcDelay
			gcMu.Unlock()
			endDelay(delay)
			// Over 32 MiB live, the default GOGC would collect again at about 64 MiB, and
			// the first delay's (set over a nearly empty heap) at 256 MiB or more.
			if g := heapGoal(); g < reserve*9/10 || g > reserve*3/2 {
				t.Fatalf("after collection %d of the hold, the heap's goal is %d MiB, want about the reserved %d MiB", ended, g>>20, reserve>>20)
			}
		}
	}
	runtime.KeepAlive(sink)
	runtime.KeepAlive(live)
	h.Release()
	if p := gogc(); p != 100 {
		t.Errorf("GOGC after the hold's release = %d, want the default 100", p)
	}
}

// Without a reservation there is nothing to hold, and a nil hold does nothing.
func TestNoHoldWithoutAReservation(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	forgetReservations()
	h := NewHold(64 << 20)
	if h != nil {
		t.Fatal("a hold without a reservation")
	}
	h.Renew()
	h.Release()
	if p := gogc(); p != 100 {
		t.Errorf("GOGC = %d after a nil hold, want 100", p)
	}
}
