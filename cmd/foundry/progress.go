package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/run"
)

// progress renders apply events: "plain" (a line per event, for CI logs), "json" (one
// event.Event per line) or "tty" (a live view of what is running, redrawn in place).
type progress struct {
	mode string
	w    io.Writer
	// buf holds node_cached lines for at most flushDelay: a no-op apply of 10,000 steps made
	// 10,000 writes to stderr, 20-40 ms of them. Every other line reports work or its end
	// and is written at once, with whatever is buffered, so that a killed apply's log ends
	// with the last thing it did.
	buf     *bufio.Writer
	flusher *time.Timer

	mu       sync.Mutex
	running  map[string]time.Time
	counts   map[string]int
	total    int
	start    time.Time
	lines    int // lines drawn by the last tty frame
	stop     chan struct{}
	finished chan struct{}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newProgress(mode string, w io.Writer) (*progress, error) {
	if mode == "auto" {
		mode = "plain"
		if isTerminal(w) {
			mode = "tty"
		}
	}
	switch mode {
	case "plain", "json", "tty":
	default:
		return nil, fmt.Errorf("-progress must be auto, tty, plain or json, not %q", mode)
	}
	p := &progress{mode: mode, w: w, running: map[string]time.Time{}, counts: map[string]int{}, start: time.Now()}
	if mode == "tty" {
		p.stop, p.finished = make(chan struct{}), make(chan struct{})
		go p.loop()
	} else {
		p.buf = bufio.NewWriterSize(w, 32<<10)
		p.w = p.buf
	}
	return p, nil
}

func (p *progress) event(e event.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Type {
	case "run_started":
		p.total = e.Total
	case "node_started":
		p.running[e.Node] = e.Time
	case "node_done", "node_failed", "node_cached", "node_skipped":
		delete(p.running, e.Node)
		p.counts[e.Type]++
	}
	switch p.mode {
	case "json":
		b, _ := json.Marshal(e)
		fmt.Fprintf(p.w, "%s\n", b)
		p.flushSoon(e.Type)
	case "plain":
		p.plain(e)
		p.flushSoon(e.Type)
	case "tty":
		// Finished nodes scroll above the live block; running ones are redrawn by loop,
		// unless their start says something.
		if (e.Type != "node_started" || e.Message != "") && e.Type != "run_started" && e.Type != "run_finished" {
			p.clear()
			p.plain(e)
			p.draw()
		}
	}
}

func (p *progress) plain(e event.Event) {
	el := ""
	if e.Elapsed > 0 {
		el = " " + e.Elapsed.Round(time.Millisecond).String()
	}
	switch e.Type {
	case "run_started":
		if e.Capabilities == 1 {
			fmt.Fprintf(p.w, "run %s: %d steps, 1 capability to build\n", e.Run, e.Total)
		} else if e.Capabilities > 1 {
			fmt.Fprintf(p.w, "run %s: %d steps, %d capabilities to build\n", e.Run, e.Total, e.Capabilities)
		} else {
			fmt.Fprintf(p.w, "run %s: %d steps\n", e.Run, e.Total)
		}
	case "node_started":
		if e.Message != "" {
			fmt.Fprintf(p.w, "  ... %s: %s\n", e.Node, e.Message)
		} else {
			fmt.Fprintf(p.w, "  ... %s\n", e.Node)
		}
	case "node_done":
		if e.Message != "" {
			fmt.Fprintf(p.w, "  ok  %s%s: %s\n", e.Node, el, e.Message)
		} else {
			fmt.Fprintf(p.w, "  ok  %s%s\n", e.Node, el)
		}
	case "node_cached":
		if e.Message != "" {
			fmt.Fprintf(p.w, "  =   %s (cached: %s)\n", e.Node, e.Message)
		} else {
			fmt.Fprintf(p.w, "  =   %s (cached)\n", e.Node)
		}
	case "cache_waiting":
		fmt.Fprintf(p.w, "  wait %s: %s\n", e.Node, e.Message)
	case "cache_replaced":
		fmt.Fprintf(p.w, "  !   %s: %s\n", e.Node, e.Message)
	case "record_not_shared":
		fmt.Fprintf(p.w, "  !   %s: not shared: %s\n", e.Node, e.Message)
	case "node_failed":
		fmt.Fprintf(p.w, "  ERR %s%s: %s\n", e.Node, el, e.Message)
	case "node_skipped":
		fmt.Fprintf(p.w, "  --  %s skipped: %s\n", e.Node, e.Message)
	case "suite_evaluated":
		fmt.Fprintf(p.w, "  eval %s: %s\n", e.Node, e.Message)
	case "product_accepted":
		fmt.Fprintf(p.w, "  ACC %s: %s\n", e.Node, e.Message)
	case "acceptance_failed":
		fmt.Fprintf(p.w, "  NOT ACCEPTED %s: %s\n", e.Node, e.Message)
	case "candidate_rejected":
		fmt.Fprintf(p.w, "  REJ %s:\n%s\n", e.Node, e.Message)
	case "capability_admitted":
		fmt.Fprintf(p.w, "  ADM %s: %s\n", e.Node, e.Message)
	case "effect_reconciled":
		fmt.Fprintf(p.w, "  REC %s: %s\n", e.Node, e.Message)
	case "product_delivered":
		fmt.Fprintf(p.w, "  DLV %s: %s\n", e.Node, e.Message)
	case "capability_pinned":
		fmt.Fprintf(p.w, "  @   %s pinned to %s\n", e.Node, e.Message)
	case "pin_refused":
		fmt.Fprintf(p.w, "  PIN %s: %s\n", e.Node, e.Message)
	case "reconstruct_round":
		fmt.Fprintf(p.w, "  RND %s: %s\n", e.Node, e.Message)
	case "reconstruct_exhausted":
		fmt.Fprintf(p.w, "  EXH %s: %s\n", e.Node, e.Message)
	case "reconstruct_waiting":
		fmt.Fprintf(p.w, "  WAIT %s: %s\n", e.Node, e.Message)
	case "reconstruct_unresolved":
		fmt.Fprintf(p.w, "  UNR %s: %s\n", e.Node, e.Message)
	case "run_finished":
		fmt.Fprintf(p.w, "run %s finished in %s: %s\n", e.Run, e.Elapsed.Round(time.Millisecond), e.Message)
	}
}

// clear erases the last live frame.
func (p *progress) clear() {
	for ; p.lines > 0; p.lines-- {
		fmt.Fprint(p.w, "\x1b[1A\x1b[2K")
	}
}

// draw prints the live frame: counts, then each running node with its elapsed time.
func (p *progress) draw() {
	names := make([]string, 0, len(p.running))
	for n := range p.running {
		names = append(names, n)
	}
	sort.Strings(names)
	done := p.counts["node_done"] + p.counts["node_cached"] + p.counts["node_failed"] + p.counts["node_skipped"]
	fmt.Fprintf(p.w, "[%s] %d/%d  running %d · done %d · cached %d · failed %d\n", time.Since(p.start).Round(100*time.Millisecond),
		done, p.total, len(names), p.counts["node_done"], p.counts["node_cached"], p.counts["node_failed"])
	p.lines = 1
	for _, n := range names {
		fmt.Fprintf(p.w, "  ▶ %-50s %s\n", n, time.Since(p.running[n]).Round(100*time.Millisecond))
		p.lines++
	}
}

func (p *progress) loop() {
	defer close(p.finished)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			p.mu.Lock()
			p.clear()
			p.mu.Unlock()
			return
		case <-t.C:
			p.mu.Lock()
			p.clear()
			p.draw()
			p.mu.Unlock()
		}
	}
}

// flushDelay bounds how long a buffered progress line waits.
const flushDelay = 100 * time.Millisecond

// flushSoon writes buffered lines within flushDelay after a cache hit, and at once after
// anything else. p.mu is held.
func (p *progress) flushSoon(event string) {
	if event != "node_cached" {
		p.buf.Flush()
		return
	}
	if p.flusher == nil {
		p.flusher = time.AfterFunc(flushDelay, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.buf.Flush()
			p.flusher = nil
		})
	}
}

// close stops the live view, or writes the lines still buffered.
func (p *progress) close() {
	if p.stop != nil {
		close(p.stop)
		<-p.finished
	}
	if p.buf != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.flusher != nil {
			p.flusher.Stop()
			p.flusher = nil
		}
		p.buf.Flush()
	}
}

// failureReport prints what a person needs to act on a failed step: the command, how it
// ended, its last log lines and where the full log is.
func failureReport(w io.Writer, f *run.StepError) {
	fmt.Fprintf(w, "\nError: %s\n", f.Error())
	if len(f.Argv) > 0 {
		fmt.Fprintf(w, "  command: %s\n", quoteArgv(f.Argv))
	}
	if f.Action != "" {
		fmt.Fprintf(w, "  action:  %s\n", f.Action)
	}
	if len(f.LogTail) > 0 {
		fmt.Fprintln(w, "  last lines of output:")
		for _, l := range f.LogTail {
			fmt.Fprintf(w, "    | %s\n", l)
		}
	}
	if f.Stderr != "" || f.Stdout != "" {
		fmt.Fprintf(w, "  full log: foundry logs %s\n", f.Node)
	}
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"$\\|&;<>*?") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}
