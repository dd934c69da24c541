package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/foundry-build/foundry/lang"
)

// ErrNotGranted wraps a request or a connection the operator's network grant does not allow.
var ErrNotGranted = errors.New("no grant allows it")

// ErrTooLarge wraps a download past its limit.
var ErrTooLarge = errors.New("download limit exceeded")

// client is the HTTP client every fetch goes through (http sources, git, OCI registries).
// It reaches only what the operator's network grant allows (spec/grants.md §1a):
//
//   - each request's host and port, redirects included, must be granted (AllowsNetwork);
//   - a connection made directly is made only to an address AllowsDial allows for that
//     endpoint, so a granted name that resolves to this machine or its link is refused;
//   - a proxy the environment names (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, as any Go client
//     reads them) is dialed as the proxy: the requests through it were checked above, and
//     which address the proxy reaches is then the proxy's to say;
//   - the bytes of all responses together are bounded by budget (ErrTooLarge).
type client struct {
	grants *lang.Grants
	budget *atomic.Int64 // bytes still allowed
	limit  int64
	proxy  func(*url.URL) (*url.URL, error)
	// proxies are the HOST:PORT of the proxies the environment names.
	proxies map[string]bool
}

// newClient makes the client of one fetch attempt, allowed limit bytes.
func newClient(grants *lang.Grants, limit int64) *client {
	c := &client{grants: grants, budget: new(atomic.Int64), limit: limit}
	c.budget.Store(limit)
	cfg := httpproxy.FromEnvironment()
	c.proxy = cfg.ProxyFunc()
	c.proxies = map[string]bool{}
	for _, s := range []string{cfg.HTTPProxy, cfg.HTTPSProxy} {
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "http://" + s // as ProxyFunc reads it
		}
		u, err := url.Parse(s)
		if err != nil {
			continue // ProxyFunc refuses it too: no request goes through it
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443", "socks5": "1080"}[u.Scheme]
		}
		c.proxies[net.JoinHostPort(u.Hostname(), port)] = true
	}
	return c
}

// http is the *http.Client of c.
func (c *client) http() *http.Client {
	t := &http.Transport{
		Proxy:                 func(r *http.Request) (*url.URL, error) { return c.proxy(r.URL) },
		DialContext:           c.dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          8,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
	}
	return &http.Client{
		Transport: c.roundTripper(t),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return c.allowed(req.URL)
		},
	}
}

// roundTripper checks every request against the grant and bounds every response.
func (c *client) roundTripper(next http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		if err := c.allowed(req.URL); err != nil {
			return nil, err
		}
		resp, err := next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if resp.ContentLength > c.budget.Load() {
			resp.Body.Close()
			return nil, fmt.Errorf("%s: %d bytes, more than the %d the source may download (limits.download): %w", req.URL.Redacted(), resp.ContentLength, c.limit, ErrTooLarge)
		}
		resp.Body = &budgetBody{ReadCloser: resp.Body, c: c}
		return resp, nil
	})
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// budgetBody charges what is read against the client's budget.
type budgetBody struct {
	io.ReadCloser
	c *client
}

func (b *budgetBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.c.budget.Add(-int64(n)) < 0 {
		return n, fmt.Errorf("more than %d bytes (limits.download): %w", b.c.limit, ErrTooLarge)
	}
	return n, err
}

// allowed reports why u may not be requested, or nil.
func (c *client) allowed(u *url.URL) error {
	hp, err := lang.URLHostPort(u)
	if err != nil {
		return fmt.Errorf("%s: %v: %w", u.Redacted(), err, ErrNotGranted)
	}
	if !c.grants.AllowsNetwork(hp) {
		return fmt.Errorf("%s: no grant allows %s: %w", u.Redacted(), hp, ErrNotGranted)
	}
	return nil
}

// dial connects to addr: a proxy of the environment as it is, anything else only at an
// address the grant allows for it.
func (c *client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	if c.proxies[addr] {
		return d.DialContext(ctx, network, addr)
	}
	hp, err := lang.ParseHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", addr, err, ErrNotGranted)
	}
	if !c.grants.AllowsNetwork(hp) {
		return nil, fmt.Errorf("connecting to %s: %w", hp, ErrNotGranted)
	}
	var ips []netip.Addr
	if ip, ok := hp.Addr(); ok {
		ips = []netip.Addr{ip}
	} else if ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip", hp.Host); err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range ips {
		if !c.grants.AllowsDial(hp, ip) {
			errs = append(errs, fmt.Errorf("%s resolves to %s, an address of this machine or its link, which a grant of the name does not allow (grant the address itself if it is meant): %w", hp.Host, ip, ErrNotGranted))
			continue
		}
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(ip, hp.Port).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s has no address", hp.Host)
	}
	return nil, errors.Join(errs...)
}
