package executors

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// traceOn turns on per-phase timings of each run, printed to stderr (FOUNDRY_EXEC_TRACE=1).
var traceOn = os.Getenv("FOUNDRY_EXEC_TRACE") != ""

// Trace collects the time each phase of one run took, for FOUNDRY_EXEC_TRACE.
type Trace struct {
	id   string
	last time.Time
	b    strings.Builder
}

// NewTrace starts timing the run id.
func NewTrace(id string) *Trace { return &Trace{id: id, last: time.Now()} }

// Mark records that the phase named what ended now.
func (t *Trace) Mark(what string) {
	if !traceOn {
		return
	}
	now := time.Now()
	fmt.Fprintf(&t.b, " %s=%.1fms", what, float64(now.Sub(t.last))/1e6)
	t.last = now
}

// Done prints the phases when tracing is on.
func (t *Trace) Done() {
	if traceOn {
		fmt.Fprintf(os.Stderr, "trace %s:%s\n", t.id, t.b.String())
	}
}
