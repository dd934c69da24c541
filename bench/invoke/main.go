// Command invoke measures a call of an admitted capability through Foundry's two tool
// surfaces against a direct sandboxed run of the same files (issue 20's goal: a tools/call
// of int-sort, and the same call over HTTP, each ≤ 1.2 × a direct sandboxed run of the
// capability's CLI).
//
// It applies a fresh copy of examples/int-sort once (no state: the capability is built,
// evaluated and admitted), starts one long-lived `foundry mcp` (a go-sdk client on its
// stdin and stdout) and one long-lived `foundry serve` on loopback, and then, -rounds
// times, interleaved and in a rotating order, makes the same call three ways, with the
// same input (-n integers):
//
//   - direct: the admitted files' entrypoint run once by the executor the calls use
//     (executors/runc or executors/containerd, opened as foundry opens it), with the input
//     on stdin, in the image the calls run in (the tree alone, as the seed store holds it
//     once a call has built it), with the sandbox a call gets (its own /out, workdir /, no
//     network, 512 MiB, 1 CPU, 256 pids, 60 s: spec/interfaces.md §2 step 5) and nothing
//     of Foundry's call path: no validation, no pull, no transport;
//   - MCP: a tools/call of cap_int-sort, timed by the client from request to result;
//   - MCP over HTTP: the same tools/call to a long-lived `foundry mcp -http` on loopback
//     with authorization, a go-sdk Streamable HTTP client sending a bearer token (issue 35);
//   - HTTP: a POST /capabilities/int-sort, timed by the client from request to body.
//
// Each answer is checked against the sorted input. It prints the median and p90 of each,
// and the ratios of the medians to direct's beside the goal. To say where a call's extra
// time goes it also prints the time serve logs for each call in its handler
// (invoke.Invoker.Call and the answer: the rest is the HTTP round trip), and the time of
// what a call checks that a direct run does not, measured in this process after the
// rounds: the input and the output decoded strictly and validated against the contract's
// schemas. With FOUNDRY_EXEC_TRACE=1 in the environment, every executor run (the bench's
// and the servers') prints its phases on stderr.
//
// Run with `make bench` (it builds bin/foundry first). Nothing here passes or fails on a
// time.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/foundry-build/foundry/bench/benchutil"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/containerd"
	"github.com/foundry-build/foundry/executors/runc"
	"github.com/foundry-build/foundry/registry"
)

var (
	bin      = flag.String("foundry", "bin/foundry", "the foundry binary to measure")
	executor = flag.String("executor", "runc", "executor of the apply, the calls and the direct runs: runc or containerd")
	rounds   = flag.Int("rounds", 20, "rounds; each makes one call of each kind")
	count    = flag.Int("n", 1000, "integers in the input")
	example  = flag.String("example", "examples/int-sort", "the project to copy and apply")
	warmups  = flag.Int("warmup", 3, "calls of each kind before the measured rounds (the first pulls the version and builds its image)")
)

// goal is issue 20's: each surface's call within this factor of a direct sandboxed run.
const goal = 1.2

// The evaluation sandbox's limits, which every call runs under (engine/evaluate's Sandbox;
// spec/interfaces.md §2 step 5).
var callLimits = executors.Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 256, Timeout: 60 * time.Second}

func main() {
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	must(err)
	*bin = abs
	if *executor != "runc" && *executor != "containerd" {
		must(fmt.Errorf("-executor %s: want runc or containerd", *executor))
	}
	must(run())
}

// contender is one way of making the call; call makes one and returns its time as its
// client sees it.
type contender struct {
	name string
	call func() (time.Duration, error)
	d    []time.Duration
}

func run() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "foundry-invokebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := benchutil.CopyProject(*example, dir); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "applying a fresh copy of %s (-executor %s)\n", *example, *executor)
	t0 := time.Now()
	if out, err := foundry(dir, "apply", "-auto-approve", "-progress", "plain", "-executor", *executor); err != nil {
		return fmt.Errorf("apply: %v\n%s", err, benchutil.Tail(string(out)))
	}
	fmt.Fprintf(os.Stderr, "applied in %s\n", time.Since(t0).Round(time.Second))

	input, want := intSortInput(*count)

	mcpCall, stopMCP, err := startMCP(ctx, dir, input, want)
	if err != nil {
		return err
	}
	defer stopMCP()
	mcpHTTPCall, stopMCPHTTP, err := startMCPHTTP(ctx, dir, input, want)
	if err != nil {
		return err
	}
	defer stopMCPHTTP()
	httpCall, handlerTimes, stopServe, err := startServe(dir, input, want)
	if err != nil {
		return err
	}
	defer stopServe()
	contenders := []*contender{{name: "MCP tools/call (foundry mcp, stdio)", call: mcpCall},
		{name: "MCP tools/call over HTTP (foundry mcp -http, bearer token)", call: mcpHTTPCall},
		{name: "HTTP POST (foundry serve, loopback)", call: httpCall}}
	// The servers' first calls pull the admitted version and build its image, which the
	// direct runs then find in the seed store.
	for _, c := range contenders {
		for range *warmups {
			if _, err := c.call(); err != nil {
				return fmt.Errorf("%s warm-up: %w", c.name, err)
			}
		}
	}
	adm, err := admitted(ctx, dir)
	if err != nil {
		return err
	}
	directCall, closeDirect, err := direct(ctx, dir, adm, input, want)
	if err != nil {
		return err
	}
	defer closeDirect()
	base := &contender{name: "direct sandboxed run (executors/" + *executor + ")", call: directCall}
	for range *warmups {
		if _, err := base.call(); err != nil {
			return fmt.Errorf("direct warm-up: %w", err)
		}
	}
	contenders = append([]*contender{base}, contenders...)
	handlerTimes() // drop the warm-ups' times

	// Calls alternate between the contenders one by one, in a rotating order, so that
	// load from other work on the machine hits all of them alike.
	for r := range *rounds {
		for i := range contenders {
			c := contenders[(i+r)%len(contenders)]
			d, err := c.call()
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", c.name, r+1, err)
			}
			c.d = append(c.d, d)
		}
	}
	handler := handlerTimes()
	validation, err := validationTimes(adm, input, want)
	if err != nil {
		return err
	}

	fmt.Printf("a call of int-sort on %d integers, -executor %s, %d rounds interleaved (ms):\n", *count, *executor, *rounds)
	fmt.Printf("  %-60s %8s %8s\n", "", "median", "p90")
	for _, c := range contenders {
		fmt.Printf("  %-60s %8.1f %8.1f\n", c.name, ms(quantile(c.d, 0.5)), ms(quantile(c.d, 0.9)))
	}
	if len(handler) > 0 {
		fmt.Printf("  %-60s %8.1f %8.1f\n", "  of which in serve's handler (its log, ms)", ms(quantile(handler, 0.5)), ms(quantile(handler, 0.9)))
	}
	fmt.Printf("  %-60s %8.1f %8.1f\n", "a call's input+output validation, in-process", ms(quantile(validation, 0.5)), ms(quantile(validation, 0.9)))
	baseMed := quantile(base.d, 0.5)
	for _, c := range contenders[1:] {
		r := float64(quantile(c.d, 0.5)) / float64(baseMed)
		fmt.Printf("%s / direct: %.2fx (goal <= %.1fx: %s)\n", strings.SplitN(c.name, " (", 2)[0], r, goal, met(r <= goal))
	}
	return nil
}

// intSortInput is the integers -n/2 … n-n/2-1 in a fixed scrambled order, as JSON, and the
// same sorted.
func intSortInput(n int) (input, sorted []byte) {
	in, out := make([]string, n), make([]string, n)
	for i, p := range rand.New(rand.NewPCG(20, 1)).Perm(n) {
		in[i] = strconv.Itoa(p - n/2)
		out[i] = strconv.Itoa(i - n/2)
	}
	return []byte("[" + strings.Join(in, ",") + "]"), []byte("[" + strings.Join(out, ",") + "]")
}

// startMCP starts `foundry mcp -C dir` and connects a go-sdk client to it over stdio; the
// call is one tools/call of cap_int-sort with input, whose result must be want, wrapped.
func startMCP(ctx context.Context, dir string, input, want []byte) (func() (time.Duration, error), func(), error) {
	cmd := exec.Command(*bin, "mcp", "-C", dir, "-executor", *executor)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if tracing() {
		cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "foundry-bench-invoke", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("foundry mcp: %v\n%s", err, stderr.String())
	}
	return mcpCaller(ctx, cs, input, want), func() { cs.Close() }, nil
}

// mcpCaller is one tools/call of cap_int-sort on cs with input, whose result must be want,
// wrapped.
func mcpCaller(ctx context.Context, cs *mcp.ClientSession, input, want []byte) func() (time.Duration, error) {
	wantText := `{"output":` + string(want) + `}`
	args := map[string]any{"input": json.RawMessage(input)}
	call := func() (time.Duration, error) {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cap_int-sort", Arguments: args})
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		var text string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				text += t.Text
			}
		}
		if res.IsError || text != wantText {
			return 0, fmt.Errorf("isError %v: %.300s", res.IsError, text)
		}
		return d, nil
	}
	return call
}

// startMCPHTTP starts `foundry mcp -C dir -http` on a free loopback port with
// authorization (an operator key made for the bench, a token for call:int-sort minted by
// foundry mcp token) and connects a go-sdk client to it over Streamable HTTP with the
// token: what a remote host pays per call, the bearer check included.
func startMCPHTTP(ctx context.Context, dir string, input, want []byte) (func() (time.Duration, error), func(), error) {
	keys, err := os.MkdirTemp("", "foundry-invokebench-keys-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(keys)
	key := filepath.Join(keys, "ops")
	if out, err := foundry(dir, "keygen", "-out", key); err != nil {
		return nil, nil, fmt.Errorf("keygen: %v\n%s", err, out)
	}
	cmd := exec.Command(*bin, "mcp", "-C", dir, "-executor", *executor, "-http", "127.0.0.1:0", "-token-issuer", "bench="+key+".pub")
	url, stop, err := startListening(cmd, "foundry mcp -http", nil)
	if err != nil {
		return nil, nil, err
	}
	tok, err := foundry(dir, "mcp", "token", "-key", key+".key", "-issuer", "bench", "-audience", url, "-scope", "call:int-sort", "-expires", "24h")
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("mcp token: %v\n%s", err, tok)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "foundry-bench-invoke", Version: "1"}, nil)
	hc := &http.Client{Transport: bearer{strings.TrimSpace(string(tok))}}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("foundry mcp -http: connecting to %s: %v", url, err)
	}
	return mcpCaller(ctx, cs, input, want), func() { cs.Close(); stop() }, nil
}

// bearer sends a bearer token with every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// startServe starts `foundry serve -C dir` on a free loopback port; the call is one POST of
// input, whose body must be want. handlerTimes returns the times serve logged for the
// calls since it was last called.
func startServe(dir string, input, want []byte) (call func() (time.Duration, error), handlerTimes func() []time.Duration, stop func(), err error) {
	cmd := exec.Command(*bin, "serve", "-C", dir, "-addr", "127.0.0.1:0", "-executor", *executor)
	logged := make(chan time.Duration, 1024)
	callLog := regexp.MustCompile(`POST /capabilities/int-sort 200 (\S+)$`)
	base, stop, err := startListening(cmd, "foundry serve", func(line string) bool {
		m := callLog.FindStringSubmatch(line)
		if m == nil {
			return false
		}
		if d, err := time.ParseDuration(m[1]); err == nil {
			logged <- d
		}
		return true
	})
	if err != nil {
		return nil, nil, nil, err
	}
	url := base + "/capabilities/int-sort"
	wantBody := string(want) + "\n"
	client := &http.Client{} // one client, its connection kept alive, as a real one would
	call = func() (time.Duration, error) {
		t0 := time.Now()
		resp, err := client.Post(url, "application/json", bytes.NewReader(input))
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 || string(body) != wantBody {
			return 0, fmt.Errorf("%d: %.300s", resp.StatusCode, body)
		}
		return d, nil
	}
	handlerTimes = func() []time.Duration {
		// serve logs a call after writing its answer, so it may arrive just after the
		// client has the body.
		var ds []time.Duration
		deadline := time.After(time.Second)
		for {
			select {
			case d := <-logged:
				ds = append(ds, d)
				continue
			case <-deadline:
			}
			return ds
		}
	}
	return call, handlerTimes, stop, nil
}

// direct prepares the baseline: the executor the calls use, and the image they run in,
// found as the calls find it (the admitted version's tree alone, keyed in the project's
// seed store); the call is one run of the contract's entrypoint with input on stdin.
func direct(ctx context.Context, dir string, adm *admittedVersion, input, want []byte) (func() (time.Duration, error), func(), error) {
	ws, err := workspace.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	img, err := evaluate.CandidateImage(ctx, ws, adm.name, adm.target, adm.tree, executors.Image{})
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	var exe executors.Executor
	switch *executor {
	case "runc":
		exe, err = runc.New(runc.Options{})
	case "containerd":
		addr := os.Getenv("FOUNDRY_CONTAINERD_ADDRESS")
		if addr == "" {
			addr = containerd.DefaultAddress
		}
		exe, err = containerd.New(ctx, containerd.Options{Address: addr})
	}
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	scratch, err := os.MkdirTemp("", "foundry-invokebench-direct-")
	if err != nil {
		exe.Close()
		ws.Close()
		return nil, nil, err
	}
	prefix := "foundry-bench-invoke-" + randHex(4) + "-"
	stdin := append(append([]byte{}, input...), '\n') // as a call feeds it
	seq := 0
	call := func() (time.Duration, error) {
		seq++
		t0 := time.Now()
		out := filepath.Join(scratch, fmt.Sprint(seq))
		if err := os.Mkdir(out, 0o777); err != nil {
			return 0, err
		}
		os.Chmod(out, 0o777)
		var stdout, stderr bytes.Buffer
		res, err := exe.Run(ctx, &executors.Action{
			ID: prefix + strconv.Itoa(seq), Image: img, Argv: adm.entrypoint, Env: img.Env, Workdir: "/", OutDir: out,
			Network: executors.NetworkNone, Limits: callLimits,
			Stdin: bytes.NewReader(stdin), Stdout: &stdout, Stderr: &stderr,
		})
		os.RemoveAll(out)
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if res.ExitCode != 0 || !bytes.Equal(bytes.TrimSpace(stdout.Bytes()), want) {
			return 0, fmt.Errorf("exit %d: %.300s %.300s", res.ExitCode, stdout.Bytes(), stderr.Bytes())
		}
		return d, nil
	}
	return call, func() { exe.Close(); ws.Close(); os.RemoveAll(scratch) }, nil
}

// admittedVersion is what the baseline needs of the admitted version: the contract's name,
// target, entrypoint and schemas (as stored), and the tree.
type admittedVersion struct {
	name, target  string
	entrypoint    []string
	input, output string
	tree          digest.Digest
}

// validationTimes times, -rounds times, what a call checks of its input and its output
// (engine/invoke: strict JSON, then the contract's schema; numbers as json.Number).
func validationTimes(adm *admittedVersion, input, output []byte) ([]time.Duration, error) {
	var ds []time.Duration
	for range *rounds {
		t0 := time.Now()
		for _, c := range []struct {
			schema string
			value  []byte
		}{{adm.input, input}, {adm.output, output}} {
			v, err := verdict.DecodeJSON(c.value)
			if err == nil {
				err = verdict.Validate(c.schema, v)
			}
			if err != nil {
				return nil, err
			}
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

// admitted reads the admitted version of the project's one capability: its manifest and
// tree from `foundry capabilities -json`, its contract from the registry's config blob.
func admitted(ctx context.Context, dir string) (*admittedVersion, error) {
	out, err := foundry(dir, "capabilities", "-json")
	if err != nil {
		return nil, fmt.Errorf("foundry capabilities: %v\n%s", err, out)
	}
	var rows []struct {
		Registry struct{ Manifest, Tree digest.Digest }
	}
	if err := json.Unmarshal(out, &rows); err != nil || len(rows) != 1 || rows[0].Registry.Manifest == "" {
		return nil, fmt.Errorf("foundry capabilities -json: %v: %s", err, out)
	}
	l, err := registry.OpenLayout(filepath.Join(dir, ".foundry", "registry"))
	if err != nil {
		return nil, err
	}
	raw, _, err := l.Manifest(ctx, rows[0].Registry.Manifest)
	if err != nil {
		return nil, err
	}
	m, err := registry.ParseCapability(raw)
	if err != nil {
		return nil, err
	}
	blob, err := l.Blob(ctx, digest.Digest(m.Config.Digest))
	if err != nil {
		return nil, err
	}
	defer blob.Close()
	var contract struct {
		Name, Target string
		Interface    struct {
			Entrypoint    []string
			Input, Output string
		}
	}
	if err := json.NewDecoder(blob).Decode(&contract); err != nil {
		return nil, err
	}
	if len(contract.Interface.Entrypoint) == 0 {
		return nil, errors.New("the admitted contract declares no entrypoint")
	}
	return &admittedVersion{name: contract.Name, target: contract.Target, entrypoint: contract.Interface.Entrypoint,
		input: contract.Interface.Input, output: contract.Interface.Output, tree: rows[0].Registry.Tree}, nil
}

func tracing() bool { return os.Getenv("FOUNDRY_EXEC_TRACE") != "" }

// quantile is the q-quantile of ds by the nearest-rank method (q 0.5: the median, the
// upper one of an even count).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if q == 0.5 {
		i = len(s) / 2
	}
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// foundry runs the binary in dir and returns its standard output, or its combined output
// on failure.
func foundry(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command(*bin, args...)
	cmd.Dir = dir
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	if err != nil {
		return append(out, errBuf.Bytes()...), err
	}
	return out, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/invoke:", err)
		os.Exit(1)
	}
}

// startListening starts cmd, a foundry server on 127.0.0.1:0 in a process group of its own,
// and waits up to 2 minutes for it to log "listening on URL". Each line it writes to stderr
// goes first to onLine (if any), which says whether it took the line; the others are kept, up
// to 64 KiB, for the error when the server never listens. stop ends the server (SIGTERM, then
// SIGKILL of its group after 30s).
func startListening(cmd *exec.Cmd, name string, onLine func(line string) bool) (url string, stop func(), err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	listening := make(chan string, 1)
	done := make(chan struct{})
	var log strings.Builder
	go func() {
		defer close(done)
		listen := regexp.MustCompile(`listening on (http://\S+)`)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			if tracing() {
				fmt.Fprintln(os.Stderr, line)
			}
			if onLine != nil && onLine(line) {
				continue
			}
			if log.Len() < 64<<10 {
				log.WriteString(line + "\n")
			}
			if m := listen.FindStringSubmatch(line); m != nil {
				listening <- m[1]
			}
		}
	}()
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		cmd.Wait()
	}
	select {
	case url = <-listening:
		return url, stop, nil
	case <-done:
		cmd.Wait()
		return "", nil, fmt.Errorf("%s exited before listening:\n%s", name, log.String())
	case <-time.After(2 * time.Minute):
		stop()
		return "", nil, fmt.Errorf("%s did not listen within 2 minutes:\n%s", name, log.String())
	}
}
