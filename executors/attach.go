package executors

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Dialer opens a connection the way net.Dialer.DialContext does. The evaluator reaches a
// service candidate only through the Dialer the executor hands to Action.Attach, which
// connects from inside the sandbox's network namespace: the candidate is never given a port
// on the host.
type Dialer func(ctx context.Context, network, address string) (net.Conn, error)

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
			// The thread is never unlocked: it leaves the host's namespace, so it must end
			// with this goroutine rather than go back to the scheduler's pool.
			runtime.LockOSThread()
			if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				ch <- result{err: fmt.Errorf("entering the sandbox's network namespace: %w", err)}
				return
			}
			// An IP-literal address dials serially in this goroutine, so the socket is
			// created on this thread, inside the namespace.
			var d net.Dialer
			c, err := d.DialContext(ctx, network, address)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	var once sync.Once
	var cerr error
	return dial, func() error { once.Do(func() { cerr = ns.Close() }); return cerr }, nil
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
