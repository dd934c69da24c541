package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/foundry-build/foundry/lang"
)

// upstream is a test server on loopback that counts the requests it got and remembers the
// Host of the last one.
type upstream struct {
	*httptest.Server
	hits     atomic.Int64
	mu       sync.Mutex
	lastHost string
}

func newUpstream(t *testing.T, tlsOn bool, h http.HandlerFunc) *upstream {
	u := &upstream{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from upstream\n") }
	}
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.lastHost = r.Host
		u.mu.Unlock()
		h(w, r)
	})
	if tlsOn {
		u.Server = httptest.NewTLSServer(wrapped)
	} else {
		u.Server = httptest.NewServer(wrapped)
	}
	t.Cleanup(u.Close)
	return u
}

// hostPort is u's listening address as a canonical endpoint.
func (u *upstream) hostPort(t *testing.T) lang.HostPort {
	hp, err := lang.ParseHostPort(u.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return hp
}

func grants(t *testing.T, hosts ...string) *lang.Grants {
	g := &lang.Grants{}
	for _, h := range hosts {
		hp, err := lang.ParseHostPort(h)
		if err != nil {
			t.Fatal(err)
		}
		g.Network = append(g.Network, hp)
	}
	return g
}

// startBroker serves a broker with o on loopback until the test ends; it returns the broker
// and its address. Connections are read after stop.
func startBroker(t *testing.T, o Options) (*Broker, string, func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return b, l.Addr().String(), stop
}

// client is an HTTP client that sends everything through the broker at addr, trusting the
// TLS upstream tu when given.
func client(addr string, tu *upstream) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr}), DisableKeepAlives: true}
	if tu != nil {
		tr.TLSClientConfig = tu.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// only returns the single recorded connection, failing otherwise.
func only(t *testing.T, b *Broker) Connection {
	t.Helper()
	cs := b.Connections()
	if len(cs) != 1 {
		t.Fatalf("recorded %d connections, want 1: %+v", len(cs), cs)
	}
	return cs[0]
}

func TestRelaysGrantedPlainHTTP(t *testing.T) {
	up := newUpstream(t, false, nil)
	b, addr, stop := startBroker(t, Options{Policy: grants(t, up.Listener.Addr().String())})
	code, body := get(t, client(addr, nil), up.URL+"/x")
	if code != 200 || body != "hello from upstream\n" {
		t.Fatalf("GET through the broker: %d %q", code, body)
	}
	stop()
	c := only(t, b)
	hp := up.hostPort(t)
	if c.Method != "GET" || c.Host != hp.Host || c.Port != hp.Port || c.Outcome != OutcomeRelayed || c.Address != hp.String() {
		t.Fatalf("record %+v", c)
	}
	if c.Sent == 0 || c.Received < int64(len(body)) {
		t.Fatalf("bytes not counted: %+v", c)
	}
	if up.lastHost != hp.String() {
		t.Fatalf("upstream saw Host %q, want %q", up.lastHost, hp)
	}
}

func TestRelaysGrantedTunnel(t *testing.T) {
	up := newUpstream(t, true, nil)
	b, addr, stop := startBroker(t, Options{Policy: grants(t, up.Listener.Addr().String())})
	code, body := get(t, client(addr, up), up.URL+"/x")
	if code != 200 || body != "hello from upstream\n" {
		t.Fatalf("GET through the tunnel: %d %q", code, body)
	}
	stop()
	c := only(t, b)
	// The client's close and the end of Serve race: a tunnel still open then is "ended".
	if c.Method != "CONNECT" || (c.Outcome != OutcomeRelayed && c.Outcome != OutcomeEnded) || c.Received < int64(len(body)) || c.Sent == 0 {
		t.Fatalf("record %+v", c)
	}
}

// refusedBy checks that a request was refused with the status, recorded with the reason,
// and that no upstream heard of it.
func refusedBy(t *testing.T, b *Broker, code int, body string, want int, reason string, ups ...*upstream) {
	t.Helper()
	if code != want {
		t.Fatalf("status %d (%s), want %d", code, body, want)
	}
	c := only(t, b)
	if c.Outcome != OutcomeRefused || !strings.Contains(c.Reason, reason) || c.Address != "" || c.Sent != 0 {
		t.Fatalf("record %+v, want refused with %q", c, reason)
	}
	for _, u := range ups {
		if n := u.hits.Load(); n != 0 {
			t.Fatalf("upstream %s got %d requests", u.URL, n)
		}
	}
}

func TestRefusesUngrantedHost(t *testing.T) {
	granted := newUpstream(t, false, nil)
	other := newUpstream(t, false, nil)
	b, addr, stop := startBroker(t, Options{Policy: grants(t, granted.Listener.Addr().String())})
	code, body := get(t, client(addr, nil), other.URL+"/")
	stop()
	refusedBy(t, b, code, body, http.StatusForbidden, "no grant allows "+other.hostPort(t).String(), other)
}

func TestRefusesTunnelToUngrantedHost(t *testing.T) {
	granted := newUpstream(t, true, nil)
	other := newUpstream(t, true, nil)
	b, addr, stop := startBroker(t, Options{Policy: grants(t, granted.Listener.Addr().String())})
	code, body := get(t, client(addr, other), other.URL+"/")
	stop()
	if code != 0 || !strings.Contains(body, "Forbidden") {
		t.Fatalf("tunnel to an ungranted host: %d %q", code, body)
	}
	refusedBy(t, b, http.StatusForbidden, body, http.StatusForbidden, "no grant allows", other)
}

func TestRefusesGrantedHostOnAnotherPort(t *testing.T) {
	up := newUpstream(t, false, nil)
	other := newUpstream(t, false, nil) // the same host, 127.0.0.1, another port
	b, addr, stop := startBroker(t, Options{Policy: grants(t, up.Listener.Addr().String())})
	code, body := get(t, client(addr, nil), other.URL+"/")
	stop()
	refusedBy(t, b, code, body, http.StatusForbidden, "no grant allows", other)
}

func TestRefusesLiteralIPOfAGrantedName(t *testing.T) {
	up := newUpstream(t, false, nil)
	port := up.hostPort(t).Port
	// The grant names localhost; 127.0.0.1 is where localhost leads, but not what was granted.
	b, addr, stop := startBroker(t, Options{Policy: grants(t, fmt.Sprintf("localhost:%d", port))})
	code, body := get(t, client(addr, nil), up.URL+"/")
	stop()
	refusedBy(t, b, code, body, http.StatusForbidden, fmt.Sprintf("no grant allows 127.0.0.1:%d", port), up)
}

func TestRefusesGrantedNameThatResolvesToLoopback(t *testing.T) {
	up := newUpstream(t, false, nil)
	port := up.hostPort(t).Port
	// localhost is granted by name, and resolves (from /etc/hosts) to loopback: a name
	// turned against the host, as a rebinding DNS server would.
	b, addr, stop := startBroker(t, Options{Policy: grants(t, fmt.Sprintf("localhost:%d", port))})
	code, body := get(t, client(addr, nil), fmt.Sprintf("http://localhost:%d/", port))
	stop()
	refusedBy(t, b, code, body, http.StatusForbidden, "resolves to 127.0.0.1", up)
}

// dnsServer answers A queries on loopback UDP from answers (name → address), as a DNS
// server the step's operator does not control might; it counts the queries.
func dnsServer(t *testing.T, answers map[string]netip.Addr) (*net.Resolver, *atomic.Int64) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var queries atomic.Int64
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			queries.Add(1)
			bld := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			bld.StartQuestions()
			bld.Question(q)
			bld.StartAnswers()
			if a, ok := answers[strings.TrimSuffix(q.Name.String(), ".")]; ok && q.Type == dnsmessage.TypeA && a.Is4() {
				bld.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: a.As4()})
			}
			msg, err := bld.Finish()
			if err == nil {
				pc.WriteTo(msg, from)
			}
		}
	}()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	return r, &queries
}

func TestRefusesGrantedNameThatResolvesToLinkLocal(t *testing.T) {
	r, queries := dnsServer(t, map[string]netip.Addr{"metadata.example": netip.MustParseAddr("169.254.169.254")})
	b, addr, stop := startBroker(t, Options{Policy: grants(t, "metadata.example:80"), Resolver: r})
	code, body := get(t, client(addr, nil), "http://metadata.example/latest/")
	stop()
	if queries.Load() == 0 {
		t.Fatal("the broker did not ask the resolver")
	}
	refusedBy(t, b, code, body, http.StatusForbidden, "resolves to 169.254.169.254")
}

// raw sends text to the broker at addr on a connection of its own and returns the status
// of the answer.
func raw(t *testing.T, addr, text string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the broker's answer to %q: %v", text, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRefusesHostHeaderOfAnotherEndpoint(t *testing.T) {
	up := newUpstream(t, false, nil)
	other := newUpstream(t, false, nil)
	b, addr, stop := startBroker(t, Options{Policy: grants(t, up.Listener.Addr().String())})
	req := fmt.Sprintf("GET %s/ HTTP/1.1\r\nHost: %s\r\n\r\n", up.URL, other.Listener.Addr())
	code := raw(t, addr, req)
	stop()
	refusedBy(t, b, code, "", http.StatusBadRequest, "the Host header", up, other)
}

func TestRefusesConnectWithHostHeaderOfAnotherEndpoint(t *testing.T) {
	up := newUpstream(t, true, nil)
	other := newUpstream(t, true, nil)
	b, addr, stop := startBroker(t, Options{Policy: grants(t, up.Listener.Addr().String())})
	req := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", up.Listener.Addr(), other.Listener.Addr())
	code := raw(t, addr, req)
	stop()
	refusedBy(t, b, code, "", http.StatusBadRequest, "the Host header", up, other)
}

// A request smuggled inside a tunnel goes where the tunnel goes, whatever its Host header
// says: the other host never hears of it.
func TestTunnelGoesOnlyWhereItsConnectSaid(t *testing.T) {
	up := newUpstream(t, false, nil)
	other := newUpstream(t, false, nil)
	b, addr, stop := startBroker(t, Options{Policy: grants(t, up.Listener.Addr().String())})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", up.Listener.Addr(), up.Listener.Addr())
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", other.Listener.Addr(), other.Listener.Addr())
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.Close()
	stop()
	if up.hits.Load() != 1 || other.hits.Load() != 0 {
		t.Fatalf("granted upstream got %d requests, the other %d; want 1 and 0", up.hits.Load(), other.hits.Load())
	}
	if up.lastHost != other.Listener.Addr().String() {
		t.Fatalf("the granted upstream saw Host %q", up.lastHost)
	}
	if c := only(t, b); c.Outcome == OutcomeRefused || c.Address != up.hostPort(t).String() {
		t.Fatalf("record %+v", c)
	}
}

func TestRefusesWhatIsNotAProxyRequest(t *testing.T) {
	up := newUpstream(t, false, nil)
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: " + up.Listener.Addr().String() + "\r\n\r\n",                 // origin form: not for a proxy
		"GET https://" + up.Listener.Addr().String() + "/ HTTP/1.1\r\n\r\n",                   // https:// is reached by CONNECT
		"CONNECT " + strings.Split(up.Listener.Addr().String(), ":")[0] + " HTTP/1.1\r\n\r\n", // no port
	} {
		b, addr, stop := startBroker(t, Options{Policy: grants(t, up.Listener.Addr().String())})
		code := raw(t, addr, req)
		stop()
		refusedBy(t, b, code, req, http.StatusBadRequest, "", up)
	}
}

func TestCutsAHugeDownloadAtTheLimit(t *testing.T) {
	const size, limit = 8 << 20, 1 << 20
	up := newUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		chunk := make([]byte, 32<<10)
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	b, addr, stop := startBroker(t, Options{Policy: grants(t, up.Listener.Addr().String()), MaxBytes: limit})
	code, body := get(t, client(addr, nil), up.URL+"/big")
	if code == 200 && len(body) >= size {
		t.Fatalf("the whole %d bytes came through a %d-byte limit", len(body), limit)
	}
	stop()
	c := only(t, b)
	if c.Outcome != OutcomeLimit || c.Received > limit+64<<10 {
		t.Fatalf("record %+v, want outcome limit after about %d bytes", c, limit)
	}
}

// A slow upstream holds the connection until the broker's step ends (its deadline): then
// the connection is closed and recorded with what came through.
func TestEndsASlowDownloadWithTheStep(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := newUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.Write([]byte("a trickle"))
		w.(http.Flusher).Flush()
		<-release
	})
	b, addr, stop := startBroker(t, Options{Policy: grants(t, up.Listener.Addr().String())})
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		resp, err := client(addr, nil).Get(up.URL + "/slow")
		close(started)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow download never started")
	}
	stop() // the step's deadline: Serve returns once the connection is closed
	if err := <-errc; err == nil {
		t.Fatal("the client read the whole slow download")
	}
	if c := only(t, b); c.Received == 0 || c.Outcome != OutcomeEnded {
		t.Fatalf("record %+v", c)
	}
}

func TestRefusesEverythingWithoutPolicy(t *testing.T) {
	up := newUpstream(t, false, nil)
	b, addr, stop := startBroker(t, Options{})
	code, body := get(t, client(addr, nil), up.URL+"/")
	stop()
	refusedBy(t, b, code, body, http.StatusForbidden, "no grant allows", up)
}
