package egress

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/foundry-build/foundry/lang"
)

// FuzzBrokerRequest feeds the broker arbitrary bytes as a step would send them: it must
// not panic nor hang, must answer or close, and must dial nothing but the one granted
// endpoint (loopback port 9, where nothing listens: a dial fails at once).
func FuzzBrokerRequest(f *testing.F) {
	for _, s := range []string{
		"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n",
		"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
		"GET http://127.0.0.1:9/x HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n",
		"GET http://[::ffff:127.0.0.1]:9/ HTTP/1.1\r\n\r\n",
		"GET http://localhost:9/ HTTP/1.1\r\nHost: localhost:9\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n",
		"CONNECT [::1]:9 HTTP/1.1\r\n\r\n",
		"POST http://127.0.0.1:9/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	granted := lang.HostPort{Host: "127.0.0.1", Port: 9}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer l.Close()
	f.Fuzz(func(t *testing.T, in []byte) {
		b := New(Options{Policy: &lang.Grants{Network: []lang.HostPort{granted}}, DialTimeout: time.Second})
		client, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		server, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.serveConn(context.Background(), server)
		}()
		// The whole request, then the end of it: the broker answers, or sees the end.
		client.Write(in)
		client.(*net.TCPConn).CloseWrite()
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, client)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the broker did not return after the client closed, on %q", in)
		}
		for _, c := range b.Connections() {
			if c.Address != "" && c.Address != granted.String() {
				t.Fatalf("dialed %s for %q", c.Address, in)
			}
			if c.Outcome != OutcomeRefused && (c.Host != granted.Host || c.Port != granted.Port) {
				t.Fatalf("admitted %+v for %q", c, in)
			}
		}
	})
}
