package run

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/reconstruct"
	"github.com/foundry-build/foundry/engine/state"
)

// capabilityLog records what happened to capabilities and products in one run
// (state.CapabilityEvent), for `foundry status` and `foundry report`: the capability and
// product events as they are emitted, with the fields they carry, and how each capability
// settled (a failure emits no event of its own).
//
// It records what the events say and never decides anything; the evidence of an admission
// is in the signed attestations, not here.
type capabilityLog struct {
	db  *state.DB
	run string

	mu  sync.Mutex
	err error // the first failure to record
}

func newCapabilityLog(db *state.DB, run string) *capabilityLog {
	return &capabilityLog{db: db, run: run}
}

// capabilityEventTypes are the events a capabilityLog records: a capability's, and a
// product's acceptance and delivery (accept.go, deliver.go; the delivery's Ref is where its
// release is, which the report verifies by its receipt).
var capabilityEventTypes = map[string]bool{
	"suite_evaluated": true, "candidate_rejected": true, "capability_admitted": true,
	"capability_pinned": true, "pin_refused": true, "effect_reconciled": true,
	"reconstruct_round": true, "reconstruct_exhausted": true, "reconstruct_unresolved": true, "reconstruct_waiting": true,
	"product_accepted": true, "acceptance_failed": true, "product_delivered": true,
}

// event records e if it is a capability event.
func (l *capabilityLog) event(e event.Event) {
	if !capabilityEventTypes[e.Type] || e.Node == "" {
		return
	}
	l.record(state.CapabilityEvent{RunID: l.run, Time: e.Time, Type: e.Type, Capability: e.Node, Message: e.Message,
		Recipe: e.Recipe, Suite: e.Suite, Passed: e.Passed, Cases: e.Cases, CasesPassed: e.CasesPassed, Ref: e.Ref})
}

// settled records that capability n failed to settle, when err is set.
func (l *capabilityLog) settled(n *graph.Node, err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	var capErr *CapabilityError
	var recErr *reconstruct.Error
	switch {
	case errors.As(err, &capErr):
		msg = "no recipe was admitted"
	case errors.As(err, &recErr):
		msg = recErr.Headline()
	}
	l.record(state.CapabilityEvent{RunID: l.run, Type: "capability_failed", Capability: n.Address, Message: msg})
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
