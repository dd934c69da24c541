package temporal

import (
	"errors"
	"slices"
	"time"

	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Defaults of Input's bounds.
const (
	DefaultHeartbeatTimeout = 30 * time.Second
	// DefaultMaxHistory continues a run as new at Temporal's warning threshold (10,240
	// events), far below its limit of 51,200 events or 50 MB; an action costs about ten
	// events (its signal, two activities of three events each, workflow tasks).
	DefaultMaxHistory = 10000
	// DefaultMaxPending keeps well under Temporal's 2,000 pending activities per
	// execution, counting each action's reply.
	DefaultMaxPending = 500
	// idle is how long a workflow waits for its apply's next action before it ends on its
	// own: an apply that died without saying it was done leaves no workflow open for ever.
	idle = time.Hour
)

// Workflow is one apply. It runs each action the apply signals (SignalRun) as an activity on
// the task queue of its platform, with the logical action ID as activity ID, and hands each
// outcome back to the apply (a ReplyName activity on in.ReplyQueue). It ends when the apply
// signals SignalDone, or after an hour with nothing to do. Past in.MaxHistory events it
// continues as new, carrying the actions not yet started.
func Workflow(ctx workflow.Context, in Input) error {
	if in.MaxHistory <= 0 {
		in.MaxHistory = DefaultMaxHistory
	}
	if in.MaxPending <= 0 {
		in.MaxPending = DefaultMaxPending
	}
	if in.HeartbeatTimeout <= 0 {
		in.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	queue := append([]Request(nil), in.Queued...)
	running := map[string]workflow.CancelFunc{}
	cancelled := map[string]bool{}
	done := false
	runCh := workflow.GetSignalChannel(ctx, SignalRun)
	// A request already queued or running (a signal the client sent again) is dropped:
	// Temporal refuses two pending activities with one ID.
	known := func(id string) bool {
		if _, ok := running[id]; ok {
			return true
		}
		return slices.ContainsFunc(queue, func(q Request) bool { return q.ID == id })
	}
	enqueue := func(req Request) {
		if !known(req.ID) {
			queue = append(queue, req)
		}
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var req Request
			runCh.Receive(ctx, &req)
			enqueue(req)
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, SignalCancel)
		for {
			var id string
			ch.Receive(ctx, &id)
			if c, ok := running[id]; ok {
				if c != nil {
					c()
				} else {
					cancelled[id] = true
				}
			}
			for i, q := range queue {
				if q.ID == id { // not started: answered as cancelled
					queue = append(queue[:i], queue[i+1:]...)
					running[id] = nil // until it is answered
					workflow.Go(ctx, func(ctx workflow.Context) {
						reply(ctx, in, running, Reply{ID: id, Error: "cancelled before it started"})
					})
					break
				}
			}
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		workflow.GetSignalChannel(ctx, SignalDone).Receive(ctx, nil)
		done = true
	})
	splitting := func() bool { return workflow.GetInfo(ctx).GetCurrentHistoryLength() > in.MaxHistory }
	for {
		woke, err := workflow.AwaitWithTimeout(ctx, idle, func() bool {
			return (done && len(running) == 0) || splitting() || (len(queue) > 0 && len(running) < in.MaxPending)
		})
		if err != nil {
			return err
		}
		if done && len(running) == 0 || !woke && len(queue) == 0 && len(running) == 0 {
			return nil
		}
		if splitting() {
			// Start nothing more; let what is in flight finish and answer; carry the rest,
			// with what was signalled meanwhile, to the next run.
			if err := workflow.Await(ctx, func() bool { return len(running) == 0 }); err != nil {
				return err
			}
			for {
				var req Request
				if !runCh.ReceiveAsync(&req) {
					break
				}
				enqueue(req)
			}
			if done {
				return nil
			}
			in.Queued = queue
			return workflow.NewContinueAsNewError(ctx, WorkflowName, in)
		}
		for len(queue) > 0 && len(running) < in.MaxPending {
			req := queue[0]
			queue = queue[1:]
			start(ctx, in, running, cancelled, req)
		}
	}
}

// start runs req as an activity and hands its outcome back, on a workflow goroutine; req.ID
// is in running until the apply has its reply (with no cancel function until the goroutine
// has made one: a cancel signal then marks it in cancelled).
func start(ctx workflow.Context, in Input, running map[string]workflow.CancelFunc, cancelled map[string]bool, req Request) {
	running[req.ID] = nil
	workflow.Go(ctx, func(gctx workflow.Context) {
		actx, cancel := workflow.WithCancel(gctx)
		running[req.ID] = cancel
		if cancelled[req.ID] {
			delete(cancelled, req.ID)
			cancel()
		}
		timeout := req.Limits.Timeout
		if timeout <= 0 {
			timeout = time.Hour
		}
		actx = workflow.WithActivityOptions(actx, workflow.ActivityOptions{
			TaskQueue:  ActivityQueue(workflow.GetInfo(gctx).TaskQueueName, req.Platform),
			ActivityID: req.ID,
			// The step's own limit, and time to fetch its inputs and push its outputs.
			StartToCloseTimeout: timeout + 15*time.Minute,
			HeartbeatTimeout:    in.HeartbeatTimeout,
			WaitForCancellation: true,
			RetryPolicy: &sdktemporal.RetryPolicy{
				InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
				MaximumAttempts: 5, NonRetryableErrorTypes: []string{ErrNotStarted, ErrBadRequest},
			},
		})
		var res Result
		out := Reply{ID: req.ID}
		if err := workflow.ExecuteActivity(actx, ActivityName, req).Get(actx, &res); err != nil {
			var app *sdktemporal.ApplicationError
			out.NotStarted = errors.As(err, &app) && app.Type() == ErrNotStarted
			out.Error = err.Error()
		} else {
			out.Result = &res
		}
		// The reply goes out even for a cancelled action: the apply waits for it.
		rctx, _ := workflow.NewDisconnectedContext(gctx)
		reply(rctx, in, running, out)
	})
}

// reply hands out to the apply and frees its slot. An apply that is gone cannot take it:
// after a few tries the outcome is dropped (a resumed apply runs the step again).
func reply(ctx workflow.Context, in Input, running map[string]workflow.CancelFunc, out Reply) {
	rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: in.ReplyQueue, ActivityID: "reply/" + out.ID,
		ScheduleToCloseTimeout: 2 * time.Minute, StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &sdktemporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	if err := workflow.ExecuteActivity(rctx, ReplyName, out).Get(rctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("the apply did not take an outcome", "action", out.ID, "error", err)
	}
	delete(running, out.ID)
}
