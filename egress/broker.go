// Package egress is the broker through which a fixed-output step reaches the network
// (spec/language.md §9a): an HTTP proxy, for plain requests in absolute form and for CONNECT
// tunnels, that Foundry runs for one step. The executor opens its listener inside the step's
// own network namespace, where it is the only way out; the broker dials from the host's.
//
// Guarantees:
//   - It reaches only endpoints its Policy grants, by the name or address the client asked
//     for (lang.ParseHostPort's canonical form): another port, or a literal IP the grant
//     does not name, is refused.
//   - A granted name is resolved once; every address it resolves to is checked
//     (Policy.AllowsDial: a name never reaches loopback, link-local, multicast or
//     unspecified addresses) before the checked address itself is dialed, never the name
//     again, so a second answer of a rebinding DNS server is never used.
//   - A request whose Host header names another endpoint than its target (the request URI
//     of a plain request, the authority of a CONNECT) is refused. Inside a tunnel the broker
//     sees only bytes: whatever they say, they go to the endpoint the CONNECT named.
//   - The bytes relayed, both ways and all connections together, are bounded (MaxBytes);
//     the connection that passes the bound is cut.
//   - Every connection, admitted or refused, is recorded (Connections), for the step's
//     provenance.
//
// Requests are read with net/http's parser (http.ReadRequest) and forwarded with
// Request.Write and http.ReadResponse; the broker parses no HTTP of its own.
package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foundry-build/foundry/lang"
)

// Policy decides what the broker may reach; *lang.Grants is one (the step's granted hosts).
type Policy interface {
	// AllowsNetwork reports whether the endpoint may be reached at all.
	AllowsNetwork(lang.HostPort) bool
	// AllowsDial reports whether the endpoint may be reached at this address.
	AllowsDial(lang.HostPort, netip.Addr) bool
}

// Outcomes of a connection.
const (
	OutcomeRelayed = "relayed" // admitted, dialed and relayed until one side closed
	OutcomeRefused = "refused" // refused before anything was dialed: see Reason
	OutcomeFailed  = "failed"  // admitted, but the upstream could not be reached or failed
	OutcomeLimit   = "limit"   // cut when the bytes relayed passed MaxBytes
	// OutcomeEnded is a connection still open when the step ended (its process exited or was
	// killed), closed then; a client that keeps idle connections open ends them this way.
	OutcomeEnded = "ended"
)

// Connection is one request to the broker, as recorded in the step's provenance.
type Connection struct {
	// Method is "CONNECT" for a tunnel, else the method of a plain HTTP request.
	Method string `json:"method"`
	// Host and Port are the endpoint the client asked for, canonical (lang.HostPort) when it
	// could be read; Host is then the raw text, Port 0.
	Host string `json:"host"`
	Port uint16 `json:"port"`
	// Address is the IP address and port dialed, when the broker dialed.
	Address string `json:"address,omitempty"`
	Outcome string `json:"outcome"`
	// Reason says why a connection was refused, failed or cut.
	Reason string `json:"reason,omitempty"`
	// Sent is the bytes the broker sent upstream (the request, the client's side of a
	// tunnel); Received the bytes it read from upstream.
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
}

// Options configure a Broker.
type Options struct {
	// Policy is what may be reached; nil reaches nothing.
	Policy Policy
	// MaxBytes bounds the bytes relayed upstream and back, all connections together; 0 or
	// less means no bound.
	MaxBytes int64
	// Resolver resolves granted names; nil is net.DefaultResolver.
	Resolver *net.Resolver
	// DialTimeout bounds dialing one address; 0 means 30 seconds.
	DialTimeout time.Duration
}

// Bounds that keep one step from exhausting the broker.
const (
	// maxHeaderBytes bounds a request's line and headers, as http.Server's default does.
	maxHeaderBytes = 1 << 20
	// maxConnections bounds the connections one step may make (and the records kept).
	maxConnections = 4096
	// headerTimeout bounds the wait for a request's headers on a new connection.
	headerTimeout = time.Minute
)

// errLimit is the error of a read or write past MaxBytes.
var errLimit = errors.New("the step's egress limit was reached")

// Broker is the egress proxy of one step. Serve it once; read Connections after.
type Broker struct {
	opt   Options
	total atomic.Int64 // bytes relayed, all connections together

	mu    sync.Mutex
	conns []Connection
	full  bool // maxConnections were recorded; later ones are closed unrecorded
}

// New returns a broker with the options o.
func New(o Options) *Broker {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 30 * time.Second
	}
	return &Broker{opt: o}
}

// Connections returns the connections recorded so far, in the order they were made.
func (b *Broker) Connections() []Connection {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.conns)
}

// record reserves the next connection record and returns its index, or -1 when the broker
// has recorded all it will.
func (b *Broker) record(c Connection) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.conns) >= maxConnections {
		if !b.full {
			b.full = true
			b.conns[len(b.conns)-1].Reason += fmt.Sprintf("; the broker records at most %d connections and refused every later one", maxConnections)
		}
		return -1
	}
	b.conns = append(b.conns, c)
	return len(b.conns) - 1
}

// update changes record i.
func (b *Broker) update(i int, f func(*Connection)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.conns[i])
}

// Serve accepts connections on l until ctx ends, then closes l and every connection, and
// returns once they are all done.
func (b *Broker) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("egress broker: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.serveConn(ctx, c)
		}()
	}
}

// serveConn serves one request on c: a CONNECT tunnel, or one plain HTTP request, after
// which c is closed (one request per connection keeps one record per upstream connection).
func (b *Broker) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	// The header is read under a bound, as http.Server reads it; the body without. The
	// bytes of the header are kept as they came: http.ReadRequest drops the Host header of a
	// request that names its target in its request URI, and the broker checks it.
	lr := &io.LimitedReader{R: c, N: maxHeaderBytes}
	head := &headCopy{on: true}
	br := bufio.NewReader(io.TeeReader(lr, head))
	c.SetReadDeadline(time.Now().Add(headerTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			b.refuse(c, Connection{Reason: "not an HTTP request: " + err.Error()}, http.StatusBadRequest)
		}
		return
	}
	c.SetReadDeadline(time.Time{})
	lr.N = 1<<63 - 1
	hosts, err := head.hosts()
	if err != nil {
		b.refuse(c, Connection{Method: req.Method, Host: req.RequestURI, Reason: "reading the header again: " + err.Error()}, http.StatusBadRequest)
		return
	}
	if req.Method == http.MethodConnect {
		b.tunnel(ctx, c, br, req, hosts)
		return
	}
	b.forward(ctx, c, req, hosts)
}

// headCopy keeps the bytes of a request's header (and whatever the reader buffered past
// it) until hosts reads them; then it keeps nothing more.
type headCopy struct {
	on  bool
	buf bytes.Buffer
}

func (h *headCopy) Write(p []byte) (int, error) {
	if h.on {
		h.buf.Write(p)
	}
	return len(p), nil
}

// hosts reads the header kept, with net/textproto's reader, and returns its Host fields.
func (h *headCopy) hosts() ([]string, error) {
	h.on = false
	defer h.buf.Reset()
	tp := textproto.NewReader(bufio.NewReader(&h.buf))
	if _, err := tp.ReadLine(); err != nil {
		return nil, err
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	return hdr.Values("Host"), nil
}

// refuse records rec as refused and answers the client with status and the reason.
func (b *Broker) refuse(c net.Conn, rec Connection, status int) {
	rec.Outcome = OutcomeRefused
	if b.record(rec) < 0 {
		return
	}
	msg := "foundry egress: refused: " + rec.Reason + "\n"
	resp := &http.Response{
		StatusCode: status, ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(strings.NewReader(msg)),
		ContentLength: int64(len(msg)),
		Close:         true,
	}
	resp.Write(c)
}

// target reads the endpoint a request names and checks its Host header against it: rec gets
// the method and endpoint, and reason is set when the request must be refused.
func target(req *http.Request, hosts []string, rec *Connection) (hp lang.HostPort, reason string) {
	rec.Method = req.Method
	var err error
	if req.Method == http.MethodConnect {
		// CONNECT's request URI is the authority, "host:port" (net/http reads it into URL.Host).
		rec.Host = req.RequestURI
		hp, err = lang.ParseHostPort(req.RequestURI)
		if err != nil || req.URL == nil || req.URL.Host != req.RequestURI {
			return hp, fmt.Sprintf("CONNECT %q: want HOST:PORT", req.RequestURI)
		}
	} else {
		rec.Host = req.RequestURI
		if req.URL == nil || !req.URL.IsAbs() || req.URL.Host == "" {
			return hp, fmt.Sprintf("%s %q: a proxy request names an absolute http:// URL", req.Method, req.RequestURI)
		}
		if !strings.EqualFold(req.URL.Scheme, "http") {
			return hp, fmt.Sprintf("%s %q: only http:// URLs are forwarded; reach https:// through CONNECT", req.Method, req.RequestURI)
		}
		rec.Host = req.URL.Host
		hp, err = lang.URLHostPort(req.URL)
		if err != nil {
			return hp, err.Error()
		}
	}
	rec.Host, rec.Port = hp.Host, hp.Port
	// A request that names its target twice must name one target (net/http refused a
	// request with two Host headers).
	if len(hosts) > 0 {
		if hh, err := hostHeader(hosts[0], hp.Port, req.Method == http.MethodConnect); err != nil || hh != hp {
			return hp, fmt.Sprintf("the Host header %q names another endpoint than the request's %s", hosts[0], hp)
		}
	}
	return hp, ""
}

// hostHeader reads a Host header: HOST[:PORT], the port defaulting to def for a CONNECT
// (whose target names its port) and to 80 for a plain request (only http:// is forwarded).
func hostHeader(h string, def uint16, connect bool) (lang.HostPort, error) {
	if !connect {
		def = 80
	}
	if _, _, err := net.SplitHostPort(h); err != nil {
		h = net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), fmt.Sprint(def))
	}
	return lang.ParseHostPort(h)
}

// tunnel serves a CONNECT: checks, dials, answers 200 and relays bytes both ways.
func (b *Broker) tunnel(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request, hosts []string) {
	rec := Connection{}
	hp, reason := target(req, hosts, &rec)
	if reason != "" {
		rec.Reason = reason
		b.refuse(c, rec, http.StatusBadRequest)
		return
	}
	up, i, ok := b.open(ctx, c, hp, rec)
	if !ok {
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		b.finish(ctx, i, up, err)
		return
	}
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	// Bytes the client sent after the CONNECT's header (a TLS hello, pipelined) are in br.
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(up, br)
		// The client is done sending: tell the upstream, and keep reading its answer.
		if tc, ok := up.c.(*net.TCPConn); ok && err == nil {
			tc.CloseWrite()
		}
		errc <- err
	}()
	go func() {
		_, err := io.Copy(c, up)
		c.Close() // the upstream is done: so is the client's side
		errc <- err
	}()
	// One side closing cleanly ends the tunnel well, however the other side then ends; a
	// failure of either (the limit, the step's end) cuts both.
	err := <-errc
	if err == nil {
		<-errc
	} else {
		up.Close()
		c.Close()
		<-errc
	}
	b.finish(ctx, i, up, err)
}

// forward serves a plain HTTP request: checks, dials, sends it in origin form with the
// hop-by-hop headers removed, and relays the response.
func (b *Broker) forward(ctx context.Context, c net.Conn, req *http.Request, hosts []string) {
	rec := Connection{}
	hp, reason := target(req, hosts, &rec)
	if reason != "" {
		rec.Reason = reason
		b.refuse(c, rec, http.StatusBadRequest)
		return
	}
	up, i, ok := b.open(ctx, c, hp, rec)
	if !ok {
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	out := req.Clone(ctx)
	out.RequestURI = ""
	out.Host = req.URL.Host // the authority checked: the Host header upstream names it
	removeHopHeaders(out.Header)
	out.Close = true
	if err := out.Write(up); err != nil {
		b.finish(ctx, i, up, fmt.Errorf("sending the request: %w", err))
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), out)
	if err != nil {
		b.finish(ctx, i, up, fmt.Errorf("reading the response: %w", err))
		return
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	resp.Close = true
	b.finish(ctx, i, up, resp.Write(c))
}

// open checks hp against the policy, resolves and checks its addresses, dials the first
// that answers, and records the connection (refused, failed or dialed). ok is false when
// the client was answered with a refusal.
func (b *Broker) open(ctx context.Context, c net.Conn, hp lang.HostPort, rec Connection) (*counted, int, bool) {
	if b.opt.Policy == nil || !b.opt.Policy.AllowsNetwork(hp) {
		rec.Reason = fmt.Sprintf("no grant allows %s", hp)
		b.refuse(c, rec, http.StatusForbidden)
		return nil, -1, false
	}
	addrs, err := b.addresses(ctx, hp)
	if err != nil {
		rec.Reason = err.Error()
		b.refuse(c, rec, http.StatusForbidden)
		return nil, -1, false
	}
	var errs []error
	d := net.Dialer{Timeout: b.opt.DialTimeout}
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, hp.Port)
		nc, err := d.DialContext(ctx, "tcp", ap.String())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rec.Address = ap.String()
		rec.Outcome = OutcomeRelayed
		i := b.record(rec)
		if i < 0 {
			nc.Close()
			return nil, -1, false
		}
		return &counted{c: nc, b: b}, i, true
	}
	rec.Outcome, rec.Reason = OutcomeFailed, fmt.Sprintf("dialing %s: %v", hp, errors.Join(errs...))
	if b.record(rec) >= 0 {
		resp := &http.Response{StatusCode: http.StatusBadGateway, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Close: true}
		resp.Write(c)
	}
	return nil, -1, false
}

// addresses are the addresses hp may be dialed at: its literal IP, or every address its name
// resolves to, each checked by the policy (all of them: a name that also leads somewhere it
// must not is refused), IPv4 first.
func (b *Broker) addresses(ctx context.Context, hp lang.HostPort) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if a, ok := hp.Addr(); ok {
		addrs = []netip.Addr{a}
	} else {
		ips, err := b.opt.Resolver.LookupNetIP(ctx, "ip", hp.Host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %v", hp.Host, err)
		}
		for _, ip := range ips {
			addrs = append(addrs, ip.Unmap().WithZone(""))
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no address", hp.Host)
	}
	for _, a := range addrs {
		if !b.opt.Policy.AllowsDial(hp, a) {
			return nil, fmt.Errorf("%s resolves to %s, which a grant by name never reaches (grant the address itself to reach it)", hp, a)
		}
	}
	slices.SortStableFunc(addrs, func(x, y netip.Addr) int {
		switch {
		case x.Is4() && !y.Is4():
			return -1
		case y.Is4() && !x.Is4():
			return 1
		}
		return 0
	})
	return addrs, nil
}

// finish records how an admitted connection ended: its bytes and, for err, why it failed.
// A connection cut because ctx, Serve's, ended is recorded as ended with the step.
func (b *Broker) finish(ctx context.Context, i int, up *counted, err error) {
	b.update(i, func(r *Connection) {
		r.Sent, r.Received = up.sent.Load(), up.received.Load()
		switch {
		case up.limited.Load() || errors.Is(err, errLimit):
			r.Outcome, r.Reason = OutcomeLimit, fmt.Sprintf("cut after %d bytes: %v", b.total.Load(), errLimit)
		case err != nil && ctx.Err() != nil:
			r.Outcome, r.Reason = OutcomeEnded, "closed when the step ended"
		case err != nil && !errors.Is(err, net.ErrClosed):
			r.Outcome, r.Reason = OutcomeFailed, err.Error()
		}
	})
}

// counted is an upstream connection that counts its bytes into the broker's bound.
type counted struct {
	c              net.Conn
	b              *Broker
	sent, received atomic.Int64
	limited        atomic.Bool
}

// charge adds n bytes to the broker's total and reports whether the total stays in bound.
func (u *counted) charge(n int) bool {
	t := u.b.total.Add(int64(n))
	if u.b.opt.MaxBytes > 0 && t > u.b.opt.MaxBytes {
		u.limited.Store(true)
		u.c.Close()
		return false
	}
	return true
}

func (u *counted) Read(p []byte) (int, error) {
	n, err := u.c.Read(p)
	u.received.Add(int64(n))
	if !u.charge(n) {
		return 0, errLimit
	}
	return n, err
}

func (u *counted) Write(p []byte) (int, error) {
	if !u.charge(len(p)) {
		return 0, errLimit
	}
	n, err := u.c.Write(p)
	u.sent.Add(int64(n))
	return n, err
}

func (u *counted) Close() error { return u.c.Close() }

// hopHeaders are the hop-by-hop headers a proxy does not forward (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopHeaders removes the hop-by-hop headers and those Connection names.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}
