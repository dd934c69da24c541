package workspace

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
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

func TestLockContextWaitsForTheHolderAndNamesIt(t *testing.T) {
	dir := t.TempDir()
	ws, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	other, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	unlock, err := ws.Lock()
	if err != nil {
		t.Fatal(err)
	}
	// While held, a wait that ends reports the holder it waited for.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var waited []Holder
	_, err = other.LockContext(ctx, func(h Holder) { waited = append(waited, h) })
	var busy *BusyError
	if !errors.As(err, &busy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext past its deadline = %v, want a *BusyError wrapping the deadline", err)
	}
	if busy.Holder.PID != os.Getpid() || time.Since(busy.Holder.Since) > time.Minute {
		t.Errorf("holder = %+v, want this process, since just now", busy.Holder)
	}
	if len(waited) != 1 || waited[0] != busy.Holder {
		t.Errorf("waiting was called %v, want once with %+v", waited, busy.Holder)
	}

	// A wait that outlasts the hold gets the lock once it is released.
	got := make(chan error, 1)
	go func() {
		u, err := other.LockContext(context.Background(), nil)
		if err == nil {
			if other.Held() == 0 {
				err = errors.New("Held is 0 after LockContext returned")
			}
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("LockContext returned while the lock was held: %v", err)
	case <-time.After(2 * lockPoll):
	}
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LockContext still waiting 5s after the lock was released")
	}
}
