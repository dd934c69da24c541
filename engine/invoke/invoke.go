package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// Capability is an admitted capability of the project's inventory, as tools show it.
type Capability struct {
	Name     string        // "int-sort"
	Address  string        // "capability.int-sort"
	Summary  string        // the contract's summary (documentation: not in the digest)
	Contract digest.Digest // the contract digest
	Ref      string        // the admitted version's registry reference, pinned by digest
	Tree     digest.Digest // its files, recomputed from its layers when it was judged
	Kind     string        // the interface: "cli" (Call runs it) or "service" (not yet)
	// InputSchema and OutputSchema are the contract's schemas as written, insignificant
	// whitespace removed (lang.CompileSchema): the bytes the contract digest covers. Nil
	// when the contract has none (any JSON value).
	InputSchema, OutputSchema json.RawMessage
	Errors                    map[string]int // declared error name → exit code
}

// Inventory returns the capabilities of graph g that have an admitted version in registry
// reg verifying with keys, sorted by name: each judged by admit.Lookup, as a plan pins it
// (the contract's tag resolved once; the contract, the tree recomputed from the layers and
// a signed verification summary binding them; nothing quarantined in ws's state). A
// capability without one is left out. reg nil (no registry yet) has none.
//
// The plan also asks whether the version passed the current sealed suite, to rebuild it if
// not; a version admitted on an earlier suite is still admitted for its contract, and is
// listed.
func Inventory(ctx context.Context, ws *workspace.Workspace, g *graph.Graph, reg registry.Store, keys []*provenance.Verifier) ([]Capability, error) {
	if reg == nil {
		return nil, nil
	}
	var out []Capability
	for _, a := range g.Order {
		n := g.Nodes[a]
		if n.Kind != graph.KindCapability || n.Capability.Interface == nil {
			continue
		}
		adm, _, err := admit.Lookup(ctx, reg, keys, ws.State, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
		if adm == nil {
			continue
		}
		it := n.Capability.Interface
		out = append(out, Capability{
			Name: n.Capability.Name, Address: n.Address, Summary: n.Capability.Summary,
			Contract: n.Digest, Ref: adm.Ref, Tree: adm.Tree, Kind: it.Kind,
			InputSchema: raw(it.InputSchema), OutputSchema: raw(it.OutputSchema), Errors: maps.Clone(it.Errors),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func raw(schema string) json.RawMessage {
	if schema == "" {
		return nil
	}
	return json.RawMessage(schema)
}

// ErrUnsupported marks a call Foundry cannot make yet (a service capability).
var ErrUnsupported = errors.New("not supported yet")

// InputError is a call's input that is not JSON or violates the input schema: nothing ran.
type InputError struct {
	Reason   string
	TooLarge bool // more than MaxInputValues values: refused before it was decoded
}

func (e *InputError) Error() string { return e.Reason }

// OutputError is a run that broke the contract: it printed no JSON or JSON that violates
// the output schema, exited with a code the contract does not declare, or was killed (the
// deadline, the memory limit, more output than the limit).
type OutputError struct{ Reason string }

func (e *OutputError) Error() string { return e.Reason }

// Result is one call's outcome under the contract: an output (exit 0, schema-valid), or a
// declared error.
type Result struct {
	Output   json.RawMessage // the output as printed, insignificant whitespace removed; nil on an error
	ExitCode int
	Error    string // the declared error's name when ExitCode is one; "" on success
	Stderr   string // the last StderrTail bytes of what it wrote on stderr
}

// StderrTail is how much of a run's stderr a Result keeps (its end).
const StderrTail = 4 << 10

// An Invoker calls admitted capabilities of one project. It is safe for concurrent use;
// each admitted version is pulled and its image built once, on its first call.
type Invoker struct {
	Workspace *workspace.Workspace
	// Registry is where the versions named by Capability.Ref are pulled from; Keys are the
	// trusted keys their evidence must verify with.
	Registry registry.Store
	Keys     []*provenance.Verifier
	// Executor returns the executor the sandboxes run on, opened on first use.
	Executor func(ctx context.Context) (executors.Executor, error)
	// Scratch is a directory of the caller's where pulls are unpacked and each sandbox gets
	// its own /out. It must not be under the workspace's runs/, which an apply sweeps.
	Scratch string

	mu       sync.Mutex
	versions map[string]*version // by contract and manifest digest
	prefix   string
}

// version is an admitted version ready to run, or being readied.
type version struct {
	done chan struct{} // closed once ready or failed
	err  error

	entrypoint []string
	image      executors.Image
	// watched are the digests whose quarantine refuses a call: the manifest, the
	// contract, the tree and every layer.
	watched []digest.Digest
}

// Call runs capability c once in a fresh sandbox through its declared interface (cli: the
// input on stdin, the output on stdout, no network, the evaluation limits) and returns its
// result. The input is checked first (CheckInput): not JSON, too many values, or in
// violation of c.InputSchema, is an *InputError and nothing runs. Then the version c.Ref
// names is pulled (on the first call) and must be admitted for c.Contract, whose interface
// must be c's; a quarantined digest is refused (*registry.QuarantinedError). After the
// run, an exit with a declared error code is a Result with Error set, not a Go error; exit
// 0 must print JSON valid under c.OutputSchema, and anything else is an *OutputError.
// Other errors are failures to run it at all (registry, sandbox, executor).
func (iv *Invoker) Call(ctx context.Context, c Capability, input json.RawMessage) (*Result, error) {
	in, err := CheckInput(c, input)
	if err != nil {
		return nil, err
	}
	return iv.Run(ctx, c, in)
}

// Run is Call on an input CheckInput accepted for c: for a caller that checks inputs under
// a budget of its own before it runs them.
func (iv *Invoker) Run(ctx context.Context, c Capability, in Input) (*Result, error) {
	if c.Kind != "cli" {
		return nil, fmt.Errorf("%s is a %s capability: calling one is %w (only cli capabilities can be called)", c.Address, c.Kind, ErrUnsupported)
	}
	if in.stdin == nil {
		return nil, errors.New("invoke: Run of an input CheckInput did not accept")
	}
	exe, err := iv.Executor(ctx)
	if err != nil {
		return nil, err
	}
	if err := Sandboxed(exe); err != nil {
		return nil, err
	}
	v, err := iv.version(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := iv.refuseQuarantined(ctx, v); err != nil {
		return nil, err
	}
	sb := evaluate.Sandbox{
		Executor:        func(context.Context, string) (executors.Executor, error) { return exe, nil },
		Scratch:         iv.Scratch,
		ContainerPrefix: iv.containerPrefix(),
	}
	o, err := sb.RunCLI(ctx, "a call of "+c.Address, v.entrypoint, v.image, in.stdin)
	if errors.Is(err, executors.ErrNotStarted) {
		return nil, fmt.Errorf("calling %s: its entrypoint %s could not be started on the image it was admitted on: %w",
			c.Address, v.entrypoint[0], err)
	}
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", c.Address, err)
	}
	return judge(c, o)
}

// ErrUnsandboxed is why a call is refused on an executor with no isolation: a call is a
// capability run on behalf of a client (an MCP host, an HTTP caller), and runs only in a
// sandbox, whatever the operator allows for applies.
var ErrUnsandboxed = errors.New("capability calls run only in a sandbox, and the local executor has none: use -executor containerd or runc")

// Sandboxed refuses an executor that would run calls as plain host processes.
func Sandboxed(exe executors.Executor) error {
	if exe.Isolation() == executors.IsolationNone {
		return ErrUnsandboxed
	}
	return nil
}

// judge reads one run's observation under contract c: the rules of a case's judgment
// (spec/capability-cases.md §4) without an expectation.
func judge(c Capability, o verdict.Observation) (*Result, error) {
	res := &Result{ExitCode: o.ExitCode, Stderr: tail(o.Stderr, StderrTail)}
	switch {
	case o.TimedOut:
		return nil, &OutputError{Reason: "it was killed at the deadline" + stderrNote(res)}
	case o.OOMKilled:
		return nil, &OutputError{Reason: "it was killed for exceeding its memory limit" + stderrNote(res)}
	case o.StdoutTruncated:
		return nil, &OutputError{Reason: "it printed more than the output limit"}
	case o.ExitCode != 0:
		names := []string{}
		for n, code := range c.Errors {
			if code == o.ExitCode {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return nil, &OutputError{Reason: fmt.Sprintf("it exited with %d, which is not a declared error code", o.ExitCode) + stderrNote(res)}
		}
		slices.Sort(names)
		res.Error = names[0]
		return res, nil
	}
	if err := check(c.OutputSchema, o.Stdout, "output"); err != nil {
		return nil, &OutputError{Reason: err.Error()}
	}
	var out bytes.Buffer
	json.Compact(&out, o.Stdout) // valid: checked above
	res.Output = out.Bytes()
	return res, nil
}

func stderrNote(r *Result) string {
	if s := strings.TrimSpace(r.Stderr); s != "" {
		return "; stderr: " + tail([]byte(s), 200)
	}
	return ""
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// containerPrefix starts the container ID of every sandbox of this Invoker: its own, so
// that it never names an apply's run (whose leftovers the next apply removes by prefix).
func (iv *Invoker) containerPrefix() string {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.prefix == "" {
		iv.prefix = "foundry-invoke-" + workspace.NewID()[:8] + "-"
	}
	return iv.prefix
}

// version returns c's admitted version ready to run, pulling it and building its image on
// the first call. A failure is not kept: the next call tries again.
func (iv *Invoker) version(ctx context.Context, c Capability) (*version, error) {
	_, m, err := registry.SplitReference(c.Ref)
	if err != nil || !strings.HasPrefix(m, "sha256:") {
		return nil, fmt.Errorf("%s: its reference %q is not pinned by digest", c.Address, c.Ref)
	}
	key := string(c.Contract) + " " + m
	iv.mu.Lock()
	if iv.versions == nil {
		iv.versions = map[string]*version{}
	}
	v := iv.versions[key]
	if v == nil {
		v = &version{done: make(chan struct{})}
		iv.versions[key] = v
		go func() {
			// Readied under its own context: a call that gives up does not fail the others
			// waiting for the same version.
			v.err = iv.ready(context.WithoutCancel(ctx), c, digest.Digest(m), v)
			if v.err != nil {
				iv.mu.Lock()
				delete(iv.versions, key)
				iv.mu.Unlock()
			}
			close(v.done)
		}()
	}
	iv.mu.Unlock()
	select {
	case <-v.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if v.err != nil {
		return nil, v.err
	}
	return v, nil
}

// ready pulls manifest m, the version of c's contract c.Ref names, with a pin's checks,
// checks that the contract it holds declares c's interface, and finds the image its calls
// run in: the one its admission binds (provenance.AnnotationImage), on which the sealed
// suite passed — its files on its recipe's base image — taken from the workspace's seed
// store by that digest. What was evaluated is what is called: a version whose admission
// binds no image, or whose image this workspace does not hold, is not called.
func (iv *Invoker) ready(ctx context.Context, c Capability, m digest.Digest, v *version) error {
	if iv.Registry == nil {
		return fmt.Errorf("%s: no registry to pull it from", c.Address)
	}
	if addr, _, _ := registry.SplitReference(c.Ref); addr != iv.Registry.String() {
		return fmt.Errorf("%s: %s is not in the registry %s", c.Address, c.Ref, iv.Registry)
	}
	if iv.Scratch == "" {
		return errors.New("the invoker has no scratch directory")
	}
	if err := os.MkdirAll(iv.Scratch, 0o755); err != nil {
		return err
	}
	tree, pulled, err := admit.PullPinned(ctx, iv.Workspace, iv.Registry, iv.Keys, iv.Scratch, c.Contract, &admit.Admitted{Digest: m, Tree: c.Tree})
	if err != nil {
		return fmt.Errorf("%s: pulling %s: %w", c.Address, c.Ref, err)
	}
	it, _, err := contractInterface(pulled.ContractJSON)
	if err != nil {
		return fmt.Errorf("%s: the contract of %s: %w", c.Address, c.Ref, err)
	}
	if it.Kind != c.Kind || !maps.Equal(it.Errors, c.Errors) || it.Input != string(c.InputSchema) || it.Output != string(c.OutputSchema) {
		return fmt.Errorf("%s: its interface (kind, errors, schemas) is not the one contract %s declares", c.Address, c.Contract)
	}
	if len(it.Entrypoint) == 0 {
		return fmt.Errorf("%s: contract %s declares no entrypoint", c.Address, c.Contract)
	}
	bound, ok := pulled.Report.AdmittedImage()
	switch {
	case !ok:
		return fmt.Errorf("%s: the admissions of %s bind different images; it is not called", c.Address, c.Ref)
	case bound == "":
		return fmt.Errorf("%s: the admission of %s binds no image its sealed suite ran on (admitted by an older Foundry), so a call could not run on what was evaluated; admit it again with 'foundry apply -replace %s'", c.Address, c.Ref, c.Address)
	}
	img, err := iv.Workspace.Seeds.Image(ctx, bound)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %s was admitted on image %s (its files on its base image), which this workspace does not hold; run 'foundry apply' here to evaluate it, so that calls run on the image that was evaluated", c.Address, c.Ref, bound)
	}
	if err != nil {
		return fmt.Errorf("%s: the image of %s: %w", c.Address, c.Ref, err)
	}
	raw, _, err := iv.Registry.Manifest(ctx, m)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Address, err)
	}
	man, err := registry.ParseCapability(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Address, err)
	}
	v.entrypoint, v.image = it.Entrypoint, img
	v.watched = []digest.Digest{m, c.Contract, tree, digest.Digest(bound)}
	for _, l := range man.Layers {
		v.watched = append(v.watched, digest.Digest(l.Digest))
	}
	return nil
}

// refuseQuarantined refuses a version once any digest it is made of is quarantined.
func (iv *Invoker) refuseQuarantined(ctx context.Context, v *version) error {
	q, err := iv.Workspace.State.QuarantinedAmong(ctx, v.watched)
	if err != nil {
		return err
	}
	for _, d := range v.watched {
		if reason, ok := q[d]; ok {
			return &registry.QuarantinedError{Digest: d, Reason: reason}
		}
	}
	return nil
}

// contractInterface reads the interface and target of a contract's canonical JSON
// (spec/capability.md §2).
func contractInterface(b []byte) (*contractIface, string, error) {
	var doc struct {
		Kind      string         `json:"kind"`
		Target    string         `json:"target"`
		Interface *contractIface `json:"interface"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, "", err
	}
	if doc.Kind != "capability" || doc.Interface == nil {
		return nil, "", errors.New("not a capability contract with an interface")
	}
	if doc.Interface.Errors == nil {
		doc.Interface.Errors = map[string]int{}
	}
	return doc.Interface, doc.Target, nil
}

type contractIface struct {
	Kind       string         `json:"kind"`
	Entrypoint []string       `json:"entrypoint"`
	Errors     map[string]int `json:"errors"`
	Input      string         `json:"input"`
	Output     string         `json:"output"`
}
