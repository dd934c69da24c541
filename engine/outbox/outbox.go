// Package outbox carries external effects (a capability's publish, a product's delivery)
// through the effects outbox of the state database (spec/state.md §4–5), the one
// implementation of its rules: the intent is recorded under a logical action ID before
// anything is dispatched; the dispatch is claimed by compare-and-set; the outcome is
// recorded after. An effect whose outcome was lost (its run died after dispatching it) is
// unknown, and is never performed again blindly: it is reconciled by looking at its
// destination (Effect.Find), or waits for an operator's decision (foundry effects
// resolve) when the destination cannot tell: it has no Find, or its Find fails.
//
// Rows only index: an effect recorded as succeeded is looked for again at its
// destination, and performed again (every Perform is idempotent) when it is not there.
//
// Of Foundry it imports only engine/state (ARCHITECTURE.md's import rules, checked by
// internal/architecture); engine/admit and engine/deliver use it.
package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/foundry-build/foundry/engine/state"
)

// Fault points of an effect (the test hook of engine/run's FaultInjector), with the
// effect's node address. Every effect passes the first two, in Do; an effect whose
// destination commits in two stages passes the last two, in its Perform.
const (
	FaultBeforeDispatch = "before-dispatch" // intent recorded, not yet claimed for dispatch
	FaultAfterDispatch  = "after-dispatch"  // dispatch recorded, nothing performed yet
	// The effect's content is committed at the destination (a delivery's release in place,
	// a publish's manifest with its attestations), not yet made complete (the receipt, the
	// tag that names it); nothing of it is recorded locally.
	FaultAfterCommit = "after-commit"
	// The effect is complete at its destination (and what it keeps locally is stored); the
	// outbox does not say it succeeded yet.
	FaultBeforeRecord = "before-record"
)

// Effect is one external effect and how to perform and find it.
type Effect struct {
	// What identifies it: its ID is state.EffectID of these.
	Project, Revision, Address, Kind, Destination string
	// Perform does the effect and returns its result (a reference, a location). It must be
	// idempotent: performed again after a crash, it adds nothing that is already there.
	Perform func(ctx context.Context) (string, error)
	// Find looks for the effect at its destination: found, with the result it had; or not,
	// with why it is to be performed again. An error means the destination cannot tell (it
	// cannot be read): an unknown effect then stays unknown. Nil when the destination can
	// never tell: an unknown effect then waits for an operator's decision.
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

// UnknownError is the refusal of an effect whose outcome is unknown and that its
// destination cannot tell: nothing is dispatched until the destination answers (an apply
// again) or an operator decides (foundry effects resolve).
type UnknownError struct {
	ID, Kind, Address, Destination string
	Run                            string // the run that died after dispatching it
	Cause                          error  // why the destination cannot tell; nil when it never can
}

func (e *UnknownError) Error() string {
	why := "its destination cannot tell whether it happened"
	if e.Cause != nil {
		why = fmt.Sprintf("its destination cannot tell whether it happened (%v)", e.Cause)
	}
	return fmt.Sprintf("the %s of %s to %s (effect %s) has an unknown outcome: run %s died after dispatching it, and %s. "+
		"It is not performed again until that is known: apply again once the destination can be read, "+
		"or find out and record it with 'foundry effects resolve %s -status succeeded|failed -reason TEXT'",
		e.Kind, e.Address, e.Destination, e.ID, e.Run, why, e.ID)
}

func (e *UnknownError) Unwrap() error { return e.Cause }

// Do performs e at most once across crashes and returns its result.
func (o *Outbox) Do(ctx context.Context, e *Effect) (string, error) {
	id, err := e.id()
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
				return "", fmt.Errorf("the %s of %s to %s (effect %s) is recorded as succeeded, but its destination cannot be read to see it there: %w",
					e.Kind, e.Address, e.Destination, id, err)
			}
			if found {
				return result, nil
			}
		}
		return e.Perform(ctx)
	case state.EffectUnknown:
		result, found, err := o.reconcile(ctx, id, row, e)
		if err != nil {
			return "", err
		}
		if found {
			return result, nil
		}
	}
	o.fault(FaultBeforeDispatch, e.Address)
	if err := o.State.EffectDispatching(ctx, id, o.RunID); err != nil {
		return "", err
	}
	o.fault(FaultAfterDispatch, e.Address)
	result, err := e.Perform(ctx)
	if err != nil {
		if ferr := o.State.EffectFinished(context.WithoutCancel(ctx), id, state.EffectFailed, err.Error()); ferr != nil {
			return "", errors.Join(err, fmt.Errorf("recording effect %s as failed: %w", id, ferr))
		}
		return "", err
	}
	if err := o.State.EffectFinished(ctx, id, state.EffectSucceeded, result); err != nil {
		return "", err
	}
	return result, nil
}

// Reconcile settles e by looking at its destination if it is recorded as unknown, as Do
// would, and never performs it: for a caller that found the effect's outcome by other
// means (a plan that pinned the version a killed publish tagged). An effect not recorded,
// or not unknown, is left as it is. It reports whether e was found at its destination.
func (o *Outbox) Reconcile(ctx context.Context, e *Effect) (bool, error) {
	id, err := e.id()
	if err != nil {
		return false, err
	}
	row, err := o.State.GetEffect(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return false, nil
	}
	if err != nil || row.Status != state.EffectUnknown {
		return false, err
	}
	_, found, err := o.reconcile(ctx, id, row, e)
	return found, err
}

// reconcile settles the unknown effect row by looking for e at its destination: found, it
// is settled succeeded and its result returned; not found, it is settled failed (so that
// it may be dispatched again) with why. A destination that cannot tell leaves it unknown
// and returns an *UnknownError.
func (o *Outbox) reconcile(ctx context.Context, id string, row state.Effect, e *Effect) (string, bool, error) {
	unknown := &UnknownError{ID: id, Kind: e.Kind, Address: e.Address, Destination: e.Destination, Run: row.RunID}
	if e.Find == nil {
		return "", false, unknown
	}
	result, found, err := e.Find(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", false, err
		}
		unknown.Cause = err
		return "", false, unknown
	}
	tell := func(format string, a ...any) {
		if e.Reconciled != nil {
			e.Reconciled(fmt.Sprintf("the %s to %s that run %s dispatched has an unknown outcome; ", e.Kind, e.Destination, row.RunID) + fmt.Sprintf(format, a...))
		}
	}
	if found {
		why := fmt.Sprintf("reconciled by run %s: run %s died after dispatching it, and it is at the destination: %s", o.RunID, row.RunID, result)
		if err := o.State.ResolveEffect(ctx, id, state.EffectSucceeded, why); err != nil {
			return "", false, err
		}
		tell("it is at the destination (%s), so it is not performed again", result)
		return result, true, nil
	}
	why := fmt.Sprintf("reconciled by run %s: run %s died after dispatching it; %s", o.RunID, row.RunID, result)
	if err := o.State.ResolveEffect(ctx, id, state.EffectFailed, why); err != nil {
		return "", false, err
	}
	tell("%s", result)
	return "", false, nil
}

func (e *Effect) id() (string, error) {
	return state.EffectID(e.Project, e.Revision, e.Address, e.Kind, e.Destination)
}

func (o *Outbox) fault(point, node string) {
	if o.Fault != nil {
		o.Fault(point, node)
	}
}
