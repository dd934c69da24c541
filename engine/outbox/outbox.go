// Package outbox carries external effects (a capability's publish, a product's delivery)
// through the effects outbox of the state database (spec/state.md §4–5), the one
// implementation of its rules: the intent is recorded under a logical action ID before
// anything is dispatched; the dispatch is claimed by compare-and-set; the outcome is
// recorded after. An effect whose outcome was lost (its run died after dispatching it) is
// unknown, and is never performed again blindly: it is reconciled by looking at its
// destination (Effect.Find), or waits for an operator's decision (foundry effects
// resolve) when the destination cannot tell.
//
// Rows only index: an effect recorded as succeeded is looked for again at its
// destination, and performed again (every Perform is idempotent) when it is not there.
//
// It imports engine/state only; engine/admit and engine/deliver use it.
package outbox

import (
	"context"
	"fmt"

	"github.com/foundry-build/foundry/engine/state"
)

// Fault points every effect passes (the test hook of engine/run's FaultInjector), with the
// effect's node address.
const (
	FaultBeforeDispatch = "before-dispatch" // intent recorded, not yet claimed for dispatch
	FaultAfterDispatch  = "after-dispatch"  // dispatch recorded, nothing performed yet
)

// Effect is one external effect and how to perform and find it.
type Effect struct {
	// What identifies it: its ID is state.EffectID of these.
	Project, Revision, Address, Kind, Destination string
	// Perform does the effect and returns its result (a reference, a location). It must be
	// idempotent: performed again after a crash, it adds nothing that is already there.
	Perform func(ctx context.Context) (string, error)
	// Find looks for the effect at its destination: found, with the result it had; or not,
	// with why it is to be performed again. Nil when the destination cannot tell: an unknown
	// effect then waits for an operator's decision.
	Find func(ctx context.Context) (result string, found bool, err error)
	// Reconciled is told, in a sentence, how an unknown outcome was settled; may be nil.
	Reconciled func(message string)
}

// An Outbox performs effects for one run.
type Outbox struct {
	State *state.DB
	RunID string
	Fault func(point, node string) // may be nil
}

// Do performs e at most once across crashes and returns its result.
func (o *Outbox) Do(ctx context.Context, e *Effect) (string, error) {
	id, err := state.EffectID(e.Project, e.Revision, e.Address, e.Kind, e.Destination)
	if err != nil {
		return "", err
	}
	row, _, err := o.State.EffectIntent(ctx, state.Effect{ID: id, RunID: o.RunID, Address: e.Address, Kind: e.Kind, Destination: e.Destination})
	if err != nil {
		return "", err
	}
	switch row.Status {
	case state.EffectSucceeded:
		// Recorded before: the row is an index, so the destination is asked. What is not
		// there (lost, withdrawn, no longer binding) is performed again, idempotently.
		if e.Find != nil {
			result, found, err := e.Find(ctx)
			if err != nil {
				return "", err
			}
			if found {
				return result, nil
			}
		}
		return e.Perform(ctx)
	case state.EffectUnknown:
		if e.Find == nil {
			return "", fmt.Errorf("the %s of %s to %s (effect %s) has an unknown outcome: run %s died after dispatching it. Find out whether it happened, then record it with 'foundry effects resolve %s succeeded|failed -reason TEXT'",
				e.Kind, e.Address, e.Destination, id, row.RunID, id)
		}
		result, found, err := e.Find(ctx)
		if err != nil {
			return "", err
		}
		tell := func(format string, a ...any) {
			if e.Reconciled != nil {
				e.Reconciled(fmt.Sprintf("the %s to %s that run %s dispatched has an unknown outcome; ", e.Kind, e.Destination, row.RunID) + fmt.Sprintf(format, a...))
			}
		}
		if found {
			why := fmt.Sprintf("reconciled by run %s: run %s died after dispatching it, and it is at the destination: %s", o.RunID, row.RunID, result)
			if err := o.State.ResolveEffect(ctx, id, state.EffectSucceeded, why); err != nil {
				return "", err
			}
			tell("it is at the destination (%s), so it is not performed again", result)
			return result, nil
		}
		why := fmt.Sprintf("reconciled by run %s: run %s died after dispatching it; %s", o.RunID, row.RunID, result)
		if err := o.State.ResolveEffect(ctx, id, state.EffectFailed, why); err != nil {
			return "", err
		}
		tell("%s", result)
	}
	o.fault(FaultBeforeDispatch, e.Address)
	if err := o.State.EffectDispatching(ctx, id, o.RunID); err != nil {
		return "", err
	}
	o.fault(FaultAfterDispatch, e.Address)
	result, err := e.Perform(ctx)
	if err != nil {
		o.State.EffectFinished(context.WithoutCancel(ctx), id, state.EffectFailed, err.Error())
		return "", err
	}
	if err := o.State.EffectFinished(ctx, id, state.EffectSucceeded, result); err != nil {
		return "", err
	}
	return result, nil
}

func (o *Outbox) fault(point, node string) {
	if o.Fault != nil {
		o.Fault(point, node)
	}
}
