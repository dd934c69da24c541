package evaluate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/internal/capped"
	"github.com/foundry-build/foundry/lang"
)

// readyPoll is how often the evaluator probes a starting service.
const readyPoll = 25 * time.Millisecond

// serviceRun is what the evaluator observed while driving one service case.
type serviceRun struct {
	ready   bool
	next    int             // index of the request being sent or judged
	verdict verdict.Verdict // the failing judgment, or a pass once every request passed
	judged  bool            // verdict is set
	// record, when set, makes the run a reference's: each response is appended to it
	// instead of being judged (a trace of effects, spec/capability-cases.md §8).
	record *[]verdict.Response
}

// volume is a data volume: a host directory mounted read-write in every instance of one
// case, so that what one instance writes the next one reads.
type volume struct {
	source, target string
}

// runServiceCase runs one service case: the requests up to the first restart in a fresh
// sandbox, and after each restart the next ones in another, on the same data volume when
// vol is set (a capability's cases have neither). The first failing request, or an instance
// that ends before its requests are answered, decides. It returns the verdict and, for a
// counterexample, the request that failed.
func (ev *Evaluator) runServiceCase(ctx context.Context, capb *lang.Capability, img executors.Image, c *verdict.Case, vol *volume) (verdict.Verdict, string, error) {
	for from := 0; ; {
		to := from
		for to < len(c.Requests) && !c.Requests[to].Restart {
			to++
		}
		v, failing, err := ev.runInstance(ctx, capb, img, c, from, to, vol)
		if err != nil || !v.Pass || to == len(c.Requests) {
			return v, failing, err
		}
		from = to + 1
	}
}

// runInstance runs one instance of a service case's service in a fresh sandbox: the
// entrypoint is started with no network but its own loopback (and vol mounted, when set),
// the evaluator waits until it is ready (its ready path answers 2xx, or its port accepts a
// connection), then sends requests [from, to) of the case in order from inside the
// sandbox's network namespace and judges each response. The first failing request
// decides; the instance is then stopped.
func (ev *Evaluator) runInstance(ctx context.Context, capb *lang.Capability, img executors.Image, c *verdict.Case, from, to int, vol *volume) (verdict.Verdict, string, error) {
	// The service's own output only explains a failure.
	stdout := capped.NewBuffer(64 << 10)
	stderr := capped.NewBuffer(64 << 10)
	addr := fmt.Sprintf("127.0.0.1:%d", capb.Interface.Port)
	run := &serviceRun{next: from}
	a := executors.Action{Stdout: stdout, Stderr: stderr,
		Attach: func(ctx context.Context, dial executors.Dialer) {
			drive(ctx, capb, c.Requests[:to], from, addr, dial, run)
		}}
	if vol != nil {
		a.Mounts = []executors.Mount{{Source: vol.source, Target: vol.target, Writable: true}}
	}
	xr, err := ev.runCandidate(ctx, capb, img, a)
	if errors.Is(err, executors.ErrNotStarted) {
		return notStarted(err, nil), "(startup)", nil
	}
	if err != nil {
		return verdict.Verdict{}, "", fmt.Errorf("running case %s: %w", c.Name, err)
	}
	failing := ""
	if run.next < to {
		failing = fmt.Sprintf("request %d of %d: %s", run.next+1, len(c.Requests), c.Requests[run.next].Describe())
	}
	if run.judged {
		return run.verdict, failing, nil
	}
	// No response decided the case: the candidate ended (or never became ready) first.
	stage, want := "before it was ready", "ready on "+addr
	if from > 0 {
		stage += fmt.Sprintf(" again after the restart at request %d of %d", from, len(c.Requests))
	}
	if run.ready {
		stage, want = "while answering "+failing, "an answer to "+failing
	}
	how, tail := ended(xr, stdout, stderr)
	v := verdict.Verdict{Expected: want, Got: how}
	switch {
	case xr.TimedOut:
		v.Reason = "timed out " + stage
	case xr.OOMKilled:
		v.Reason = "killed for exceeding its memory limit " + stage
	default:
		v.Reason = "exited " + stage
		if tail != "" {
			v.Got += "; output " + tail
		}
	}
	if failing == "" {
		failing = "(startup)"
	}
	return v, failing, nil
}

// ended says how a service's sandbox run ended before it had answered: killed at the
// deadline, out of memory or by a signal, or its exit code; and the last lines of its
// output, quoted and abbreviated ("" when it wrote none).
func ended(xr *executors.Result, stdout, stderr *capped.Buffer) (how, tail string) {
	switch {
	case xr.TimedOut:
		how = fmt.Sprintf("killed at the %v deadline", evalTimeout)
	case xr.OOMKilled:
		how = "killed: out of memory"
	case xr.Signal != "":
		how = "killed by " + xr.Signal
	default:
		how = fmt.Sprintf("exit %d", xr.ExitCode)
	}
	if t := strings.TrimSpace(strings.Join(capped.TailLines(append(stdout.B.Bytes(), stderr.B.Bytes()...), 3), "\n")); t != "" {
		tail = abbreviate(fmt.Sprintf("%q", t), 200)
	}
	return how, tail
}

// drive waits for the service to be ready and sends requests[from:] (none of them a
// restart), recording what it saw in run. It returns when a response fails, every request
// has passed, or ctx ends (the candidate exited or hit its deadline).
func drive(ctx context.Context, capb *lang.Capability, requests []verdict.Request, from int, addr string, dial executors.Dialer, run *serviceRun) {
	client := &http.Client{
		Transport: &http.Transport{
			DialContext:            dial,
			Proxy:                  nil, // never the host's proxy: the service is in the sandbox
			DisableKeepAlives:      true,
			DisableCompression:     true, // the body is judged as sent
			MaxResponseHeaderBytes: 1 << 20,
		},
		// A redirect is an answer to judge, not an instruction to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	it := capb.Interface
	for !ready(ctx, client, dial, addr, it.Ready) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(readyPoll):
		}
	}
	run.ready = true
	for i := from; i < len(requests); i++ {
		run.next = i
		req := &requests[i]
		resp, err := send(ctx, client, addr, req)
		if err != nil {
			if ctx.Err() != nil {
				return // the candidate ended: the caller reports how
			}
			run.verdict = verdict.Verdict{Reason: "no HTTP response: " + abbreviate(err.Error(), 200),
				Expected: req.Expect.Text(), Got: "connection error"}
			run.judged = true
			return
		}
		if run.record != nil {
			*run.record = append(*run.record, resp)
			continue
		}
		if v := verdict.JudgeResponse(capb, req, resp); !v.Pass {
			if req.Want != nil {
				v.Reason = fmt.Sprintf("the trace diverges from the reference's at request %d of %d: %s", i+1, len(requests), v.Reason)
			}
			run.verdict, run.judged = v, true
			return
		}
	}
	run.next = len(requests)
	run.verdict, run.judged = verdict.Verdict{Pass: true}, true
}

// ready probes the service once: its ready path answers 2xx, or (without one) its port
// accepts a connection.
func ready(ctx context.Context, client *http.Client, dial executors.Dialer, addr, path string) bool {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if path == "" {
		conn, err := dial(pctx, "tcp", addr)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode <= 299
}

// send sends one request and reads its response, the body bounded by the output limit.
func send(ctx context.Context, client *http.Client, addr string, r *verdict.Request) (verdict.Response, error) {
	var body io.Reader
	if r.Input != nil {
		body = bytes.NewReader(r.Input)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+r.Path, body)
	if err != nil {
		return verdict.Response{}, err
	}
	if r.Input != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return verdict.Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, evalOutputBytes+1))
	if err != nil {
		return verdict.Response{}, fmt.Errorf("reading the response body: %w", err)
	}
	out := verdict.Response{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: b}
	if len(b) > evalOutputBytes {
		out.Body, out.Truncated = b[:evalOutputBytes], true
	}
	return out, nil
}
