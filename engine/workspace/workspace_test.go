package workspace

import (
	"strings"
	"testing"
)

func TestLockNestsInProcessAndExcludesOthers(t *testing.T) {
	dir := t.TempDir()
	ws, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	other, err := Open(dir) // another process, as far as flock is concerned
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	outer, err := ws.Lock()
	if err != nil {
		t.Fatal(err)
	}
	inner, err := ws.Lock()
	if err != nil {
		t.Fatalf("a nested Lock in the holding workspace failed: %v", err)
	}
	refused := func(when string) {
		t.Helper()
		if _, err := other.Lock(); err == nil || !strings.Contains(err.Error(), "another foundry apply is running") {
			t.Fatalf("%s: another holder's Lock = %v, want refused", when, err)
		}
	}
	refused("both held")
	inner()
	inner() // unlocking twice counts once
	refused("outer still held")
	outer()
	unlock, err := other.Lock()
	if err != nil {
		t.Fatalf("after the last unlock: %v", err)
	}
	unlock()
}
