package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpHTTPPath is the one endpoint of the Streamable HTTP transport.
const mcpHTTPPath = "/mcp"

// mcpHTTPConfig is how `foundry mcp -http` listens: what the operator decided about the
// network, beside mcpConfig's project settings.
type mcpHTTPConfig struct {
	addr       string        // -http HOST:PORT
	allowPlain bool          // -allow-remote: plain HTTP on an address that is not loopback
	tlsCert    string        // -tls-cert, with tlsKey: serve HTTPS
	tlsKey     string        // -tls-key
	origins    stringList    // -allow-origin: browser origins allowed besides the server's own
	sessions   int           // -max-sessions: sessions open at once
	idle       time.Duration // -session-idle: a session with no request for this long is closed
	resource   string        // -resource: this server's resource URI (the tokens' audience)
	auth       *mcpAuth      // nil: no authorization (loopback or -allow-remote only)
}

// mcpEventStoreBytes bounds what the event store keeps of all sessions' streams for
// replay (Last-Event-ID): the oldest events are dropped first.
const mcpEventStoreBytes = 64 << 20

// isLoopbackAddr says whether HOST:PORT names a loopback address (or localhost).
func isLoopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback(), nil
}

// checkHTTPConfig refuses what would expose the server: plain HTTP on an address that is not
// loopback, unless the operator said -allow-remote; half a TLS configuration.
func checkHTTPConfig(hc *mcpHTTPConfig) error {
	loop, err := isLoopbackAddr(hc.addr)
	if err != nil {
		return fmt.Errorf("-http %q: %v", hc.addr, err)
	}
	if (hc.tlsCert == "") != (hc.tlsKey == "") {
		return errors.New("-tls-cert and -tls-key go together")
	}
	if !loop && hc.tlsCert == "" && !hc.allowPlain {
		return fmt.Errorf("-http %s is not a loopback address: serve it over TLS (-tls-cert, -tls-key), or add -allow-remote to serve plain HTTP there (anyone on the path reads the tokens and the results)", hc.addr)
	}
	if hc.sessions < 1 {
		return errors.New("-max-sessions must be at least 1")
	}
	if hc.idle <= 0 {
		return errors.New("-session-idle must be positive")
	}
	for _, o := range hc.origins {
		if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" {
			return fmt.Errorf("-allow-origin %q: want an origin, SCHEME://HOST[:PORT]", o)
		}
	}
	return nil
}

// serveHTTP serves s over Streamable HTTP on hc.addr until ctx is done: it prints where it
// listens on stderr, and stops giving requests in flight serveGrace.
func (s *mcpServer) serveHTTP(ctx context.Context, hc *mcpHTTPConfig) error {
	ln, err := net.Listen("tcp", hc.addr)
	if err != nil {
		return err
	}
	scheme := "http"
	if hc.tlsCert != "" {
		scheme = "https"
	}
	if hc.resource == "" {
		hc.resource = scheme + "://" + ln.Addr().String() + mcpHTTPPath
	}
	h, err := s.httpHandler(hc)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second,
		// The tools' own work is bounded by the operator's settings; a body must arrive
		// within a minute, as serve's.
		ReadTimeout: 60 * time.Second,
		TLSConfig:   &tls.Config{MinVersion: tls.VersionTLS12},
		// Never log a request: its Authorization header is a credential.
		ErrorLog: nil,
	}
	fmt.Fprintf(s.cfg.env.stderr, "foundry mcp: listening on %s://%s%s (resource %s)\n", scheme, ln.Addr(), mcpHTTPPath, hc.resource)
	errc := make(chan error, 1)
	go func() {
		if hc.tlsCert != "" {
			errc <- srv.ServeTLS(ln, hc.tlsCert, hc.tlsKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	serveStarted(ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(s.cfg.env.stderr, "foundry mcp: stopping")
	sctx, cancel := context.WithTimeout(context.Background(), serveGrace)
	defer cancel()
	// Open sessions hold streams (GET) that never end on their own: close them first.
	for ss := range s.srv.Sessions() {
		ss.Close()
	}
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	fmt.Fprintln(s.cfg.env.stderr, "foundry mcp: stopped")
	return nil
}

// httpHandler is the server's HTTP interface: /mcp (go-sdk's Streamable HTTP handler,
// behind the checks of mcpGuard) and, with authorization, the protected resource metadata.
func (s *mcpServer) httpHandler(hc *mcpHTTPConfig) (http.Handler, error) {
	events := mcp.NewMemoryEventStore(nil)
	events.SetMaxBytes(mcpEventStoreBytes)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &mcp.StreamableHTTPOptions{
		EventStore:     events,
		SessionTimeout: hc.idle,
		// One message per request, bounded as a line of the stdio transport is.
		MaxRequestBodyBytes: mcpMaxLine,
		Logger:              s.log,
	})
	own, err := url.Parse(hc.resource)
	if err != nil || own.Scheme == "" || own.Host == "" {
		return nil, fmt.Errorf("-resource %q: want an absolute URL", hc.resource)
	}
	g := &mcpGuard{srv: s.srv, next: sdk, maxSessions: hc.sessions,
		origins: append(ownOrigins(own), hc.origins...)}
	mux := http.NewServeMux()
	var endpoint http.Handler = g
	if hc.auth != nil {
		endpoint, err = hc.auth.protect(mux, hc.resource, g)
		if err != nil {
			return nil, err
		}
		g.scopes = hc.auth
	}
	mux.Handle(mcpHTTPPath, originChecked(g.origins, endpoint))
	return mux, nil
}

// ownOrigins are the origins of the server itself: its resource URL's, and on a loopback
// address the same port under each loopback name (localhost, 127.0.0.1, [::1]), which a
// browser on this machine may use for it. Another port is another site.
func ownOrigins(own *url.URL) []string {
	origins := []string{own.Scheme + "://" + own.Host}
	host, port := own.Hostname(), own.Port()
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		for _, h := range []string{"localhost", "127.0.0.1", "[::1]"} {
			if o := own.Scheme + "://" + h + ":" + port; !slices.Contains(origins, o) {
				origins = append(origins, o)
			}
		}
	}
	return origins
}

// originChecked refuses (403) a request whose Origin header names an origin other than the
// allowed ones, before anything else reads it: a browser page of another site, including one
// whose name was rebound to this machine's address (DNS rebinding), cannot drive the
// server. go-sdk refuses, besides, a request to a loopback address whose Host is not.
// Clients that are not browsers send no Origin.
func originChecked(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Values("Origin"); len(o) > 0 && (len(o) > 1 || !slices.Contains(allowed, o[0])) {
			http.Error(w, fmt.Sprintf("Forbidden: origin %q may not use this server (allowed: %v; the operator adds more with -allow-origin)", short(o[0], mcpMaxEcho), allowed), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// mcpGuard checks what go-sdk's handler does not before handing a request to it: the
// MCP-Protocol-Version header every request of a session must carry (the versions served
// all require it, so its absence is not taken to mean 2025-03-26), the number of sessions,
// the body's size, one JSON-RPC message per body, and, with authorization, the scope a tool
// call needs.
type mcpGuard struct {
	srv         *mcp.Server
	next        http.Handler
	maxSessions int
	origins     []string
	scopes      *mcpAuth // nil: no authorization

	newSession sync.Mutex // held while a request without a session may open one
}

func (g *mcpGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	session := r.Header.Get("Mcp-Session-Id")
	if session != "" && r.Header.Get("Mcp-Protocol-Version") == "" {
		http.Error(w, fmt.Sprintf("Bad Request: the MCP-Protocol-Version header is required on every request of a session (supported versions: %v)", mcpProtocolVersions), http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcpMaxLine))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, nil, fmt.Sprintf("request body exceeds %d bytes", mcpMaxLine))
				return
			}
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		pass, reply := checkLine(body)
		if reply != nil || pass == nil {
			// Not JSON (-32700), a batch or not one JSON-RPC message (-32600), as over stdio.
			if reply == nil {
				reply = rpcError(nil, -32600, "invalid request: an empty body")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(reply)
			return
		}
		if g.scopes != nil && !g.scopes.allowed(w, r, body) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	if session == "" && r.Method == http.MethodPost {
		// A request without a session opens one (go-sdk closes it again unless it was an
		// initialize that succeeded): count them under a lock so that the bound holds.
		g.newSession.Lock()
		defer g.newSession.Unlock()
		n := 0
		for range g.srv.Sessions() {
			n++
		}
		if n >= g.maxSessions {
			w.Header().Set("Retry-After", "10")
			http.Error(w, fmt.Sprintf("Service Unavailable: %d sessions are open, the most this server keeps (-max-sessions); close one (DELETE) or retry later", n), http.StatusServiceUnavailable)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// writeRPCError answers a JSON-RPC error (code -32600 unless the status says otherwise) with
// an HTTP status.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, msg string) {
	code := -32600
	if status == http.StatusBadRequest {
		code = -32700
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(rpcError(id, code, msg))
}
