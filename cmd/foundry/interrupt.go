package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// interruptSignals stop an apply: Ctrl-C, a kill or a service manager's stop, and a closed
// terminal or dropped SSH session. All three are handled the same way, once: the context is
// cancelled with an *interruption as its cause, the engine stops starting work, the executor
// kills and removes what runs, and the run is recorded as interrupted.
var interruptSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// interruption is the cause of a context cancelled by a signal.
type interruption struct{ sig os.Signal }

func (i *interruption) Error() string { return "interrupted by " + signalName(i.sig) }

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

// notifyInterrupt returns a context that the first of interruptSignals cancels, with an
// *interruption as its cause. Later signals are ignored while the command stops what runs
// (SIGKILL still ends it; the next apply then cleans up as after any crash). Until stop is
// called, SIGPIPE is caught and dropped too: a reader that went away with the terminal
// (`foundry apply | tee log` over a dropped SSH session) must not kill the process halfway
// through stopping its sandboxes; the write fails with EPIPE instead. It is caught rather than
// ignored because an ignored signal stays ignored in the processes apply starts (runc, and
// through it a step's own processes), while a caught one is reset to its default.
func notifyInterrupt(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGPIPE}, interruptSignals...)...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				if s != syscall.SIGPIPE {
					cancel(&interruption{sig: s})
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// interrupted returns the interruption that cancelled ctx, or nil.
func interrupted(ctx context.Context) *interruption {
	var i *interruption
	if errors.As(context.Cause(ctx), &i) {
		return i
	}
	return nil
}
