// Package trace records the trace of one apply (spec/cli.md, "Traces and reports"): spans
// for each node and the phases of its work, instant events for cache hits, one track per
// executor slot, and the critical path, written in the Chrome trace event format that
// Perfetto and chrome://tracing open. A Recorder belongs to one apply (run.Options.Trace);
// the code below the walk reaches it through the context it is given (With, Start), and
// records nothing when the context holds none.
//
// The trace says what happened; nothing is decided from it (invariant 9 of ARCHITECTURE.md).
package trace

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event is one event of the Chrome trace event format (its "JSON Object Format"): a
// complete span ("X", with dur), an instant ("i", with scope s), metadata ("M"), or the
// beginning and end of a nestable async span ("b", "e", with id: a node's waits, which hold
// no lane). Times are whole microseconds from the start of the apply.
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   int64          `json:"ts"`
	Dur  *int64         `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	S    string         `json:"s,omitempty"`
	ID   string         `json:"id,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// File is a trace as written: {"traceEvents": [...], "displayTimeUnit": "ms"}.
type File struct {
	TraceEvents     []Event `json:"traceEvents"`
	DisplayTimeUnit string  `json:"displayTimeUnit"`
}

// The tracks of a trace that are not lanes of a pool.
const (
	TrackApply    = 0 // the apply's own span, and the cache hits the walk settles itself
	TrackCritical = 1 // copies of the spans of the nodes on the critical path
	pid           = 1
)

// Pools of lanes: a step or check holds a lane of PoolSlot while it holds an executor
// slot; every other node (a seed, a capability's evaluation, a product) a lane of
// PoolEngine while it settles.
const (
	PoolSlot   = "slot"
	PoolEngine = "engine"
)

// Recorder collects the events of one apply. Its methods are safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	start  time.Time
	events []Event
	busy   map[string][]bool // pool → lanes taken
	tids   map[string]int    // "pool/index" → track
	nodes  map[string]*Node
	nextID int
}

// Node is what the walk records of one node it settled: the summary's node (Summary).
type Node struct {
	Address string   `json:"address"`
	Kind    string   `json:"kind"`
	Outcome string   `json:"outcome"` // executed, cached, built, settled, fetched, skipped, failed, interrupted
	Deps    []string `json:"deps,omitempty"`
	Digest  string   `json:"digest,omitempty"`
	Cause   string   `json:"cause,omitempty"` // skipped: the failed node it needs
	Error   string   `json:"error,omitempty"`
	Log     []string `json:"log_tail,omitempty"` // a failed step's last lines of output
	// StartUS and EndUS are when it was settled, in microseconds from the start of the
	// apply; Track is the track it was settled on (0 when the walk settled it itself).
	StartUS  int64 `json:"start_us"`
	EndUS    int64 `json:"end_us"`
	Track    int   `json:"track"`
	Critical bool  `json:"critical,omitempty"`
	span     int   // its event, -1 if none
}

// New starts the trace of an apply at start.
func New(start time.Time) *Recorder {
	r := &Recorder{start: start, busy: map[string][]bool{}, tids: map[string]int{}, nodes: map[string]*Node{}, nextID: 2}
	r.meta(TrackApply, "apply", 0)
	r.meta(TrackCritical, "critical path", 1)
	return r
}

func (r *Recorder) us(t time.Time) int64 { return t.Sub(r.start).Microseconds() }

func (r *Recorder) meta(tid int, name string, order int) {
	r.events = append(r.events,
		Event{Name: "thread_name", Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": name}},
		Event{Name: "thread_sort_index", Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"sort_index": order}})
}

type ctxKey struct{}

// lane is where a context's spans go.
type lane struct {
	rec *Recorder
	tid int
}

// With returns ctx carrying rec, its spans on the apply's track.
func With(ctx context.Context, rec *Recorder) context.Context {
	if rec == nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, lane{rec: rec, tid: TrackApply})
}

func from(ctx context.Context) (lane, bool) {
	l, ok := ctx.Value(ctxKey{}).(lane)
	return l, ok && l.rec != nil
}

// Lane takes the lowest free lane of pool for the work ctx is passed on to, and returns the
// context whose spans go there, the track, and the function that gives the lane back.
// Without a recorder it returns ctx, -1 and a no-op.
func Lane(ctx context.Context, pool string) (context.Context, int, func()) {
	l, ok := from(ctx)
	if !ok {
		return ctx, -1, func() {}
	}
	r := l.rec
	r.mu.Lock()
	i := slices.Index(r.busy[pool], false)
	if i < 0 {
		i = len(r.busy[pool])
		r.busy[pool] = append(r.busy[pool], false)
	}
	r.busy[pool][i] = true
	key := fmt.Sprintf("%s/%d", pool, i)
	tid, ok := r.tids[key]
	if !ok {
		tid = r.nextID
		r.nextID++
		r.tids[key] = tid
		order := 10 + i
		if pool == PoolEngine {
			order = 1000 + i
		}
		r.meta(tid, fmt.Sprintf("%s %d", pool, i+1), order)
	}
	r.mu.Unlock()
	return context.WithValue(ctx, ctxKey{}, lane{rec: r, tid: tid}), tid, func() {
		r.mu.Lock()
		r.busy[pool][i] = false
		r.mu.Unlock()
	}
}

// Span is a span begun and not yet ended. A nil Span (no recorder) ignores its methods.
type Span struct {
	l     lane
	name  string
	cat   string
	start time.Time
	args  map[string]any
}

// Start begins a span named name (a node's address, or a phase: "run", "sign") of
// category cat on ctx's track. Spans on one track must nest: work done on another
// goroutine takes a lane of its own (Lane).
func Start(ctx context.Context, name, cat string) *Span {
	l, ok := from(ctx)
	if !ok {
		return nil
	}
	return &Span{l: l, name: name, cat: cat, start: time.Now()}
}

// Set records an argument of the span, shown with it.
func (s *Span) Set(key string, v any) {
	if s == nil {
		return
	}
	if s.args == nil {
		s.args = map[string]any{}
	}
	s.args[key] = v
}

// End ends the span now.
func (s *Span) End() { s.EndAt(time.Now()) }

// EndAt ends the span at t (its start if t is before it).
func (s *Span) EndAt(t time.Time) {
	if s == nil {
		return
	}
	s.l.rec.span(s.l.tid, s.name, s.cat, s.start, t, s.args)
}

// Phase records a span of ctx's track that began at begin and ended at end, clamped to
// [within, now]: a phase the executor timed (the process's own start and end, which a
// worker's clock may put outside the span that holds it).
func Phase(ctx context.Context, name, cat string, begin, end, within time.Time) {
	l, ok := from(ctx)
	if !ok {
		return
	}
	now := time.Now()
	begin, end = clamp(begin, within, now), clamp(end, within, now)
	if end.Before(begin) {
		end = begin
	}
	l.rec.span(l.tid, name, cat, begin, end, nil)
}

func clamp(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}

func (r *Recorder) span(tid int, name, cat string, start, end time.Time, args map[string]any) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts, te := r.us(start), r.us(end)
	dur := max(te-ts, 0)
	r.events = append(r.events, Event{Name: name, Cat: cat, Ph: "X", Ts: ts, Dur: &dur, Pid: pid, Tid: tid, Args: args})
	return len(r.events) - 1
}

// Instant records an instant event on ctx's track: a cache hit.
func Instant(ctx context.Context, name, cat string, args map[string]any) {
	l, ok := from(ctx)
	if !ok {
		return
	}
	r := l.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{Name: name, Cat: cat, Ph: "i", S: "t", Ts: r.us(time.Now()), Pid: pid, Tid: l.tid, Args: args})
}

// Settled records node n as the walk settled it, from start to end on track tid, with
// its span ("node" category) when tid is a lane (not the apply's track, where the walk
// settles precached steps with an instant).
func (r *Recorder) Settled(n Node, tid int, start, end time.Time) {
	if r == nil {
		return
	}
	n.span = -1
	if tid > TrackApply {
		args := map[string]any{"outcome": n.Outcome, "kind": n.Kind}
		if n.Digest != "" {
			args["digest"] = n.Digest
		}
		if n.Error != "" {
			args["error"] = n.Error
		}
		n.span = r.span(tid, n.Address, "node", start, end, args)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n.StartUS, n.EndUS, n.Track = r.us(start), r.us(end), max(tid, 0)
	if n.EndUS < n.StartUS {
		n.EndUS = n.StartUS
	}
	r.nodes[n.Address] = &n
}

// Waited records what node a waited for before it settled, as nestable async spans of
// category "waiting" whose id is its address (a wait holds no lane, so it is drawn beside
// them): "waiting on inputs" from since (the walk's start) until ready (when the last node
// it needs settled), and, for a node that then held an executor slot, "waiting for a slot"
// from ready until start. A wait of no length is left out.
func (r *Recorder) Waited(a string, since, ready, start time.Time, slot bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	wait := func(name string, from, to time.Time) {
		ts, te := r.us(from), r.us(to)
		if te <= ts {
			return
		}
		r.events = append(r.events,
			Event{Name: name, Cat: "waiting", Ph: "b", ID: a, Ts: ts, Pid: pid, Tid: TrackApply},
			Event{Name: name, Cat: "waiting", Ph: "e", ID: a, Ts: te, Pid: pid, Tid: TrackApply})
	}
	wait("waiting on inputs", since, ready)
	if slot {
		wait("waiting for a slot", ready, start)
	}
}

// Summary is what a report shows of a run, and what `foundry serve` (GET /runs/RUN) and
// the MCP tool run_summary return (spec/cli.md).
type Summary struct {
	Run      string            `json:"run"`
	Status   string            `json:"status"`
	Started  time.Time         `json:"started"`
	WallUS   int64             `json:"wall_us"`
	Counts   map[string]int    `json:"counts"`
	Nodes    []*Node           `json:"nodes"`
	Critical []string          `json:"critical_path"`
	Tracks   map[string]string `json:"tracks"` // each track's name ("slot 1", "engine 2") by its number
}

// Finish ends the trace at end: the apply's span, the critical path marked (on its
// nodes' spans, and as copies on the critical-path track), and the run's summary.
func (r *Recorder) Finish(runID, status string, end time.Time) (*File, *Summary) {
	r.mu.Lock()
	defer r.mu.Unlock()
	wall := r.us(end)
	for _, n := range r.nodes {
		n.EndUS = min(n.EndUS, wall)
	}
	zero := int64(0)
	r.events = append(r.events, Event{Name: "apply " + runID, Cat: "apply", Ph: "X", Ts: zero, Dur: &wall, Pid: pid, Tid: TrackApply,
		Args: map[string]any{"run": runID, "status": status}})
	critical := criticalPath(r.nodes)
	for _, a := range critical {
		n := r.nodes[a]
		n.Critical = true
		if n.span >= 0 {
			e := &r.events[n.span]
			e.Args["critical"] = true
		}
		dur := n.EndUS - n.StartUS
		r.events = append(r.events, Event{Name: a, Cat: "critical", Ph: "X", Ts: n.StartUS, Dur: &dur, Pid: pid, Tid: TrackCritical,
			Args: map[string]any{"outcome": n.Outcome}})
	}
	evs := slices.Clone(r.events)
	// By time, a parent before the spans it holds: the order viewers and checkers expect.
	slices.SortStableFunc(evs, func(a, b Event) int {
		if c := cmp.Compare(phOrder(a.Ph), phOrder(b.Ph)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Ts, b.Ts); c != 0 {
			return c
		}
		return cmp.Compare(durOf(b), durOf(a))
	})
	s := &Summary{Run: runID, Status: status, Started: r.start.UTC(), WallUS: wall, Counts: map[string]int{}, Critical: critical,
		Tracks: map[string]string{strconv.Itoa(TrackApply): "apply", strconv.Itoa(TrackCritical): "critical path"}}
	for key, tid := range r.tids {
		pool, i, _ := strings.Cut(key, "/")
		n, _ := strconv.Atoi(i)
		s.Tracks[strconv.Itoa(tid)] = fmt.Sprintf("%s %d", pool, n+1)
	}
	for _, n := range r.nodes {
		s.Nodes = append(s.Nodes, n)
		s.Counts[n.Outcome]++
	}
	slices.SortFunc(s.Nodes, func(a, b *Node) int { return cmp.Compare(a.Address, b.Address) })
	return &File{TraceEvents: evs, DisplayTimeUnit: "ms"}, s
}

func phOrder(ph string) int {
	if ph == "M" {
		return 0
	}
	return 1
}

func durOf(e Event) int64 {
	if e.Dur == nil {
		return 0
	}
	return *e.Dur
}

// criticalPath is the chain of nodes that ended the apply: from the node that finished
// last, back through the dependency of each that finished last, to one that waited on
// none. Its spans are what made the apply as long as it was.
func criticalPath(nodes map[string]*Node) []string {
	var last *Node
	for _, n := range nodes {
		if last == nil || n.EndUS > last.EndUS || n.EndUS == last.EndUS && n.Address < last.Address {
			last = n
		}
	}
	var path []string
	seen := map[string]bool{}
	for n := last; n != nil && !seen[n.Address]; {
		seen[n.Address] = true
		path = append(path, n.Address)
		var next *Node
		for _, d := range n.Deps {
			if dn := nodes[d]; dn != nil && (next == nil || dn.EndUS > next.EndUS) {
				next = dn
			}
		}
		n = next
	}
	slices.Reverse(path)
	return path
}

// WriteFile writes v (a File or a Summary) as JSON to path, whole or not at all: through
// a temporary file renamed over it. Its directory is made if missing.
func WriteFile(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Read reads the JSON at path into v (a File or a Summary).
func Read(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
