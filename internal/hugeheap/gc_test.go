package hugeheap

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// The first collection waits for a larger heap; the collection itself puts GOGC back.
func TestDelayFirstGCEndsWithTheFirstCollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	DelayFirstGC()
	if p := gcPercent(); p != startGCPercent {
		t.Fatalf("GOGC after DelayFirstGC = %d, want %d", p, startGCPercent)
	}
	deadline := time.Now().Add(5 * time.Second)
	for gcPercent() != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is still %d after collections; want the default 100 back", gcPercent())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// A large Reserve announces a burst of allocation: the default GOGC is back before it
// returns. A small one (every load calls Reserve) leaves a short command's delay alone.
func TestReserveEndsTheDelay(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	// Reserve once first, so that the Reserve under test has nothing left to do: it then
	// runs no collection, and only its own restore can bring GOGC back.
	forgetReservations()
	Reserve(Threshold)
	DelayFirstGC()
	Reserve(Threshold - 1)
	if p := gcPercent(); p != startGCPercent {
		t.Fatalf("GOGC after a small Reserve = %d, want still %d", p, startGCPercent)
	}
	Reserve(Threshold)
	if p := gcPercent(); p != 100 {
		t.Fatalf("GOGC after a large Reserve = %d, want the default 100", p)
	}
}
