package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/foundry-build/foundry/engine/state"
)

// capabilityLog records what happened to capabilities in one run (state.CapabilityEvent),
// for `foundry status`. It is fed by the runner: the capability events as they are
// emitted, the recipe each capability is evaluating (which the events do not name: a
// capability tries its recipes one at a time, building each before evaluating it), the
// candidates that did not build and how each capability settled, since neither emits an
// event.
//
// It reads what the events say and never decides anything; the evidence of an admission is
// in the signed attestations, not here.
type capabilityLog struct {
	db  *state.DB
	run string

	mu        sync.Mutex
	candidate map[string]string // capability → the recipe being evaluated
	rejected  map[string]bool   // recipes whose rejection is recorded
	err       error             // the first failure to record
}

func newCapabilityLog(db *state.DB, run string) *capabilityLog {
	return &capabilityLog{db: db, run: run, candidate: map[string]string{}, rejected: map[string]bool{}}
}

// capabilityEventTypes are the events a capabilityLog records.
var capabilityEventTypes = map[string]bool{
	"suite_evaluated": true, "candidate_rejected": true, "capability_admitted": true,
	"capability_pinned": true, "pin_refused": true, "effect_reconciled": true,
}

// Messages of the events, as spec/cli.md gives them.
var (
	suiteMessage    = regexp.MustCompile(`^(\S+) suite: (\d+) of (\d+) cases passed$`)
	suiteReused     = regexp.MustCompile(`^(\S+) suite: passed \(recorded evaluation `)
	rejectedBySuite = regexp.MustCompile(`failed the (\S+) suite: `)
)

// evaluating notes that recipe n is the candidate of the capability it provides: it was
// built, and its capability evaluates it next.
func (l *capabilityLog) evaluating(n *Node) {
	if n.Recipe == nil || n.Recipe.Provides == nil {
		return
	}
	l.mu.Lock()
	l.candidate[n.Recipe.Provides.Node] = n.Address
	l.mu.Unlock()
}

// event records e if it is a capability event.
func (l *capabilityLog) event(e Event) {
	if !capabilityEventTypes[e.Type] || e.Node == "" {
		return
	}
	ce := state.CapabilityEvent{RunID: l.run, Time: e.Time, Type: e.Type, Capability: e.Node, Message: e.Message}
	l.mu.Lock()
	if e.Type != "capability_pinned" && e.Type != "pin_refused" {
		ce.Recipe = l.candidate[e.Node]
	}
	if e.Type == "candidate_rejected" && ce.Recipe != "" {
		l.rejected[ce.Recipe] = true
	}
	l.mu.Unlock()
	switch e.Type {
	case "suite_evaluated":
		if m := suiteMessage.FindStringSubmatch(e.Message); m != nil {
			passed, _ := strconv.Atoi(m[2])
			cases, _ := strconv.Atoi(m[3])
			ok := passed == cases
			ce.Suite, ce.Passed, ce.Cases, ce.CasesPassed = m[1], &ok, &cases, &passed
		} else if m := suiteReused.FindStringSubmatch(e.Message); m != nil {
			ok := true // a recorded sealed pass, reused: no case ran
			ce.Suite, ce.Passed = m[1], &ok
		}
	case "candidate_rejected":
		if m := rejectedBySuite.FindStringSubmatch(e.Message); m != nil {
			ce.Suite = m[1]
		}
	case "capability_admitted":
		if _, ref, ok := strings.Cut(e.Message, " admitted as "); ok {
			ce.Ref = ref
		}
	case "capability_pinned":
		ce.Ref = e.Message
	case "pin_refused":
		if ref, _, ok := strings.Cut(e.Message, ": "); ok {
			ce.Ref = ref
		}
	}
	l.record(ce)
}

// didNotBuild records that recipe n, a candidate, was not built because of the failures of
// its walk, as its capability will reject it.
func (l *capabilityLog) didNotBuild(n *Node, failures []*StepError) {
	if n.Recipe == nil || n.Recipe.Provides == nil {
		return
	}
	var reasons []string
	for _, f := range failures {
		reasons = append(reasons, f.Error())
	}
	rj := Rejection{Recipe: n.Address, Reason: strings.Join(reasons, "; ")}
	l.mu.Lock()
	l.rejected[n.Address] = true
	l.mu.Unlock()
	l.record(state.CapabilityEvent{RunID: l.run, Type: "candidate_rejected", Capability: n.Recipe.Provides.Node, Recipe: n.Address, Message: rj.String()})
}

// settled records how capability n settled: the rejections of candidates that emitted no
// event (those that did not build) and, when err is set, the failure. rejections are the
// run's rejections so far; those of other capabilities' recipes are left out.
func (l *capabilityLog) settled(n *Node, err error, rejections []Rejection) {
	var capErr *CapabilityError
	if errors.As(err, &capErr) {
		rejections = capErr.Rejections
	}
	for _, rj := range rejections {
		if !slices.Contains(n.Providers, rj.Recipe) {
			continue
		}
		l.mu.Lock()
		done := l.rejected[rj.Recipe]
		l.rejected[rj.Recipe] = true
		l.mu.Unlock()
		if !done {
			l.record(state.CapabilityEvent{RunID: l.run, Type: "candidate_rejected", Capability: n.Address, Recipe: rj.Recipe, Suite: rj.Suite, Message: rj.String()})
		}
	}
	if err != nil {
		msg := err.Error()
		if capErr != nil {
			msg = "no recipe was admitted"
		}
		l.record(state.CapabilityEvent{RunID: l.run, Type: "capability_failed", Capability: n.Address, Message: msg})
	}
}

func (l *capabilityLog) record(e state.CapabilityEvent) {
	if err := l.db.RecordCapabilityEvent(context.Background(), e); err != nil {
		l.mu.Lock()
		if l.err == nil {
			l.err = err
		}
		l.mu.Unlock()
	}
}

// failure is the first failure to record an event, if any.
func (l *capabilityLog) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("recording what happened to capabilities in run %s: %w", l.run, l.err)
	}
	return nil
}
