package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/executors"
)

// Crash recovery (spec/state.md §5) has two halves.
//
// The state half needs no executor and runs before the apply's run begins: the runs whose
// process died become interrupted (with their nodes and dispatched effects) and temporary
// blob files are removed.
//
// The executor half runs when the executor is first needed (executor), before the apply
// creates its first container, and never in an apply with nothing to run. It removes what
// dead runs left in the runtime: the containers of their unfinished attempts (each
// attempt's container ID is recorded before the container is created) and everything with
// the container prefix of a run whose scratch directory, .foundry/runs/<run>/, is still
// there. Every container of a run is created after that directory (it holds the
// container's /out), and a run removes it when it ends, so a directory left by a run that is
// not this one (this apply holds the project lock: no other apply of the project is alive)
// marks leftovers to remove. It is removed last, once they are gone, so a crash or a
// failure on the way leaves the mark for the next apply.
//
// A dead client's last requests can still be completing in a daemon after the client died
// (containerd finishing a container or task it was asked to create), so the executor half
// sweeps twice: before this apply creates its first container, and again at least
// sweepAgainAfter later, when the apply ends. Only then is the mark removed.

// sweepAgainAfter is the least time between the two sweeps of a dead run's leftovers.
const sweepAgainAfter = time.Second

// recoverRuns is the state half of crash recovery.
func (r *runner) recoverRuns(ctx context.Context) error {
	if _, err := r.ws.State.RecoverRuns(ctx); err != nil {
		return err
	}
	// This apply holds the project lock, so no other writer can own a temporary file.
	if _, err := r.ws.Store.Sweep(0); err != nil {
		return err
	}
	return nil
}

// cleanupDead is the first sweep of the executor half; it starts the second, which
// finishCleanup waits for.
func (r *runner) cleanupDead(ctx context.Context, exe executors.Executor) error {
	attempts, err := r.ws.State.InterruptedAttempts(ctx)
	if err != nil {
		return err
	}
	var prefixes []string
	for _, a := range attempts {
		if a.ContainerID == "" {
			continue
		}
		if err := exe.Cleanup(ctx, a.ContainerID); err != nil {
			return fmt.Errorf("cleaning up %s of interrupted run %s: %w", a.ContainerID, a.RunID, err)
		}
		prefixes = append(prefixes, a.ContainerID)
	}
	for _, a := range attempts {
		if err := r.ws.State.AttemptFinished(ctx, a.RunID, a.Address, a.N, state.OutcomeInterrupted, "its apply died; leftovers removed"); err != nil {
			return err
		}
	}
	runs := filepath.Join(r.ws.Dir, "runs")
	ents, err := os.ReadDir(runs)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var dirs []string
	for _, ent := range ents {
		if !ent.IsDir() || ent.Name() == r.runID {
			continue
		}
		// Evaluation sandboxes are not attempts: the run's prefix finds them too.
		p := ContainerPrefixOf(ent.Name())
		if err := exe.Cleanup(ctx, p); err != nil {
			return fmt.Errorf("cleaning up after interrupted run %s: %w", ent.Name(), err)
		}
		prefixes = append(prefixes, p)
		dirs = append(dirs, filepath.Join(runs, ent.Name()))
	}
	if len(prefixes) == 0 {
		return nil
	}
	first := time.Now()
	done := make(chan struct{})
	r.sweptAgain = done
	bg := context.WithoutCancel(ctx)
	go func() {
		defer close(done)
		time.Sleep(time.Until(first.Add(sweepAgainAfter)))
		for _, p := range prefixes {
			if exe.Cleanup(bg, p) != nil {
				return // the marks stay: the next apply that runs something tries again
			}
		}
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}()
	return nil
}

// executor returns the executor that runs this apply's actions, for what (a node, an
// evaluation) that is about to run one. The first call opens it (executors.Opener) and
// removes dead runs' leftovers: before this apply creates its first container, and only if
// it creates one, so an apply with nothing to run never contacts the runtime. If either
// fails, nothing can run: the error is the apply's (fatal), which stops the walk.
func (r *runner) executor(ctx context.Context, what string) (executors.Executor, error) {
	r.exeOnce.Do(func() {
		exe := r.opt.Executor
		var err error
		if exe == nil {
			err = errors.New("no executor is configured")
		} else if o, ok := exe.(executors.Opener); ok {
			exe, err = o.Open(ctx)
		}
		if err == nil {
			err = r.cleanupDead(ctx, exe)
		}
		if err != nil {
			err = fmt.Errorf("cannot run %s: %w", what, err)
			if ctx.Err() == nil {
				r.stop(err)
			}
		}
		r.exe, r.exeErr = exe, err
	})
	return r.exe, r.exeErr
}

// fatalErr is the error that stopped this apply before it could run anything, or nil.
func (r *runner) fatalErr() error {
	if p := r.fatal.Load(); p != nil {
		return *p
	}
	return nil
}

// sweepInterrupted removes what this run's own in-flight requests leave behind once its
// context is cancelled: a container or task the daemon finished creating after the client
// gave up on the request is not one the executor knows to remove. The run's prefix is swept
// now and again sweepAgainAfter later, as a dead run's is; a failure leaves the run's
// scratch directory, so the next apply that runs something sweeps it (cleanupDead).
func (r *runner) sweepInterrupted(ctx context.Context) bool {
	if r.exe == nil || r.exeErr != nil {
		return true // nothing was ever started in this run
	}
	bg := context.WithoutCancel(ctx)
	for i := 0; i < 2; i++ {
		if i > 0 {
			time.Sleep(sweepAgainAfter)
		}
		if r.exe.Cleanup(bg, r.containerPrefix()) != nil {
			return false
		}
	}
	return true
}

// finishCleanup waits for the second sweep started by cleanupDead, if any.
func (r *runner) finishCleanup() {
	if r.sweptAgain != nil {
		<-r.sweptAgain
	}
}
