package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/foundry-build/foundry/executors"
)

// WorkerOptions configure `foundry worker`.
type WorkerOptions struct {
	Address   string // the Temporal frontend, HOST:PORT
	Namespace string // "default" when empty
	TaskQueue string // the workflows' queue; DefaultTaskQueue when empty
	// Parallelism is how many steps this worker runs at once.
	Parallelism int
	Activities  *Activities
}

// Platform is the "os/arch" of this machine: the steps a worker here can run.
func Platform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// RunWorker serves applies' workflows on the task queue and their steps on the queue of this
// machine's platform until ctx is cancelled. Steps in flight are then stopped: Temporal gives
// them to another worker.
func RunWorker(ctx context.Context, opt WorkerOptions) error {
	acts := opt.Activities
	if acts == nil || acts.Executor == nil || acts.WS == nil {
		return errors.New("a worker needs an executor and a workspace")
	}
	if acts.Executor.Isolation() != executors.IsolationContainer {
		return fmt.Errorf("a worker runs steps in a sandbox; the %s executor is not one", acts.Executor.Name())
	}
	if opt.Namespace == "" {
		opt.Namespace = "default"
	}
	if opt.TaskQueue == "" {
		opt.TaskQueue = DefaultTaskQueue
	}
	if opt.Parallelism <= 0 {
		opt.Parallelism = 4
	}
	if err := acts.Cleanup(ctx); err != nil {
		return fmt.Errorf("removing an earlier worker's leftovers: %w", err)
	}
	c, err := client.DialContext(ctx, client.Options{
		HostPort: opt.Address, Namespace: opt.Namespace, Identity: acts.Identity, Logger: quietLogger(slog.LevelWarn),
	})
	if err != nil {
		return fmt.Errorf("temporal at %s: %w", opt.Address, err)
	}
	defer c.Close()
	wf := worker.New(c, opt.TaskQueue, worker.Options{Identity: acts.Identity})
	wf.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	steps := worker.New(c, ActivityQueue(opt.TaskQueue, Platform()), worker.Options{
		Identity: acts.Identity, MaxConcurrentActivityExecutionSize: opt.Parallelism,
	})
	steps.RegisterActivityWithOptions(acts.Run, activity.RegisterOptions{Name: ActivityName})
	if err := wf.Start(); err != nil {
		return err
	}
	defer wf.Stop()
	if err := steps.Start(); err != nil {
		return err
	}
	defer steps.Stop()
	<-ctx.Done()
	return nil
}
