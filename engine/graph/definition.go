package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/internal/parallel"
	"github.com/foundry-build/foundry/lang"
)

// DefinitionVersion is part of every node definition: bump it when a definition's meaning
// changes, so that old cache entries stop matching.
const DefinitionVersion = 1

// Default limits, applied before hashing so that the digest covers the limits a step really
// runs with (and a change of defaults re-runs what it affects).
const (
	DefaultMemoryBytes = 2 << 30
	DefaultCPUs        = 2.0
	DefaultPids        = 1024
	DefaultTime        = time.Hour
	DefaultOutputBytes = 16 << 20
	// DefaultEgressBytes bounds what the broker of a step with network egress relays.
	DefaultEgressBytes = 1 << 30
	// DefaultDiskBytes and DefaultInodes bound a step's writable space, /out and /tmp
	// together, while it runs (spec/language.md §9). The sandbox holds that space in memory,
	// charged to the step's memory limit, so the byte bound is half the default memory.
	DefaultDiskBytes = 1 << 30
	DefaultInodes    = 1 << 18
)

// EffectiveLimits fills a step's unset limits with the defaults.
func EffectiveLimits(l lang.Limits) lang.Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.CPUs == 0 {
		l.CPUs = DefaultCPUs
	}
	if l.Pids == 0 {
		l.Pids = DefaultPids
	}
	if l.Time == 0 {
		l.Time = DefaultTime
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = DefaultOutputBytes
	}
	if l.DiskBytes == 0 {
		l.DiskBytes = DefaultDiskBytes
	}
	if l.Inodes == 0 {
		l.Inodes = DefaultInodes
	}
	return l
}

// digest computes every node's definition and digest, in dependency order. A large graph is
// digested a wave at a time on every core: a node's wave is one more than the latest wave
// of its dependencies, so the nodes of a wave depend only on earlier waves. The digests are
// those of digesting in order, and so is the error returned: the first in order (every
// node is digested, since a later wave may hold a node earlier in order).
func (g *Graph) digest(ix *Index) error {
	if len(ix.Order) < ParallelMin || runtime.GOMAXPROCS(0) < 2 {
		for _, a := range ix.Order {
			if err := g.digestNode(ix.Nodes[a]); err != nil {
				return err
			}
		}
		return nil
	}
	// The waves are order's (Index.wave). Each lists its nodes in the order they were made
	// (see addNodes), in which their data lie in memory.
	var waves [][]int32
	for _, a := range ix.Made {
		w := int(ix.wave[a])
		for w >= len(waves) {
			waves = append(waves, nil)
		}
		waves[w] = append(waves[w], a)
	}
	errs := make([]error, len(ix.Addrs)) // by node number: each is written by one worker
	for _, nodes := range waves {
		parallel.Parts(len(nodes), parallelDigestChunk, func(lo, hi int) {
			for _, a := range nodes[lo:hi] {
				errs[a] = g.digestNode(ix.Nodes[a])
			}
		})
	}
	for _, a := range ix.Order {
		if errs[a] != nil {
			return errs[a]
		}
	}
	return nil
}

// Below ParallelMin nodes a graph is digested on one goroutine; a wave is split into parts
// of at least parallelDigestChunk nodes.
const parallelDigestChunk = 64

func (g *Graph) digestNode(n *Node) error {
	var canon []byte
	var err error
	if n.Kind == KindStep || n.Kind == KindCheck {
		// Written by addEdges (stepTemplate) but for its producers' digests, known now.
		canon, err = n.fillTemplate()
	} else {
		var def any
		if def, err = g.definition(n); err == nil {
			canon, err = digest.Canonical(def)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", n.Address, err)
	}
	n.Digest, n.Definition = digest.FromBytes(canon), canon
	return nil
}

// pendingDigest stands for a producer's digest in a step's definition written before the
// producer is digested (see stepTemplate). Every digest has its length.
var pendingDigest = digest.Digest("sha256:" + strings.Repeat("0", 64))

// hole is where a step's definition holds the digest of a node it reads from.
type hole struct {
	at   int32 // the offset of the digest's first byte in the definition
	from *Node
}

// stepTemplate writes the definition of n, a step, into n.template before the nodes it
// reads from are digested: each of their digests is written as pendingDigest, and n.holes
// says where, so that digesting n only copies them in (fillTemplate). The definition is
// then written while addEdges has the step's data in cache: written when the step is
// digested, a wave at a time, its fields, mounts and artifacts would each be a cache miss
// again.
//
// mounts are the step's mounts sorted by path, and from the producers of its image (if it
// has one) and then of its mounts in that order: nil for content read at evaluation time.
func stepTemplate(n *Node, mounts []mount, from []*Node) {
	s := n.Step
	var refs []*Node // the producer of each reference written with a digest, in order
	ref := func(a *lang.Artifact, p *Node) inputRef {
		if p == nil {
			return refTo(a, "")
		}
		r := refTo(a, pendingDigest)
		if r.From != "" {
			refs = append(refs, p)
		}
		return r
	}
	def := StepFields(n)
	def.Inputs = make(inputList, len(mounts))
	if s.Image != nil {
		def.Image = ref(s.Image, from[0])
		from = from[1:]
	}
	for i, m := range mounts {
		def.Inputs[i] = pathRef{m.path, ref(m.art, from[i])}
	}
	at := make([]int32, 0, len(refs))
	n.template, n.defErr = def.write(&at)
	n.holes = make([]hole, len(at))
	for i := range at {
		n.holes[i] = hole{at[i], refs[i]}
	}
}

// fillTemplate completes a step's definition with the digests of the nodes it reads from.
func (n *Node) fillTemplate() ([]byte, error) {
	if n.defErr != nil {
		return nil, n.defErr
	}
	if n.template == nil {
		return nil, fmt.Errorf("engine: step %s has no definition written", n.Address) // addEdges writes every step's
	}
	for _, h := range n.holes {
		d := h.from.Digest
		if len(d) != len(pendingDigest) {
			return nil, fmt.Errorf("%s has a digest of %d bytes, not %d", h.from.Address, len(d), len(pendingDigest))
		}
		copy(n.template[h.at:], d)
	}
	def := n.template
	n.template, n.holes = nil, nil // the definition is the node's now
	return def, nil
}

// inputRef is how a definition names content: by digest when the content is known at
// compile time, or by the producing node's digest and output path when it is not yet built.
type inputRef struct {
	Digest digest.Digest `json:"digest,omitempty"`
	Mode   uint32        `json:"mode,omitempty"`
	Dir    bool          `json:"dir,omitempty"`
	From   digest.Digest `json:"from,omitempty"`
	Path   string        `json:"path,omitempty"`
	Kind   string        `json:"kind"`
}

func (g *Graph) ref(a *lang.Artifact) inputRef {
	var from digest.Digest
	if a.Node != "" {
		if n := g.Nodes[a.Node]; n != nil {
			from = n.Digest
		}
	}
	return refTo(a, from)
}

// refTo is the reference to a, produced by the node of digest from ("" for content read at
// evaluation).
func refTo(a *lang.Artifact, from digest.Digest) inputRef {
	switch a.Kind {
	case lang.ArtifactSeed, lang.ArtifactCapability, lang.ArtifactSource:
		return inputRef{Kind: string(a.Kind), From: from}
	case lang.ArtifactStepOutput:
		return inputRef{Kind: string(a.Kind), From: from, Path: a.Path}
	default:
		// Files and trees by content only: where they came from does not change them.
		kind := "file"
		if a.IsDir {
			kind = "tree"
		}
		return inputRef{Kind: kind, Digest: a.Digest, Mode: a.Mode, Dir: a.IsDir}
	}
}

// inputsOf is the input list of a map of artifacts.
func (g *Graph) inputsOf(m map[string]*lang.Artifact) inputList {
	out := make(inputList, 0, len(m))
	for k, a := range m {
		out = append(out, pathRef{k, g.ref(a)})
	}
	slices.SortFunc(out, func(a, b pathRef) int { return digest.CompareKeys(a.Path, b.Path) })
	return out
}

// inputList is a step's inputs by sandbox path, sorted as RFC 8785 sorts an object's keys,
// and written as that object, instead of a map per step whose keys are then sorted to
// encode it.
type inputList []pathRef

type pathRef struct {
	Path string
	Ref  inputRef
}

// MarshalJSON writes l as the JSON object it stands for.
func (l inputList) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	for i, e := range l {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(e.Path)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.Ref)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

func (g *Graph) refMap(m map[string]*lang.Artifact) map[string]inputRef {
	out := make(map[string]inputRef, len(m))
	for k, a := range m {
		out[k] = g.ref(a)
	}
	return out
}

func (g *Graph) definition(n *Node) (any, error) {
	switch n.Kind {
	case KindSeed:
		return g.seedDefinition(n.Seed), nil
	case KindSource:
		return SourceDefinition(n.Source), nil
	case KindCapability:
		return contractDefinition(n.Capability)
	case KindStep, KindCheck:
		return g.stepDefinition(n), nil
	case KindPackage:
		p := n.Package
		def := map[string]any{"kind": "package", "v": DefinitionVersion, "files": g.refMap(p.Files)}
		if p.Base != nil {
			def["base"] = g.ref(p.Base)
		}
		return def, nil
	case KindRecipe:
		r := n.Recipe
		steps := map[string]digest.Digest{}
		for name := range r.Steps {
			steps[name] = g.Nodes[n.Address+".step."+name].Digest
		}
		def := map[string]any{"kind": "recipe", "v": DefinitionVersion, "cost": r.Cost, "steps": steps}
		if r.Reproducible {
			// A policy on admission (its candidate is rebuilt without caches before it is
			// evaluated), not on what the steps make: in the recipe's digest, so that the plan
			// changes with it, and in no step's. Absent when false: earlier digests stay.
			def["reproducible"] = true
		}
		if r.Provides != nil {
			def["provides"] = g.ref(r.Provides)
		}
		if r.Package != nil {
			def["package"] = g.Nodes[n.Address+".package"].Digest
		}
		return def, nil
	case KindProduct:
		p := n.Product
		var reqs []inputRef
		for _, r := range p.Requires {
			reqs = append(reqs, g.ref(r))
		}
		steps, checks := map[string]digest.Digest{}, map[string]digest.Digest{}
		for name := range p.Steps {
			steps[name] = g.Nodes[n.Address+".step."+name].Digest
		}
		for name := range p.Checks {
			checks[name] = g.Nodes[n.Address+".check."+name].Digest
		}
		def := map[string]any{"kind": "product", "v": DefinitionVersion, "requires": reqs, "steps": steps, "checks": checks}
		if p.Deliver != nil {
			dv := map[string]any{"to": p.Deliver.To, "files": g.refMap(p.Deliver.Files)}
			if p.Deliver.Start != nil {
				dv["start"] = p.Deliver.Start // absent when not declared: earlier digests stay
			}
			def["deliver"] = dv
		}
		if p.Accept != nil {
			def["accept"] = g.acceptDefinition(p.Accept)
		}
		return def, nil
	}
	return nil, fmt.Errorf("unknown node kind %q", n.Kind)
}

// acceptDefinition is a product's acceptance as its digest covers it: the service (image,
// files, data path), its interface and judgment as a contract's, and its cases by the
// digest of their contents (the load's suite input). Only the acceptance's range is left out.
func (g *Graph) acceptDefinition(ac *lang.Acceptance) any {
	def := map[string]any{"kind": ac.Kind, "files": g.refMap(ac.Files), "data": ac.Data,
		"interface": interfaceDefinition(ac.Interface), "equivalence": ac.Equivalence, "cases": ac.CasesDigest}
	if ac.Image != nil {
		def["image"] = g.ref(ac.Image)
	}
	if t := ac.Tolerance; t != nil {
		def["tolerance"] = map[string]any{"absolute": t.Absolute, "relative": t.Relative, "nan_equal": t.NaNEqual}
	}
	return def
}

func (g *Graph) seedDefinition(s *lang.Seed) any {
	def := map[string]any{"kind": "seed", "v": DefinitionVersion, "platform": s.Platform,
		"env": s.Env, "user": s.User, "workdir": s.Workdir}
	switch {
	case s.Image != "":
		def["image"] = s.Image
	case s.OCILayout != nil:
		def["oci_layout"] = g.ref(s.OCILayout)
	case s.Tarball != nil:
		def["tarball"] = g.ref(s.Tarball)
	default:
		layers := make([]map[string]any, 0, len(s.Layers))
		for _, l := range s.Layers {
			switch {
			case l.From != nil:
				layers = append(layers, map[string]any{"from": g.ref(l.From)})
			case l.Files != nil:
				layers = append(layers, map[string]any{"files": g.refMap(l.Files), "symlinks": l.Symlinks})
			case l.Dir != nil:
				layers = append(layers, map[string]any{"dir": g.ref(l.Dir), "at": l.At})
			}
		}
		def["layers"] = layers
	}
	return def
}

// StepDefinition is the canonical, hashed form of a step: the action definition.
type StepDefinition struct {
	Kind     string            `json:"kind"`
	V        int               `json:"v"`
	Image    inputRef          `json:"image"`
	Argv     []string          `json:"argv"`
	Env      map[string]string `json:"env"`
	Workdir  string            `json:"workdir"`
	User     string            `json:"user"`
	Platform string            `json:"platform"`
	Inputs   inputList         `json:"inputs"`
	Outputs  []string          `json:"outputs"`
	Limits   LimitsDefinition  `json:"limits"`
	Network  string            `json:"network"`
	// Egress and OutputDigest are a fixed-output step's (network egress): the endpoints it
	// reaches and the tree digest its outputs must have. Absent for every other step, whose
	// definition is as it was before they existed.
	Egress       []string `json:"egress,omitempty"`
	OutputDigest string   `json:"output_digest,omitempty"`
	// Optional are the outputs collected only when the step makes them (a reconstruct
	// builder's oracle requests); absent for every other step.
	Optional []string `json:"optional_outputs,omitempty"`
}

// LimitsDefinition is a step's effective limits, as its definition and its plan view hold them.
type LimitsDefinition struct {
	MemoryBytes int64  `json:"memory_bytes"`
	CPUs        string `json:"cpus"` // decimal text: float formatting must not vary the digest
	Pids        int64  `json:"pids"`
	TimeMillis  int64  `json:"time_ms"`
	OutputBytes int64  `json:"output_bytes"`
	// EgressBytes is set for a step with network egress only.
	EgressBytes int64 `json:"egress_bytes,omitempty"`
	// DiskBytes and Inodes are set only when they are not the defaults: every definition
	// written before they existed is unchanged, and a step that names the default bound has
	// the digest of one that names none.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	Inodes    int64 `json:"inodes,omitempty"`
}

// canonical is digest.Canonical(d), written directly: steps are most of a large graph's
// nodes, and the generic path (marshal, check, re-parse, transform) dominated compiling it.
// TestStepCanonicalMatchesGeneric holds the two to the same bytes. Members are in RFC 8785
// order (the keys are ASCII, so byte order).
//
// It writes into a pooled encoder and returns a copy of exactly the length written: the
// definition is kept in its node, and an encoder of its own per step grew its buffer once or
// twice and kept up to twice the length (150 of the 450 MB compiling and planning 100k
// steps allocated).
func (d StepDefinition) canonical() ([]byte, error) { return d.write(nil) }

// write is canonical, and appends to holes, unless nil, the offset of each reference's
// producer digest (inputRef.From), in the order written: the image's, then the inputs'.
func (d StepDefinition) write(holes *[]int32) ([]byte, error) {
	e := encoders.Get().(*digest.Encoder)
	defer encoders.Put(e)
	e.Reset()
	e.Open('{')
	e.Key("argv")
	e.Strings(d.Argv)
	if len(d.Egress) > 0 {
		e.Key("egress")
		e.Strings(d.Egress)
	}
	e.Key("env")
	e.StringMap(d.Env)
	note := func(at int) {
		if at >= 0 && holes != nil {
			*holes = append(*holes, int32(at))
		}
	}
	e.Key("image")
	note(d.Image.encode(e))
	e.Key("inputs")
	if d.Inputs == nil {
		e.Null()
	} else {
		e.Open('{')
		for _, in := range d.Inputs {
			e.Key(in.Path)
			note(in.Ref.encode(e))
		}
		e.Close('}')
	}
	e.Key("kind")
	e.String(d.Kind)
	e.Key("limits")
	e.Open('{')
	e.Key("cpus")
	e.String(d.Limits.CPUs)
	e.OmitEmptyInt("disk_bytes", d.Limits.DiskBytes)
	e.OmitEmptyInt("egress_bytes", d.Limits.EgressBytes)
	e.OmitEmptyInt("inodes", d.Limits.Inodes)
	e.Key("memory_bytes")
	e.Int(d.Limits.MemoryBytes)
	e.Key("output_bytes")
	e.Int(d.Limits.OutputBytes)
	e.Key("pids")
	e.Int(d.Limits.Pids)
	e.Key("time_ms")
	e.Int(d.Limits.TimeMillis)
	e.Close('}')
	e.Key("network")
	e.String(d.Network)
	e.OmitEmptyString("output_digest", d.OutputDigest)
	e.Key("outputs")
	e.Strings(d.Outputs)
	e.Key("platform")
	e.String(d.Platform)
	e.Key("user")
	e.String(d.User)
	e.Key("v")
	e.Int(int64(d.V))
	e.Key("workdir")
	e.String(d.Workdir)
	e.Close('}')
	b, err := e.Bytes()
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

// encoders are the encoders step definitions are written with (see canonical).
var encoders = sync.Pool{New: func() any { return digest.NewEncoder(4096) }}

// encode writes r as encoding/json would (omitempty fields left out), canonically, and
// returns the offset of r.From's first byte, or -1 when r has none.
func (r inputRef) encode(e *digest.Encoder) (fromAt int) {
	fromAt = -1
	e.Open('{')
	e.OmitEmptyString("digest", string(r.Digest))
	if r.Dir {
		e.Key("dir")
		e.Bool(true)
	}
	if r.From != "" {
		e.Key("from")
		fromAt = e.Len() + 1 // after the opening quote
		e.String(string(r.From))
	}
	e.Key("kind")
	e.String(r.Kind)
	e.OmitEmptyInt("mode", int64(r.Mode))
	e.OmitEmptyString("path", r.Path)
	e.Close('}')
	return fromAt
}

// stepDefinition is the definition of n, a step, with its producers looked up by address:
// the generic form that stepTemplate's must equal (TestStepTemplatesMatchGeneric).
func (g *Graph) stepDefinition(n *Node) StepDefinition {
	def := StepFields(n)
	def.Inputs = g.inputsOf(n.Step.Mounts)
	if n.Step.Image != nil {
		def.Image = g.ref(n.Step.Image)
	}
	return def
}

// StepFields is the definition of n, a step, but for its image and inputs, which name the
// nodes they come from: what a plan shows of the step (with its mounts).
func StepFields(n *Node) StepDefinition {
	s := n.Step
	def := StepDefinition{
		Kind: string(n.Kind), V: DefinitionVersion, Argv: nonNil(s.Run), Env: s.Env, Workdir: s.Workdir,
		User: s.User, Platform: s.Platform, Outputs: nonNil(s.Outputs), Network: s.Network, Limits: limitsOf(s.Limits),
		Optional: s.Optional,
	}
	if s.Network == lang.NetworkEgress {
		def.Limits.EgressBytes = EgressBytes(s)
		def.OutputDigest = string(s.OutputDigest)
		for _, h := range s.Egress {
			def.Egress = append(def.Egress, h.String())
		}
	}
	return def
}

// EgressBytes is the bound on what a fixed-output step's broker relays: its
// limits.egress, or DefaultEgressBytes; 0 for a step without network egress.
func EgressBytes(s *lang.Step) int64 {
	switch {
	case s.Network != lang.NetworkEgress:
		return 0
	case s.Limits.EgressBytes > 0:
		return s.Limits.EgressBytes
	}
	return DefaultEgressBytes
}

// limitsOf is the definition form of a step's effective limits.
func limitsOf(l lang.Limits) LimitsDefinition {
	lim := EffectiveLimits(l)
	d := LimitsDefinition{MemoryBytes: lim.MemoryBytes, CPUs: cpusText(lim.CPUs),
		Pids: lim.Pids, TimeMillis: lim.Time.Milliseconds(), OutputBytes: lim.OutputBytes}
	if lim.DiskBytes != DefaultDiskBytes {
		d.DiskBytes = lim.DiskBytes
	}
	if lim.Inodes != DefaultInodes {
		d.Inodes = lim.Inodes
	}
	return d
}

// cpusText is strconv.FormatFloat(cpus, 'f', -1, 64), the decimal text definitions hold,
// with the whole numbers nearly every step has written without formatting a float.
func cpusText(cpus float64) string {
	if cpus > 0 && cpus < 1<<53 && cpus == math.Trunc(cpus) {
		return strconv.FormatInt(int64(cpus), 10)
	}
	return strconv.FormatFloat(cpus, 'f', -1, 64)
}

// nonNil makes an absent list an empty one: definitions and plans write [] for it.
func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// contractDefinition is a capability's canonical contract; its digest is the capability's
// identity. It covers the name, interface, schemas, target, effects and equivalence, and
// deliberately not the summary (documentation) or the suites: cases are evidence about the
// contract, and retiring a disclosed sealed case must not change what is being proven.
func contractDefinition(c *lang.Capability) (any, error) {
	def := map[string]any{"kind": "capability", "v": DefinitionVersion, "name": c.Name, "target": c.Target,
		"effects": c.Effects, "equivalence": c.Equivalence}
	if c.Tolerance != nil {
		def["tolerance"] = map[string]any{"absolute": c.Tolerance.Absolute, "relative": c.Tolerance.Relative, "nan_equal": c.Tolerance.NaNEqual}
	}
	if c.Unordered { // only when set: every contract written before it keeps its digest
		def["unordered"] = true
	}
	if c.Interface != nil {
		def["interface"] = interfaceDefinition(c.Interface)
	}
	return def, nil
}

// interfaceDefinition is an interface as a contract's digest covers it.
func interfaceDefinition(it *lang.Interface) map[string]any {
	idef := map[string]any{"kind": it.Kind, "entrypoint": it.Entrypoint}
	// Schemas are hashed as text: as JSON values, canonicalization would round their
	// numbers, and two schemas that differ only in a 64-bit bound would collide.
	if it.InputSchema != "" {
		idef["input"] = it.InputSchema
	}
	if it.OutputSchema != "" {
		idef["output"] = it.OutputSchema
	}
	idef["errors"] = it.Errors
	if it.Kind == "service" {
		idef["port"] = it.Port
		if it.Ready != "" {
			idef["ready"] = it.Ready
		}
	}
	return idef
}

// SourceDefinition is a source's definition (spec/language.md §16): what it is, by its pin,
// and how its bytes become the tree steps see. It deliberately leaves out where the bytes
// come from (url, mirrors, repository, registry) and the fetch's limits: neither changes
// the content, so moving a source to a mirror changes no digest. The tree a source makes is
// known only once it is fetched; a step that mounts one names it here by this definition's
// digest, and its cache key by the tree's digest (CacheKey).
func SourceDefinition(s *lang.Source) any {
	def := map[string]any{"kind": "source", "v": DefinitionVersion, "type": s.Type, "pin": s.Pin}
	if s.Type == lang.SourceHTTP {
		def["archive"] = s.Archive
		if s.Archive == lang.ArchiveFile {
			def["file"] = s.File
		} else {
			def["strip"] = s.Strip
		}
	}
	return def
}
