package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foundry-build/foundry/engine/event"
)

// countingWriter records what reaches the terminal or log, and in how many writes.
type countingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(b)
}

func (w *countingWriter) text() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String(), w.writes
}

// Cache hits' progress lines are batched, yet none waits long; a line about work (a step
// started, done or failed) is written at once, so that a killed apply's log ends with the
// last thing it did.
func TestPlainProgressBatchesCacheHitsOnly(t *testing.T) {
	w := &countingWriter{}
	p, err := newProgress("plain", w)
	if err != nil {
		t.Fatal(err)
	}
	p.event(event.Event{Type: "run_started", Run: "r1", Total: 1001})
	for i := 0; i < 1000; i++ {
		p.event(event.Event{Type: "node_cached", Node: "step.s" + strings.Repeat("x", i%7)})
	}
	if _, writes := w.text(); writes > 5 {
		t.Errorf("1,001 progress lines took %d writes; they should be batched", writes)
	}
	// With no further event, the lines still arrive, within about flushDelay.
	deadline := time.Now().Add(20 * flushDelay)
	for {
		if out, _ := w.text(); strings.Count(out, "(cached)") == 1000 {
			break
		}
		if time.Now().After(deadline) {
			out, _ := w.text()
			t.Fatalf("buffered lines were not written within %v: have %d lines", 20*flushDelay, strings.Count(out, "\n"))
		}
		time.Sleep(flushDelay / 10)
	}
	p.event(event.Event{Type: "node_cached", Node: "step.hit"})
	p.event(event.Event{Type: "node_started", Node: "step.work"})
	if out, _ := w.text(); !strings.Contains(out, "step.hit (cached)\n  ... step.work") {
		t.Fatalf("a started step was not written at once, after the hits before it:\n%s", out[max(0, len(out)-200):])
	}
	p.event(event.Event{Type: "node_started", Node: "step.again", Message: "why"})
	if out, _ := w.text(); !strings.Contains(out, "  ... step.work\n  ... step.again: why\n") {
		t.Fatalf("a start's message was not written:\n%s", out[max(0, len(out)-200):])
	}
	p.event(event.Event{Type: "node_done", Node: "step.work"})
	if out, _ := w.text(); !strings.Contains(out, "ok  step.work") {
		t.Fatalf("a finished step was not written at once:\n%s", out[max(0, len(out)-200):])
	}
	p.event(event.Event{Type: "node_failed", Node: "step.bad", Message: "exit 1"})
	if out, _ := w.text(); !strings.Contains(out, "ERR step.bad: exit 1") {
		t.Fatalf("a failure was not written at once:\n%s", out[max(0, len(out)-200):])
	}
	p.event(event.Event{Type: "node_cached", Node: "step.last"})
	p.close()
	if out, _ := w.text(); !strings.Contains(out, "step.last (cached)") {
		t.Fatal("close did not write the buffered lines")
	}
}
