package executors

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// EgressFunc serves an action's only way out (Action.Egress): it accepts connections on l,
// a listener on loopback inside the sandbox's network namespace, until ctx ends (the
// action's process has ended), and returns once it has closed l and every connection.
type EgressFunc func(ctx context.Context, l net.Listener) error

// ProxyVars are the environment variables an egress action gets, each set to the URL of
// its broker: the names HTTP clients read a proxy from (Go's net/http, curl, npm, pip).
var ProxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}

// ProxyEnv returns env with each of ProxyVars set to proxyURL, replacing any value it had.
func ProxyEnv(env []string, proxyURL string) []string {
	out := make([]string, 0, len(env)+len(ProxyVars))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		proxy := false
		for _, v := range ProxyVars {
			proxy = proxy || name == v
		}
		if !proxy {
			out = append(out, kv)
		}
	}
	for _, v := range ProxyVars {
		out = append(out, v+"="+proxyURL)
	}
	return out
}

// Egress is the network of one action whose Network is NetworkEgress, made before its
// process starts: a network namespace of its own with only loopback, up, and in it a
// listener on 127.0.0.1 that the action's Egress function serves. The runtime puts the
// action's processes in that namespace (Path, the runtime spec's linux.namespaces path)
// rather than in an empty one; the listener, opened from a thread inside the namespace,
// stays there, while the Egress function dials out from the host's.
//
// No veth pair, route or firewall rule is made: the namespace has no way out but the
// listener, and vanishes with its last process and Stop.
type Egress struct {
	ns     *os.File
	addr   string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartEgress makes the network of a (nil, nil when a.Network is not NetworkEgress) and
// starts a.Egress on its listener. The caller must Stop it once the action has ended.
func StartEgress(a *Action) (*Egress, error) {
	if a.Network != NetworkEgress {
		return nil, nil
	}
	if a.Egress == nil {
		return nil, fmt.Errorf("action %s: network %q without an Egress function", a.ID, NetworkEgress)
	}
	ns, l, err := newNetns()
	if err != nil {
		return nil, fmt.Errorf("action %s: the egress network: %w", a.ID, err)
	}
	return start(a, ns, l), nil
}

// StartHostEgress is StartEgress for an action that runs on the host's network (the local
// executor): the listener is on the host's loopback, and there is no namespace.
func StartHostEgress(a *Action) (*Egress, error) {
	if a.Network != NetworkEgress {
		return nil, nil
	}
	if a.Egress == nil {
		return nil, fmt.Errorf("action %s: network %q without an Egress function", a.ID, NetworkEgress)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("action %s: the egress listener: %w", a.ID, err)
	}
	return start(a, nil, l), nil
}

// start runs a.Egress on l, in the namespace ns (nil for the host's).
func start(a *Action, ns *os.File, l net.Listener) *Egress {
	ctx, cancel := context.WithCancel(context.Background())
	e := &Egress{ns: ns, addr: l.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- a.Egress(ctx, l) }()
	return e
}

// Path is the namespace as a path the runtime can open: this process's descriptor of it,
// which stays valid (and keeps the namespace) until Stop.
func (e *Egress) Path() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), e.ns.Fd()) }

// ProxyURL is the URL of the listener inside the namespace: "http://127.0.0.1:PORT".
func (e *Egress) ProxyURL() string { return "http://" + e.addr }

// Stop ends the Egress function (its context is cancelled), waits for it to return, and
// releases the namespace. It returns the Egress function's error. A nil Egress stops at once.
func (e *Egress) Stop() error {
	if e == nil {
		return nil
	}
	e.once.Do(func() {
		e.cancel()
		e.err = <-e.done
		if e.ns == nil {
			return
		}
		if err := e.ns.Close(); err != nil && e.err == nil {
			e.err = err
		}
	})
	return e.err
}

// newNetns makes a network namespace with loopback up, and a TCP listener on 127.0.0.1 in
// it. It works on a thread of its own that never leaves the namespace: the thread ends
// with its goroutine (runtime.LockOSThread without Unlock), so no other goroutine, and no
// child process a Pdeathsig would tie to it, ever runs there.
func newNetns() (*os.File, net.Listener, error) {
	type made struct {
		ns  *os.File
		l   net.Listener
		err error
	}
	ch := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- made{err: fmt.Errorf("unshare: %w", err)}
			return
		}
		ns, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- made{err: err}
			return
		}
		if err := loopbackUp(); err != nil {
			ns.Close()
			ch <- made{err: err}
			return
		}
		// An IP-literal address: the socket is made on this thread, in the namespace.
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			ns.Close()
			ch <- made{err: err}
			return
		}
		ch <- made{ns: ns, l: l}
	}()
	m := <-ch
	return m.ns, m.l, m.err
}

// loopbackUp sets the flag IFF_UP on lo, in the calling thread's network namespace (a new
// one has lo down, and without it no address of 127.0.0.0/8 is there).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: reading its flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: bringing it up: %w", err)
	}
	return nil
}
