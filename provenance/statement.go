package provenance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// URIs Foundry writes. spec/provenance.md documents each.
const (
	// PayloadType is the DSSE payloadType of every Foundry envelope (in-toto's).
	PayloadType = "application/vnd.in-toto+json"
	// PredicateSLSAProvenance is the predicateType of step provenance.
	PredicateSLSAProvenance = "https://slsa.dev/provenance/v1"
	// BuildTypeStep is the buildType of one sandboxed Foundry step: externalParameters is the
	// step as written, internalParameters what Foundry set (spec/provenance.md).
	BuildTypeStep = "https://foundry.dev/buildtypes/step/v1"
	// BuilderIDPrefix starts every Foundry builder id:
	// BuilderIDPrefix + "<executor>@v1?isolation=<isolation>".
	BuilderIDPrefix = "https://foundry.dev/builder/"
)

// CheckResultSubject names the subject of a passed check's provenance: its cache key, the
// key its passing result is recorded under (a check has no outputs of its own).
const CheckResultSubject = "result"

// Isolation modes an executor reports.
const (
	IsolationContainer = "container" // OCI sandbox: own namespaces, read-only rootfs, limits
	IsolationNone      = "none"      // the local executor: runs on the host, unsandboxed
)

// Annotation keys Foundry sets on resource descriptors. Vendor-prefixed, as SLSA asks of
// extensions; verifiers that do not know them lose nothing (monotonic policy).
const (
	// AnnotationRole on a resolved dependency is "image" or "input".
	AnnotationRole = "foundry_role"
	// AnnotationProducer on a resolved dependency is the cache key of the Foundry step
	// execution that produced it; Verify follows such dependencies and verifies them too.
	AnnotationProducer = "foundry_producer"
	// AnnotationEgress on a byproduct named "egress/N" is the Nth connection the step's
	// egress broker handled (a Connection, as JSON).
	AnnotationEgress = "foundry_egress"
	// AnnotationSource on a resolved dependency is the address of the source block
	// (source.NAME) whose tree was mounted, with AnnotationTree that tree's digest: the
	// dependency's uri and digest say where the pinned content came from and what pins it.
	AnnotationSource = "foundry_source"
)

var (
	gitCommitRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{40}$`) })
	executorRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`) })
	digestRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })
)

// BuilderID is the builder.id for an executor running with the given isolation, e.g.
// "https://foundry.dev/builder/containerd@v1?isolation=container". Each (executor,
// isolation) pair is a distinct id because SLSA makes builder.id "the sole determiner of
// the build level": an unsandboxed run must never share an id with a sandboxed one.
func BuilderID(executor, isolation string) (string, error) {
	if !executorRE().MatchString(executor) {
		return "", fmt.Errorf("executor %q: want a lowercase name like containerd, runc or local", executor)
	}
	switch isolation {
	case IsolationContainer, IsolationNone:
	default:
		return "", fmt.Errorf("isolation %q: want %q or %q", isolation, IsolationContainer, IsolationNone)
	}
	// The known executors have one honest isolation each; refuse a mislabel here rather
	// than let it reach a signature.
	switch {
	case executor == "local" && isolation != IsolationNone,
		(executor == "containerd" || executor == "runc") && isolation != IsolationContainer:
		return "", fmt.Errorf("executor %s cannot provide isolation %q", executor, isolation)
	}
	return BuilderIDPrefix + executor + "@v1?isolation=" + isolation, nil
}

// DefaultBuilders is the allowlist Verify uses when a Policy names no builders: Foundry's
// sandboxed executors. The local executor (isolation=none) must be allowed explicitly.
func DefaultBuilders() []string {
	a, _ := BuilderID("containerd", IsolationContainer)
	b, _ := BuilderID("runc", IsolationContainer)
	return []string{a, b}
}

// Execution is what an executor observed while running one step. The engine fills it only
// from the executor's observations and from the step definition; it deliberately has no
// field for a result, verdict or success claim (see the package doc).
type Execution struct {
	// InvocationID identifies this attempt of the step (runDetails.metadata.invocationId).
	InvocationID string
	// Executor that ran the step ("containerd", "runc", "local") and the isolation it
	// enforced (IsolationContainer or IsolationNone). Together they make builder.id.
	Executor  string
	Isolation string
	// Versions are builder.version entries, e.g. {"foundry": "v0.3.0", "containerd": "1.6.20"}.
	Versions map[string]string

	// Step is the step definition as written in the recipe, as a JSON object
	// (buildDefinition.externalParameters). Digests of what it references belong in Image
	// and Inputs, not here.
	Step json.RawMessage

	// What Foundry set (buildDefinition.internalParameters).
	ActionDigest string // "sha256:<hex>", the step's definition digest: its identity in the graph
	// CacheKey is the digest its result is cached under: the definition with each mounted
	// step output and capability named by content ("" for none given).
	CacheKey string
	Platform string // e.g. "linux/amd64"
	Network  Network
	Limits   Limits
	User     string // the uid:gid the step ran as, e.g. "65534:65534"
	// RuntimeSpecDigest is the digest of the OCI runtime spec the executor ran (optional:
	// the local executor has none). It pins every sandbox setting not listed above.
	RuntimeSpecDigest string

	// Image is the sandbox image the step ran in; Inputs every mounted input. Each must
	// carry a digest; they become buildDefinition.resolvedDependencies, image first.
	Image  Dependency
	Inputs []Dependency
	// ImageSources are the sources laid into the image by a seed's layer.dir (its own seed's
	// and, through layer.from, its bases'), named "image:AT" for the path they lie at:
	// resolvedDependencies after the inputs, with foundry_role "layer", so that a source
	// is named in the provenance of a step that runs on it as of one that mounts it.
	ImageSources []Dependency
	// Caches are the cache volumes the step mounted, writable (internalParameters.caches):
	// non-hermetic inputs, whose content no digest names. Sorted by Path.
	Caches []CacheMount
	// Reproduces, for a rebuild (apply -rebuild), names the cached execution whose outputs
	// this one made again, byte for byte, in a fresh sandbox with empty caches
	// (internalParameters.reproduces). Minted only when every output was identical.
	Reproduces *Reproduction

	// Outputs are the declared outputs the executor collected (the statement's subjects).
	// A directory output's digest is its canonical tree-manifest digest (digest.Dir).
	Outputs []Artifact
	// Logs are the captured stdout/stderr blobs (runDetails.byproducts).
	Logs []Artifact
	// Egress are the connections the egress broker of a step with network egress handled,
	// admitted or refused, in the order they were made (runDetails.byproducts "egress/N").
	Egress []Connection

	StartedOn  time.Time
	FinishedOn time.Time
}

// CacheMount is one cache volume a step mounted (spec/language.md §9b).
type CacheMount struct {
	Path    string `json:"path"`    // where the step saw it
	Name    string `json:"name"`    // the cache's name
	Sharing string `json:"sharing"` // shared, locked or private
	// Volume is the volume's key: the digest of its project, trust domain, name, image and
	// platform (engine/volume), as hex.
	Volume   string `json:"volume"`
	Instance int    `json:"instance,omitempty"` // a private instance (0: the volume's own)
	// Empty says the step got an empty directory no other step saw (a rebuild's), not a
	// volume: Volume and Sharing are then empty.
	Empty bool `json:"empty,omitempty"`
	// Hermetic is false for a volume, whose content when the step started is named by no
	// digest, and true only for an Empty one. Always written, so that a reader need not
	// know the other fields to know it.
	Hermetic bool `json:"hermetic"`
}

// Reproduction names the execution a rebuild reproduced.
type Reproduction struct {
	Attestation string `json:"attestation"` // the digest of its provenance envelope
	CacheKey    string `json:"cacheKey"`    // the cache key its result is recorded under
	// Note is what was done, for a reader: always "reproduced independently, without caches".
	Note string `json:"note"`
}

// ReproducedNote is Reproduction.Note.
const ReproducedNote = "reproduced independently, without caches"

// Network is the network policy the sandbox enforced.
type Network struct {
	// Mode is "none" (a new network namespace with loopback only, the default), "egress"
	// (that, and a broker in it reaching Hosts, a fixed-output step's) or "host" (the host's
	// network, only with an operator grant), as in package executors.
	Mode string `json:"mode"`
	// Hosts are the HOST:PORT endpoints the broker admitted (mode egress): the step's
	// egress, each granted.
	Hosts []string `json:"hosts,omitempty"`
	// OutputDigest is the tree digest a fixed-output step's outputs were checked to have
	// before they were stored (mode egress).
	OutputDigest string `json:"outputDigest,omitempty"`
}

// Connection is one connection of a fixed-output step to its egress broker, as the broker
// observed it (package egress records it; spec/provenance.md).
type Connection struct {
	Method   string `json:"method"`            // "CONNECT", or a plain request's method
	Host     string `json:"host"`              // what the step asked for: a canonical host, or the raw text
	Port     uint16 `json:"port"`              // 0 when it could not be read
	Address  string `json:"address,omitempty"` // the IP:port dialed, when one was
	Outcome  string `json:"outcome"`           // relayed, refused, failed, limit or ended
	Reason   string `json:"reason,omitempty"`
	Sent     int64  `json:"sent"`     // bytes sent upstream
	Received int64  `json:"received"` // bytes read from upstream
}

// Limits are the resource limits the sandbox enforced, after the executor's defaults were
// applied (record the effective values, not the recipe's); zero means "not recorded".
type Limits struct {
	MemoryBytes   int64   `json:"memoryBytes,omitempty"`
	CPUs          float64 `json:"cpus,omitempty"`
	Pids          int64   `json:"pids,omitempty"`
	TimeoutMillis int64   `json:"timeoutMillis,omitempty"`
	OutputBytes   int64   `json:"outputBytes,omitempty"`
	// EgressBytes bounds what a fixed-output step's broker relayed.
	EgressBytes int64 `json:"egressBytes,omitempty"`
}

// Artifact is a named blob or tree, by digest.
type Artifact struct {
	Name      string // output path ("/out/int-sort") or log name ("stdout")
	Digest    string // "sha256:<hex>"
	MediaType string // optional
}

// Dependency is something the step consumed, by digest.
type Dependency struct {
	Name      string // how the step saw it: mount path, or "image"
	URI       string // where it came from: "oci:...", "file:...", a registry reference
	Digest    string // "sha256:<hex>"
	MediaType string // optional
	// Producer is the action digest of the Foundry step that produced this input, if any.
	// Verify follows such dependencies to their own provenance.
	Producer string
	// Source is set for the tree of a source block: the source's address, and Tree the tree
	// mounted ("sha256:<hex>"). URI is where the pinned content was fetched from; Digest
	// the pin of an http source (its bytes) or an oci one (its manifest), and for a git
	// source GitCommit is the pin (the commit id) and Digest is empty.
	Source    string
	Tree      string
	GitCommit string
}

// Statement is an in-toto Statement minted by this package. It has no exported fields and
// no constructors other than NewProvenance (from an executor's Execution), NewTestResult
// (from the evaluator's Evaluation) and NewVerificationSummary (from an Admission carrying
// verified evidence), so that Sign can only ever sign what was observed.
type Statement struct {
	st *intoto.Statement
}

// InToto returns a copy of the underlying in-toto Statement, for reading.
func (s *Statement) InToto() *intoto.Statement {
	return proto.Clone(s.st).(*intoto.Statement)
}

// NewProvenance mints the SLSA Provenance v1 statement for one executed step. It refuses an
// Execution that is incomplete or malformed rather than sign a partial record.
func NewProvenance(e *Execution) (*Statement, error) {
	if e == nil {
		return nil, errors.New("provenance: nil execution")
	}
	builderID, err := BuilderID(e.Executor, e.Isolation)
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	if e.InvocationID == "" {
		return nil, errors.New("provenance: no invocation id")
	}
	if !digestRE().MatchString(e.ActionDigest) {
		return nil, fmt.Errorf("provenance: action digest %q is not sha256:<64 hex>", e.ActionDigest)
	}
	if e.StartedOn.IsZero() || e.FinishedOn.IsZero() {
		return nil, errors.New("provenance: start and finish times are required")
	}
	if e.FinishedOn.Before(e.StartedOn) {
		return nil, fmt.Errorf("provenance: finished %s before it started %s", e.FinishedOn.Format(time.RFC3339Nano), e.StartedOn.Format(time.RFC3339Nano))
	}
	switch e.Network.Mode {
	case "none":
		if len(e.Network.Hosts) != 0 || len(e.Egress) != 0 || e.Network.OutputDigest != "" {
			return nil, errors.New("provenance: network mode none with hosts, connections or an output digest")
		}
	case "egress":
		if len(e.Network.Hosts) == 0 || !digestRE().MatchString(e.Network.OutputDigest) {
			return nil, errors.New("provenance: network mode egress needs its hosts and output digest")
		}
	case "host":
	default:
		return nil, fmt.Errorf("provenance: network mode %q: want none, egress or host", e.Network.Mode)
	}

	ext, err := stepStruct(e.Step)
	if err != nil {
		return nil, fmt.Errorf("provenance: step definition: %w", err)
	}
	internalMap := map[string]any{
		"executor":     e.Executor,
		"isolation":    e.Isolation,
		"actionDigest": e.ActionDigest,
		"platform":     e.Platform,
		"network":      e.Network,
		"limits":       e.Limits,
		"user":         e.User,
	}
	if e.CacheKey != "" {
		if !digestRE().MatchString(e.CacheKey) {
			return nil, fmt.Errorf("provenance: cache key %q is not sha256:<64 hex>", e.CacheKey)
		}
		internalMap["cacheKey"] = e.CacheKey
	}
	if len(e.Caches) > 0 {
		cs := make([]CacheMount, len(e.Caches))
		for i, c := range e.Caches {
			if c.Path == "" || c.Name == "" || (c.Volume == "") != c.Empty {
				return nil, fmt.Errorf("provenance: cache %d: path, name, and a volume or empty, are required", i)
			}
			c.Hermetic = c.Empty
			cs[i] = c
		}
		internalMap["caches"] = cs
	}
	if r := e.Reproduces; r != nil {
		if !digestRE().MatchString(r.Attestation) || !digestRE().MatchString(r.CacheKey) {
			return nil, fmt.Errorf("provenance: reproduces: attestation %q and cache key %q must be sha256:<64 hex>", r.Attestation, r.CacheKey)
		}
		internalMap["reproduces"] = Reproduction{Attestation: r.Attestation, CacheKey: r.CacheKey, Note: ReproducedNote}
	}
	if e.RuntimeSpecDigest != "" {
		if !digestRE().MatchString(e.RuntimeSpecDigest) {
			return nil, fmt.Errorf("provenance: runtime spec digest %q is not sha256:<64 hex>", e.RuntimeSpecDigest)
		}
		internalMap["runtimeSpecDigest"] = e.RuntimeSpecDigest
	}
	internal, err := toStruct(internalMap)
	if err != nil {
		return nil, fmt.Errorf("provenance: internal parameters: %w", err)
	}

	if e.Image.Digest == "" {
		return nil, errors.New("provenance: no image digest")
	}
	deps := make([]*intoto.ResourceDescriptor, 0, 1+len(e.Inputs)+len(e.ImageSources))
	img, err := dependencyRD(e.Image, "image")
	if err != nil {
		return nil, fmt.Errorf("provenance: image: %w", err)
	}
	deps = append(deps, img)
	for i, in := range e.Inputs {
		rd, err := dependencyRD(in, "input")
		if err != nil {
			return nil, fmt.Errorf("provenance: input %d (%s): %w", i, in.Name, err)
		}
		deps = append(deps, rd)
	}
	for i, in := range e.ImageSources {
		rd, err := dependencyRD(in, "layer")
		if err != nil {
			return nil, fmt.Errorf("provenance: image source %d (%s): %w", i, in.Name, err)
		}
		deps = append(deps, rd)
	}

	if len(e.Outputs) == 0 {
		return nil, errors.New("provenance: no outputs: a statement needs at least one subject")
	}
	subjects, err := artifactRDs(e.Outputs, "output")
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	logs, err := artifactRDs(e.Logs, "log")
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	for i, c := range e.Egress {
		rd, err := connectionRD(i, c)
		if err != nil {
			return nil, fmt.Errorf("provenance: egress connection %d: %w", i, err)
		}
		logs = append(logs, rd)
	}

	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            BuildTypeStep,
			ExternalParameters:   ext,
			InternalParameters:   internal,
			ResolvedDependencies: deps,
		},
		RunDetails: &slsa.RunDetails{
			Builder: &slsa.Builder{Id: builderID, Version: e.Versions},
			Metadata: &slsa.BuildMetadata{
				InvocationId: e.InvocationID,
				StartedOn:    timestamppb.New(e.StartedOn.UTC()),
				FinishedOn:   timestamppb.New(e.FinishedOn.UTC()),
			},
			Byproducts: logs,
		},
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	predJSON, err := protojson.Marshal(pred)
	if err != nil {
		return nil, fmt.Errorf("provenance: encoding predicate: %w", err)
	}
	predStruct := &structpb.Struct{}
	if err := protojson.Unmarshal(predJSON, predStruct); err != nil {
		return nil, fmt.Errorf("provenance: encoding predicate: %w", err)
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       subjects,
		PredicateType: PredicateSLSAProvenance,
		Predicate:     predStruct,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	return &Statement{st: st}, nil
}

// stepStruct turns the step definition into externalParameters. It must be a non-empty
// JSON object (SLSA requires externalParameters). Numbers become JSON doubles, so integers
// beyond 2^53 are refused rather than silently rounded.
func stepStruct(raw json.RawMessage) (*structpb.Struct, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("empty")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil, errors.New("not a non-empty JSON object")
	}
	if err := checkNumbers(v); err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	return s, nil
}

func checkNumbers(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case json.Number:
		if i, err := x.Int64(); err == nil && (i > 1<<53 || i < -(1<<53)) {
			return fmt.Errorf("integer %s cannot be represented exactly in JSON; write it as a string", x)
		}
	}
	return nil
}

func toStruct(v any) (*structpb.Struct, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

func digestSet(d string) (map[string]string, error) {
	if !digestRE().MatchString(d) {
		return nil, fmt.Errorf("digest %q is not sha256:<64 lowercase hex>", d)
	}
	return map[string]string{"sha256": strings.TrimPrefix(d, "sha256:")}, nil
}

func dependencyRD(d Dependency, role string) (*intoto.ResourceDescriptor, error) {
	var ds map[string]string
	var err error
	if d.GitCommit != "" && d.Digest == "" {
		if !gitCommitRE().MatchString(d.GitCommit) {
			return nil, fmt.Errorf("git commit %q is not 40 lowercase hex digits", d.GitCommit)
		}
		ds = map[string]string{"gitCommit": d.GitCommit}
	} else if ds, err = digestSet(d.Digest); err != nil {
		return nil, err
	}
	if d.Name == "" && d.URI == "" {
		return nil, errors.New("needs a name or a uri")
	}
	ann := map[string]any{AnnotationRole: role}
	if d.Source != "" {
		if !digestRE().MatchString(d.Tree) {
			return nil, fmt.Errorf("source %s: tree %q is not a digest", d.Source, d.Tree)
		}
		ann[AnnotationSource], ann[AnnotationTree] = d.Source, d.Tree
	}
	if d.Producer != "" {
		if !digestRE().MatchString(d.Producer) {
			return nil, fmt.Errorf("producer %q is not an action digest", d.Producer)
		}
		ann[AnnotationProducer] = d.Producer
	}
	as, err := structpb.NewStruct(ann)
	if err != nil {
		return nil, err
	}
	return &intoto.ResourceDescriptor{Name: d.Name, Uri: d.URI, Digest: ds, MediaType: d.MediaType, Annotations: as}, nil
}

// connectionRD is the byproduct of the ith egress connection: named egress/i, with the
// endpoint as a tcp:// URI when the step named one, and the connection in an annotation.
func connectionRD(i int, c Connection) (*intoto.ResourceDescriptor, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	as, err := structpb.NewStruct(map[string]any{AnnotationRole: "egress", AnnotationEgress: m})
	if err != nil {
		return nil, err
	}
	rd := &intoto.ResourceDescriptor{Name: fmt.Sprintf("egress/%d", i), Annotations: as}
	if c.Port != 0 {
		rd.Uri = "tcp://" + net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
	}
	return rd, nil
}

func artifactRDs(as []Artifact, what string) ([]*intoto.ResourceDescriptor, error) {
	out := make([]*intoto.ResourceDescriptor, 0, len(as))
	seen := map[string]bool{}
	for i, a := range as {
		if a.Name == "" {
			return nil, fmt.Errorf("%s %d has no name", what, i)
		}
		// in-toto: subject names SHOULD be unique; for Foundry they are paths, so they must be.
		if seen[a.Name] {
			return nil, fmt.Errorf("%s %q listed twice", what, a.Name)
		}
		seen[a.Name] = true
		ds, err := digestSet(a.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, a.Name, err)
		}
		out = append(out, &intoto.ResourceDescriptor{Name: a.Name, Digest: ds, MediaType: a.MediaType})
	}
	// Sorted by name so that the same observation gives the same statement.
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// marshal is the payload encoding: protojson, compacted. protojson varies its whitespace
// between runs on purpose; compacting makes the same statement give the same bytes, which
// keeps Ed25519 envelopes reproducible. Identity still comes from the stored envelope bytes.
func (s *Statement) marshal() ([]byte, error) {
	b, err := protojson.Marshal(s.st)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// MarshalJSON returns the statement's JSON, the bytes Sign puts in the envelope payload.
func (s *Statement) MarshalJSON() ([]byte, error) { return s.marshal() }

// EnvelopeDigest is the identity of a stored attestation: "sha256:" + hex SHA-256 of the
// exact envelope bytes.
func EnvelopeDigest(envelope []byte) string {
	sum := sha256.Sum256(envelope)
	return "sha256:" + hex.EncodeToString(sum[:])
}
