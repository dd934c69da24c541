package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/invoke"
)

// serveMemoryBound is what foundry serve may ever hold resident, attacks included: a
// generous bound over what it measured (about 240 MB at most), well under what it took
// before its inputs had a budget (3.4 GB for 50 bodies of 14 MB).
const serveMemoryBound = 512 << 20

// Hostile inputs, through the binary: 50 concurrent bodies of 14 MB (seven million values
// each), a nesting 100,000 deep, 14 MB that are not JSON, a body announced over the limit.
// Each is answered with its own status (413 too many values; 503 with Retry-After when the
// memory budget had no room in time; 400 not JSON, saying where in the bytes and not which
// function refused them), the server still answers a call afterwards, and it never held
// more than serveMemoryBound resident (VmHWM).
func TestServeBoundsHostileInput(t *testing.T) {
	dir := appliedMCPProject(t)
	base, proc := startServeProcess(t, dir)
	url := base + "/capabilities/echo"
	type answer struct {
		status     int
		retryAfter string
		detail     string
	}
	post := func(body io.Reader, size int64) answer {
		req, _ := http.NewRequest("POST", url, body)
		req.ContentLength = size
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{detail: err.Error()}
		}
		defer resp.Body.Close()
		var p struct{ Detail string }
		b, _ := io.ReadAll(resp.Body)
		json.Unmarshal(b, &p)
		if p.Detail == "" {
			p.Detail = string(b)
		}
		return answer{resp.StatusCode, resp.Header.Get("Retry-After"), p.Detail}
	}

	many := []byte(`{"text": [` + strings.Repeat("1,", 7_000_000) + "1]}")
	var wg sync.WaitGroup
	answers := make([]answer, 50)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = post(bytes.NewReader(many), int64(len(many)))
		}()
	}
	wg.Wait()
	counts := map[int]int{}
	for _, a := range answers {
		counts[a.status]++
		switch {
		case a.status == 413 && a.detail == fmt.Sprintf("the input holds more than %d JSON values, the most a call takes", invoke.MaxInputValues):
		case a.status == 503 && a.retryAfter != "":
		default:
			t.Errorf("a body of seven million values: %+v, want 413 (too many values) or 503 with Retry-After", a)
		}
	}
	if counts[413] == 0 {
		t.Errorf("no body of seven million values was refused for its size: %v", counts)
	}
	t.Logf("50 concurrent bodies of %d bytes: %v", len(many), counts)

	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	notJSON := "x" + strings.Repeat(" ", 14_000_000)
	for _, c := range []struct {
		name, body string
		status     int
		detail     string
	}{
		{"100,000 deep", deep, 400, "the input is not JSON: at byte 1000: nesting deeper than 1000"},
		{"14 MB not JSON", notJSON, 400, "the input is not JSON: at byte 0: unexpected 'x', want a JSON value"},
		{"valid", `{"text": "hi"}`, 200, ""},
	} {
		a := post(strings.NewReader(c.body), int64(len(c.body)))
		if a.status != c.status || c.detail != "" && a.detail != c.detail {
			t.Errorf("%s: %+v, want %d %q", c.name, a, c.status, c.detail)
		}
	}

	// A body announced over the limit is refused before it is read: the server answers
	// while the client has sent only its headers.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /capabilities/echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 1<<30)
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	line, _ := io.ReadAll(io.LimitReader(conn, 12))
	if string(line) != "HTTP/1.1 413" {
		t.Errorf("a body announced as 1 GiB: %q, want 413 before the body", line)
	}

	if hwm := vmHWM(t, proc.Pid); hwm > serveMemoryBound {
		t.Errorf("serve held %d MB resident at its peak, more than %d MB", hwm>>20, serveMemoryBound>>20)
	} else {
		t.Logf("serve's peak resident memory: %d MB", hwm>>20)
	}
}

// vmHWM is a process's peak resident memory, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// FuzzServeBody: whatever the body of a call, serve's body path (the size check, the
// budgets, the value count, the strict check, the schema) answers 200 with the input the
// capability was handed (here a stand-in that echoes it: the checked input, compacted),
// or a 400 or 413 problem that names no function of Foundry's; never a panic or a 5xx.
func FuzzServeBody(f *testing.F) {
	c := invoke.Capability{Name: "any", Address: "capability.any", Kind: "cli", Contract: digest.FromBytes([]byte("c")),
		Ref: "oci-layout:/r@sha256:" + strings.Repeat("a", 64), InputSchema: json.RawMessage(`{"type":"array","items":{"type":"integer"},"maxItems":3}`)}
	run := func(_ context.Context, _ invoke.Capability, in invoke.Input) (*invoke.Result, error) {
		return &invoke.Result{Output: in.JSON()}, nil
	}
	h, err := newServeHandler("p", []invoke.Capability{c}, run, log.New(io.Discard, "", 0))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`[1, 2]`, `[1,2,3,4]`, `x`, `[1.5]`, `{"a":1,"a":2}`, "[\"\xff\"]", `[1e400]`, ` [ ] `,
		strings.Repeat("[", 1001) + strings.Repeat("]", 1001), `[` + strings.Repeat(`1,`, 300) + `1]`, `["\ud800"]`, `[1] x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/capabilities/any", bytes.NewReader(body)))
		switch rec.Code {
		case 200:
			var want bytes.Buffer
			if err := json.Compact(&want, body); err != nil || rec.Body.String() != want.String()+"\n" {
				t.Fatalf("200 for %q: %q", body, rec.Body.String())
			}
		case 400, 413:
			var p struct{ Type, Detail string }
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Header().Get("Content-Type") != "application/problem+json" ||
				p.Detail == "" || strings.Contains(p.Detail, "digest:") || strings.Contains(p.Detail, "canonicalize") {
				t.Fatalf("%d for %q: %s", rec.Code, body, rec.Body.String())
			}
		default:
			t.Fatalf("%d for %q: %s", rec.Code, body, rec.Body.String())
		}
	})
}
