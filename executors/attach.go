package executors

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dialer opens a connection the way net.Dialer.DialContext does. The evaluator reaches a
// service candidate only through the Dialer the executor hands to Action.Attach, which
// connects from inside the sandbox's network namespace: the candidate is never given a port
// on the host.
type Dialer func(ctx context.Context, network, address string) (net.Conn, error)

// errProcessGone: the action's process exited before its namespace could be opened.
var errProcessGone = errors.New("exited before its network could be reached")

// AttachFunc is called once an action's process has started (see Action.Attach).
type AttachFunc func(ctx context.Context, dial Dialer)

// HostDialer dials in the caller's own network namespace: the local executor's sandbox is
// the host.
func HostDialer(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// NetnsDialer returns a Dialer whose connections are made from inside the network namespace
// of process pid (on Linux, a socket belongs to the namespace of the thread that created
// it), and a function that releases the namespace. The namespace is opened now, so later
// dials reach it even if pid has meanwhile exited and been reused.
func NetnsDialer(pid int) (Dialer, func() error, error) {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return nil, nil, fmt.Errorf("process %d: %w", pid, errProcessGone)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("network namespace of process %d: %w", pid, err)
	}
	fd := int(ns.Fd())
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			c, err := dialIn(ctx, fd, network, address)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	var once sync.Once
	var cerr error
	return dial, func() error { once.Do(func() { cerr = ns.Close() }); return cerr }, nil
}

// dialIn dials from a thread moved into the network namespace nsFD and moves it back.
//
// The thread must not die in the sandbox's namespace, and must not die at all if it can be
// helped: a child started with Pdeathsig (runc, the local executor's processes) is killed
// when the *thread* that forked it exits, and Go ends a thread whose goroutine exits while
// locked to it. So the thread is restored and unlocked; only if restoring fails is it left
// locked, to end with this goroutine rather than serve others from the wrong namespace.
func dialIn(ctx context.Context, nsFD int, network, address string) (net.Conn, error) {
	runtime.LockOSThread()
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("this thread's network namespace: %w", err)
	}
	defer home.Close()
	if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("entering the sandbox's network namespace: %w", err)
	}
	// An IP-literal address dials serially in this goroutine, so the socket is created on
	// this thread, inside the namespace; it stays there after the thread leaves.
	var d net.Dialer
	c, err := d.DialContext(ctx, network, address)
	if rerr := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); rerr == nil {
		runtime.UnlockOSThread()
	}
	return c, err
}

// Attachment runs an Action's Attach function beside its process. Executors use it as:
//
//	at := executors.StartAttach(a, func(ctx context.Context) (Dialer, func() error, error) {...})
//	select { case <-exited: ...; case <-at.Done(): /* kill the action, Result.Stopped */ }
//	err := at.Stop() // after the process is gone
//
// A nil Attachment (no Attach on the action) has a Done channel that never fires.
type Attachment struct {
	done   chan struct{}
	cancel context.CancelFunc
	err    error // the executor's failure to provide a dialer (not Attach's own error)
}

// StartAttach starts a.Attach in a goroutine once connect returns a Dialer; connect runs in
// that goroutine too (it may wait for the process to appear). It returns nil when the action
// has no Attach.
func StartAttach(a *Action, connect func(ctx context.Context) (Dialer, func() error, error)) *Attachment {
	if a.Attach == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	at := &Attachment{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(at.done)
		dial, release, err := connect(ctx)
		if errors.Is(err, errProcessGone) {
			// It exited before it could be reached: Run reports how it ended.
			<-ctx.Done()
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				at.err = err
			}
			return
		}
		defer release()
		a.Attach(ctx, dial)
	}()
	return at
}

// Done is closed when Attach has returned (or could not be started).
func (at *Attachment) Done() <-chan struct{} {
	if at == nil {
		return nil
	}
	return at.done
}

// Stop cancels Attach's context (the process is gone) and waits for it to return. It
// reports a failure to reach the sandbox's network, which makes the run an error.
func (at *Attachment) Stop() error {
	if at == nil {
		return nil
	}
	at.cancel()
	<-at.done
	return at.err
}

// Reasons Await gives for killing an action.
var (
	ErrDeadline = errors.New("deadline reached")
	ErrStopped  = errors.New("stopped after Attach returned")
)

// Await waits until the action's process exits (a value on exited), its deadline passes,
// ctx ends or its Attach returns. It returns the exit value, or the reason the executor must
// now kill the action (ErrDeadline, ErrStopped or ctx's error), recording a deadline as
// res.TimedOut and a finished Attach as res.Stopped. at may be nil.
func Await[T any](ctx context.Context, exited <-chan T, timeout time.Duration, at *Attachment, res *Result) (T, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var v T
	select {
	case v = <-exited:
		return v, nil
	case <-timer.C:
		res.TimedOut = true
		return v, ErrDeadline
	case <-ctx.Done():
		return v, ctx.Err()
	case <-at.Done():
		res.Stopped = true
		return v, ErrStopped
	}
}
