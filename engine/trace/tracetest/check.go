// Package tracetest checks a trace file strictly against the Chrome trace event format's
// documented fields ("Trace Event Format", the JSON Object Format), independently of
// engine/trace: it reads the bytes as generic JSON, not through the writer's types.
// Imported by tests only.
package tracetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Span is a complete span of a checked trace.
type Span struct {
	Name, Cat string
	Tid       int64
	Ts, Dur   int64 // microseconds
	Args      map[string]any
}

// Checked is what Check found.
type Checked struct {
	Spans    []Span
	Instants []Span // Dur 0
	// Async are the nestable async spans ("b" and "e" events paired by cat and id; Tid is
	// the track of their "b"), which lie on no track's stack.
	Async    []Span
	AsyncIDs []string // each Async span's id
	Tracks   map[int64]string
	Root     Span // the apply's span
}

// The documented fields of an event, and of the top-level object.
var (
	eventFields = map[string]bool{"name": true, "cat": true, "ph": true, "ts": true, "tts": true, "dur": true, "tdur": true,
		"pid": true, "tid": true, "s": true, "args": true, "id": true, "bp": true, "cname": true, "sf": true, "stack": true,
		"esf": true, "estack": true}
	topFields = map[string]bool{"traceEvents": true, "displayTimeUnit": true, "otherData": true, "systemTraceEvents": true,
		"stackFrames": true, "samples": true, "metadata": true}
	phases = map[string]bool{"B": true, "E": true, "X": true, "i": true, "I": true, "M": true, "C": true, "b": true, "e": true}
)

// Check parses b strictly and checks that: every field is documented and of its type;
// spans on each track nest (a span that begins inside another ends inside it); there is
// one span of category "apply" on track 0 from ts 0, and every other span and instant lies
// within it; metadata names every track used.
func Check(b []byte) (*Checked, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	for k := range top {
		if !topFields[k] {
			return nil, fmt.Errorf("undocumented top-level field %q", k)
		}
	}
	if u, ok := top["displayTimeUnit"]; ok && string(u) != `"ms"` && string(u) != `"ns"` {
		return nil, fmt.Errorf("displayTimeUnit %s: must be \"ms\" or \"ns\"", u)
	}
	var raw []map[string]any
	d2 := json.NewDecoder(bytes.NewReader(top["traceEvents"]))
	d2.UseNumber()
	if err := d2.Decode(&raw); err != nil {
		return nil, fmt.Errorf("traceEvents: %w", err)
	}
	c := &Checked{Tracks: map[int64]string{}}
	open := map[int64][]Span{}   // B events not yet ended, by track
	async := map[string][]Span{} // b events not yet ended, by cat and id
	used := map[int64]bool{}
	roots := 0
	for i, e := range raw {
		for k := range e {
			if !eventFields[k] {
				return nil, fmt.Errorf("event %d: undocumented field %q", i, k)
			}
		}
		name, ok := e["name"].(string)
		if !ok {
			return nil, fmt.Errorf("event %d: name is not a string", i)
		}
		ph, _ := e["ph"].(string)
		if !phases[ph] {
			return nil, fmt.Errorf("event %d (%s): phase %q", i, name, e["ph"])
		}
		pid, err1 := integer(e, "pid", true)
		tid, err2 := integer(e, "tid", true)
		if err := firstErr(err1, err2); err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", i, name, err)
		}
		_ = pid
		var args map[string]any
		if a, ok := e["args"]; ok {
			if args, ok = a.(map[string]any); !ok {
				return nil, fmt.Errorf("event %d (%s): args is not an object", i, name)
			}
		}
		cat := ""
		if v, ok := e["cat"]; ok {
			if cat, ok = v.(string); !ok {
				return nil, fmt.Errorf("event %d (%s): cat is not a string", i, name)
			}
		}
		if ph == "M" {
			if name == "thread_name" {
				n, ok := args["name"].(string)
				if !ok {
					return nil, fmt.Errorf("event %d: thread_name without args.name", i)
				}
				c.Tracks[tid] = n
			}
			continue
		}
		ts, err := integer(e, "ts", true)
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", i, name, err)
		}
		used[tid] = true
		s := Span{Name: name, Cat: cat, Tid: tid, Ts: ts, Args: args}
		switch ph {
		case "X":
			dur, err := integer(e, "dur", true)
			if err != nil || dur < 0 {
				return nil, fmt.Errorf("event %d (%s): a complete event needs a dur >= 0 (%v)", i, name, err)
			}
			s.Dur = dur
			c.Spans = append(c.Spans, s)
			if cat == "apply" {
				roots++
				c.Root = s
			}
		case "B":
			open[tid] = append(open[tid], s)
		case "E":
			st := open[tid]
			if len(st) == 0 {
				return nil, fmt.Errorf("event %d (%s): an end with no begin on track %d", i, name, tid)
			}
			b := st[len(st)-1]
			open[tid] = st[:len(st)-1]
			b.Dur = ts - b.Ts
			c.Spans = append(c.Spans, b)
		case "b", "e":
			// Nestable async events: the format requires a cat and an id, and pairs a b with
			// the next e of the same cat and id, nesting within them.
			id, ok := e["id"].(string)
			if !ok || id == "" || cat == "" {
				return nil, fmt.Errorf("event %d (%s): an async event needs a cat and a string id", i, name)
			}
			key := cat + "\x00" + id
			if ph == "b" {
				async[key] = append(async[key], s)
				break
			}
			st := async[key]
			if len(st) == 0 {
				return nil, fmt.Errorf("event %d (%s): an async end with no begin (cat %q, id %q)", i, name, cat, id)
			}
			b := st[len(st)-1]
			async[key] = st[:len(st)-1]
			if b.Name != name || ts < b.Ts {
				return nil, fmt.Errorf("event %d (%s): ends async %s begun at %d, at %d", i, name, b.Name, b.Ts, ts)
			}
			b.Dur = ts - b.Ts
			c.Async = append(c.Async, b)
			c.AsyncIDs = append(c.AsyncIDs, id)
		case "i", "I":
			if sc, ok := e["s"]; ok && sc != "g" && sc != "p" && sc != "t" {
				return nil, fmt.Errorf("event %d (%s): instant scope %v", i, name, sc)
			}
			c.Instants = append(c.Instants, s)
		}
	}
	for tid, st := range open {
		if len(st) > 0 {
			return nil, fmt.Errorf("track %d: %d begun spans never end", tid, len(st))
		}
	}
	for key, st := range async {
		if len(st) > 0 {
			return nil, fmt.Errorf("async %q: %d begun spans never end", key, len(st))
		}
	}
	if roots != 1 || c.Root.Tid != 0 || c.Root.Ts != 0 {
		return nil, fmt.Errorf("want one apply span on track 0 from ts 0, found %d (%+v)", roots, c.Root)
	}
	for tid := range used {
		if c.Tracks[tid] == "" {
			return nil, fmt.Errorf("track %d has no thread_name", tid)
		}
	}
	end := c.Root.Ts + c.Root.Dur
	for _, s := range slices.Concat(c.Spans, c.Instants, c.Async) {
		if s.Ts < 0 || s.Ts+s.Dur > end {
			return nil, fmt.Errorf("%s on track %d [%d, %d] is outside the apply [0, %d]", s.Name, s.Tid, s.Ts, s.Ts+s.Dur, end)
		}
	}
	return c, nest(c.Spans)
}

// nest checks that the spans of each track nest.
func nest(spans []Span) error {
	by := map[int64][]Span{}
	for _, s := range spans {
		by[s.Tid] = append(by[s.Tid], s)
	}
	for tid, ss := range by {
		sort.SliceStable(ss, func(i, j int) bool {
			if ss[i].Ts != ss[j].Ts {
				return ss[i].Ts < ss[j].Ts
			}
			return ss[i].Dur > ss[j].Dur
		})
		var stack []Span
		for _, s := range ss {
			for len(stack) > 0 && stack[len(stack)-1].Ts+stack[len(stack)-1].Dur <= s.Ts {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				if s.Ts+s.Dur > p.Ts+p.Dur {
					return fmt.Errorf("track %d: %s [%d, %d] overlaps %s [%d, %d] without nesting in it", tid, s.Name, s.Ts, s.Ts+s.Dur, p.Name, p.Ts, p.Ts+p.Dur)
				}
			}
			stack = append(stack, s)
		}
	}
	return nil
}

func integer(e map[string]any, k string, required bool) (int64, error) {
	v, ok := e[k]
	if !ok {
		if required {
			return 0, fmt.Errorf("no %s", k)
		}
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s is not a number", k)
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("%s: %v", k, n)
	}
	if f != math.Trunc(f) {
		return 0, fmt.Errorf("%s is %v: this trace writes whole microseconds", k, f)
	}
	return int64(f), nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
