package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/internal/jsonindent"
	"github.com/foundry-build/foundry/internal/parallel"
	"github.com/foundry-build/foundry/lang"
)

// PlanFormatVersion is the version of the JSON plan format (spec/plan-json.md). It changes
// only when a field changes meaning or is removed; new fields keep the version.
const PlanFormatVersion = "1"

// Node statuses in a plan.
const (
	StatusRun         = "run"         // a step that will execute
	StatusCached      = "cached"      // a step whose result is in the action cache, a seed whose image is built
	StatusBuild       = "build"       // a seed image, package or recipe that will be assembled
	StatusRegistry    = "registry"    // a capability pinned to an admitted version in the registry
	StatusMissing     = "missing"     // cannot be produced: see Reason
	StatusAlternative = "alternative" // a recipe that is not chosen, kept as a fallback
)

// Plan says, before anything runs, what each node of the graph will do and why.
type Plan struct {
	FormatVersion string             `json:"format_version"`
	Project       PlanProject        `json:"project"`
	Digest        digest.Digest      `json:"plan_digest"`
	Inputs        []lang.InputRecord `json:"inputs"`
	Nodes         []*PlanNode        `json:"nodes"`
	Capabilities  []*CapabilityPlan  `json:"capabilities"`
	Summary       Summary            `json:"summary"`
	// keys are the cache keys known before the apply, and what they found (keys.go):
	// apply settles those steps from them without asking the cache again.
	keys map[string]*keyed
	// keysHold is the hold of the workspace's apply lock the keys were found under; 0 when
	// it was not held, and apply looks them up again.
	keysHold uint64
	// Invocation is how the plan was made (variables), so that applying a saved plan
	// evaluates the configuration the same way. It is not part of the plan digest: the
	// node digests already cover every value a variable fed into.
	Invocation *Invocation `json:"invocation,omitempty"`
}

// Invocation records the command-line inputs of a plan.
type Invocation struct {
	Vars     map[string]string `json:"vars,omitempty"`
	VarFiles []string          `json:"var_files,omitempty"` // absolute paths
}

// PlanProject identifies the project a plan was made for.
type PlanProject struct {
	Name     string `json:"name"`
	Dir      string `json:"dir"`
	Platform string `json:"platform"`
	Registry string `json:"registry,omitempty"`
}

// PlanNode is one node of the plan.
type PlanNode struct {
	Address string        `json:"address"`
	Kind    NodeKind      `json:"kind"`
	Digest  digest.Digest `json:"digest"`
	Deps    []string      `json:"deps"`
	Status  string        `json:"status"`
	Reason  string        `json:"reason,omitempty"`
	Source  SourcePos     `json:"source"`
	Step    *StepView     `json:"step,omitempty"`
}

// SourcePos is where a node was declared.
type SourcePos struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// StepView is what a step will run, for people and tools reading a plan.
type StepView struct {
	Image   string            `json:"image"`
	Argv    []string          `json:"argv"`
	Env     map[string]string `json:"env"`
	Workdir string            `json:"workdir"`
	Mounts  Mounts            `json:"mounts"`
	Outputs []string          `json:"outputs"`
	Limits  limitsDefinition  `json:"limits"`
	Network string            `json:"network"`
}

// Mounts are a step's mounts as a plan shows them: each sandbox path with a description of
// what is mounted there (step.NAME.output["/out/o"], project_dir("src"), ...), written in
// JSON as an object of path → description.
//
// A plan MakePlan makes holds the step's artifacts and describes them when asked (Text,
// MarshalJSON): making a map of descriptions for every step would cost more than the
// rest of planning, and a plan is mostly made to be read for its statuses. A plan read
// from JSON holds the descriptions.
type Mounts struct {
	arts map[string]*lang.Artifact
	text map[string]string
}

// Text returns the mounts' descriptions by sandbox path.
func (m Mounts) Text() map[string]string {
	if m.arts == nil {
		return m.text
	}
	out := make(map[string]string, len(m.arts))
	for p, a := range m.arts {
		out[p] = a.String()
	}
	return out
}

// MarshalJSON writes the mounts as the object of Text.
func (m Mounts) MarshalJSON() ([]byte, error) {
	t := m.Text()
	if t == nil {
		t = map[string]string{} // a step without mounts: {}, as before the view was lazy
	}
	return json.Marshal(t)
}

// UnmarshalJSON reads the object MarshalJSON writes.
func (m *Mounts) UnmarshalJSON(b []byte) error {
	*m = Mounts{}
	return json.Unmarshal(b, &m.text)
}

// CapabilityPlan is how a required capability will be resolved (see resolve.go).
type CapabilityPlan struct {
	Address        string        `json:"address"`
	ContractDigest digest.Digest `json:"contract_digest"`
	Status         string        `json:"status"` // registry, build or missing
	Recipe         string        `json:"recipe,omitempty"`
	Pinned         *Admitted     `json:"pinned,omitempty"` // status registry: the admitted version
	Reason         string        `json:"reason,omitempty"`
	// Registry says why the version the registry holds under the contract tag is not used
	// (quarantined, not admitted for this contract, admitted on an earlier sealed suite),
	// or why it is pinned all the same.
	Registry string `json:"registry,omitempty"`
	// Notes say what else the evaluation of its candidates will meet, such as a sealed
	// suite with fewer undisclosed cases than promotion needs.
	Notes []string `json:"notes,omitempty"`
	// Reachable: some recipe graph provides it under its assumptions (every prerequisite
	// is itself reachable). Ready: concrete digests and evidence are at hand — it is pinned
	// in the registry, or a reachable recipe has every prerequisite ready.
	Reachable bool            `json:"reachable"`
	Ready     bool            `json:"ready"`
	Recipes   []*RecipeOption `json:"recipes"`
}

// RecipeOption is one recipe examined for a capability, in resolution order (cost, name).
type RecipeOption struct {
	Address string `json:"address"`
	Cost    int64  `json:"cost"`
	Status  string `json:"status"` // build (chosen), alternative, or missing
	Steps   int    `json:"steps"`
	// Missing is the smallest observed set of prerequisites that did not resolve.
	Missing []string `json:"missing,omitempty"`
	// Cycle is the witness when a prerequisite needs the capability itself.
	Cycle []string `json:"cycle,omitempty"`
}

// Summary counts the plan's work.
type Summary struct {
	Run      int `json:"run"`
	Cached   int `json:"cached"`
	Build    int `json:"build"`
	Registry int `json:"registry"`
	Missing  int `json:"missing"`
}

// PlanOptions are what a plan consults beyond the configuration.
type PlanOptions struct {
	// Lookup looks cache keys up in the action cache (Cache.LookupMany); nil means nothing
	// is cached. See keys.go.
	Lookup func(keys []digest.Digest) (map[digest.Digest]cache.Entry, error)
	// SeedBuilt reports whether a seed's image is built (seed.Builder.Built of its digest),
	// so that apply builds nothing for it; nil means no image is built.
	SeedBuilt func(*Node) bool
	// Admitted finds an admitted, unquarantined version of a capability in the registry;
	// nil means there is no registry to consult.
	// the string says why the registry's version is not used, when it is not.
	Admitted func(*Node) (*Admitted, string, error)
	// Quarantined maps quarantined digests to the reason. A node whose own digest or any
	// input's digest is quarantined is missing, and everything built from it is affected.
	Quarantined map[digest.Digest]string
}

// MakePlan decides each node's status.
func MakePlan(g *Graph, opt PlanOptions) (*Plan, error) {
	cfg := g.Config
	p := &Plan{
		FormatVersion: PlanFormatVersion,
		Project:       PlanProject{Name: cfg.Project.Name, Dir: cfg.Dir, Platform: cfg.Project.Platform, Registry: cfg.Project.Registry},
		Inputs:        cfg.Inputs,
	}
	if p.Inputs == nil {
		p.Inputs = []lang.InputRecord{}
	}
	// Nodes are numbered in address order (see index), and byNum[k] is node k's plan node:
	// maps keyed by address would be most of the time of planning.
	ix := g.ix
	byNum := make([]*PlanNode, len(ix.nodes))
	p.Nodes = make([]*PlanNode, len(ix.order))
	// The plan nodes and the views of steps depend on nothing else, and are most of the work
	// of a large plan. They are made in the order the nodes were made (see addNodes), each
	// put in its place in the topological order: made in that order, as they once were,
	// they read the nodes' data in no order at all.
	at := make([]int32, len(ix.nodes)) // node number -> position in the order, or -1
	for k := range at {
		at[k] = -1
	}
	for i, k := range ix.order {
		at[k] = int32(i)
	}
	parallel.Parts(len(ix.made), parallelMin/2, func(lo, hi int) {
		for _, k := range ix.made[lo:hi] {
			i := at[k]
			if i < 0 {
				continue // a graph that failed to compile
			}
			n := ix.nodes[k]
			pn := &PlanNode{Address: n.Address, Kind: n.Kind, Digest: n.Digest, Deps: n.Deps,
				Source: SourcePos{File: n.Range.Filename, Line: n.Range.Start.Line, Column: n.Range.Start.Column}}
			if pn.Deps == nil {
				pn.Deps = []string{}
			}
			if n.Kind == KindStep || n.Kind == KindCheck {
				pn.Step = g.stepView(n)
			}
			p.Nodes[i], byNum[k] = pn, pn
		}
	})
	// Passes that need no order go through the nodes in the order they were made, as above.
	for _, k := range ix.made {
		pn := byNum[k]
		if pn == nil {
			continue // a graph that failed to compile
		}
		switch pn.Kind {
		case KindStep, KindCheck:
			pn.Status = StatusRun // or cached: see the cache keys below
		case KindCapability:
			pn.Status = StatusMissing // settled by resolution below
		case KindSeed:
			pn.Status = StatusBuild
			if opt.SeedBuilt != nil && opt.SeedBuilt(ix.nodes[k]) {
				pn.Status = StatusCached
			}
		default:
			pn.Status = StatusBuild
		}
	}
	alternatives, err := g.resolveCapabilities(p, byNum, at, opt.Admitted)
	if err != nil {
		return nil, err
	}
	// A seed that only unchosen recipes (fallbacks, or those of a pinned capability) use is
	// not built unless apply falls back to one of them. Without alternatives every seed in
	// use is needed, and the nodes' dependencies need not be read (a cache miss each).
	if alternatives {
		g.markUnneededSeeds(byNum)
	}
	if opt.Lookup != nil {
		if err := g.markCached(p, byNum, opt.Lookup); err != nil {
			return nil, err
		}
	}
	quarantined := map[int32]bool{}
	if len(opt.Quarantined) > 0 {
		for i, pn := range p.Nodes {
			k := ix.order[i]
			if d, reason := ix.nodes[k].quarantinedInput(opt.Quarantined); d != "" {
				pn.Status, pn.Reason = StatusMissing, fmt.Sprintf("quarantined: %s (%s)", short(d), reason)
				quarantined[k] = true
			}
		}
	}
	for _, c := range p.Capabilities {
		if k := g.Nodes[c.Address].num; quarantined[k] {
			c.Status, c.Reason, c.Ready, c.Pinned = StatusMissing, byNum[k].Reason, false, nil
		}
	}
	// A node that needs a missing node is missing too; say which one, and call a node built
	// from a quarantined one affected.
	origin := map[int32]string{} // node number -> the quarantined node it is built from
	for k := range quarantined {
		origin[k] = ix.addrs[k]
	}
	for i, pn := range p.Nodes {
		k := ix.order[i]
		if pn.Status == StatusAlternative || pn.Kind == KindCapability || quarantined[k] {
			continue
		}
		for _, d := range ix.deps[k] {
			if byNum[d].Status == StatusMissing {
				pn.Status = StatusMissing
				pn.Reason = "needs " + ix.addrs[d] + ", which is missing"
				if o := origin[d]; o != "" {
					origin[k] = o
					pn.Reason = "affected: built from " + o + ", which is quarantined"
				}
				break
			}
		}
	}
	for _, k := range ix.made {
		pn := byNum[k]
		if pn == nil {
			continue
		}
		switch pn.Status {
		case StatusRun:
			p.Summary.Run++
		case StatusCached:
			if pn.Kind == KindStep || pn.Kind == KindCheck {
				p.Summary.Cached++
			}
		case StatusBuild:
			if pn.Kind == KindSeed || pn.Kind == KindRecipe {
				p.Summary.Build++
			}
		case StatusRegistry:
			p.Summary.Registry++
		case StatusMissing:
			if pn.Kind == KindCapability || pn.Kind == KindStep || pn.Kind == KindProduct {
				p.Summary.Missing++
			}
		}
	}
	// byNum is in address order, which is the digest's key order unless an address holds
	// a character that UTF-16 sorts differently. (A graph that failed to compile has no
	// order, and no plan nodes to write.)
	identity := func() ([]byte, error) { return p.identityJSONOf(byNum) }
	if len(ix.order) != len(ix.nodes) {
		identity = p.identityJSON
	}
	for _, a := range ix.addrs {
		if !digest.SortsBytewise(a) {
			identity = p.identityJSON
			break
		}
	}
	b, err := identity()
	if err != nil {
		return nil, err
	}
	p.Digest = digest.FromBytes(b)
	return p, nil
}

// markCached looks up the steps whose cache keys are known before anything runs, marks
// cached those found, and says of a step that waits for content built in this apply that
// it runs unless that content comes out as before.
func (g *Graph) markCached(p *Plan, byNum []*PlanNode, lookup lookupFunc) error {
	keys, err := g.plannedKeys(p, lookup)
	if err != nil {
		return err
	}
	p.keys = keys
	pinned := pinnedTrees(p)
	for _, k := range g.ix.made {
		pn := byNum[k]
		if pn == nil || pn.Status != StatusRun {
			continue
		}
		n := g.ix.nodes[k]
		if kd := keys[n.Address]; kd != nil {
			if kd.res != nil {
				pn.Status = StatusCached
			}
			continue
		}
		if w := waitsOn(n, keys, pinned); len(w) > 0 {
			pn.Reason = "runs unless its inputs come out unchanged: it mounts what " + strings.Join(w, ", ") + " makes in this apply"
		}
	}
	return nil
}

// markUnneededSeeds marks alternative the seeds that only alternative nodes use.
func (g *Graph) markUnneededSeeds(byNum []*PlanNode) {
	ix := g.ix
	seeds := make([]bool, len(ix.nodes)) // by number
	for _, s := range g.Config.Seeds {
		if n := g.Nodes[s.Address()]; n != nil {
			seeds[n.num] = true
		}
	}
	users := map[int32][]int32{} // seed number -> the numbers of the nodes that need it
	for _, k := range ix.made {
		for _, d := range ix.deps[k] {
			if seeds[d] {
				users[d] = append(users[d], k)
			}
		}
	}
	for d, us := range users {
		pn := byNum[d]
		if pn == nil || len(us) == 0 {
			continue
		}
		needed := false
		for _, u := range us {
			if byNum[u].Status != StatusAlternative {
				needed = true
				break
			}
		}
		if !needed {
			pn.Status, pn.Reason = StatusAlternative, "used only by recipes that are not chosen"
		}
	}
}

// identityJSON is digest.Canonical(p.identity()), written directly: the generic path
// (marshal, re-parse, transform) would cost more than the rest of planning.
func (p *Plan) identityJSON() ([]byte, error) {
	nodes := make(map[string]*PlanNode, len(p.Nodes)) // as identity: the last of an address counts
	for _, n := range p.Nodes {
		nodes[n.Address] = n
	}
	sorted := make([]*PlanNode, 0, len(nodes))
	for _, a := range digest.SortKeys(nodes) {
		sorted = append(sorted, nodes[a])
	}
	return p.identityJSONOf(sorted)
}

// identityJSONOf is identityJSON for the plan's nodes given in RFC 8785 key order, each
// address once.
func (p *Plan) identityJSONOf(sorted []*PlanNode) ([]byte, error) {
	e := digest.NewEncoder(64 + 96*len(p.Inputs) + 112*len(sorted))
	e.Open('{')
	e.Key("format")
	e.String(PlanFormatVersion)
	e.Key("inputs")
	if p.Inputs == nil {
		e.Null()
	} else {
		e.Open('[')
		for _, in := range p.Inputs {
			e.Open('{')
			e.Key("digest")
			e.String(string(in.Digest))
			e.Key("kind")
			e.String(in.Kind)
			e.Key("path")
			e.String(in.Path)
			e.Close('}')
		}
		e.Close(']')
	}
	e.Key("nodes")
	e.Open('{')
	for _, n := range sorted {
		e.Key(n.Address)
		e.String(string(n.Digest))
	}
	e.Close('}')
	e.Close('}')
	return e.Bytes()
}

// identity is what a saved plan commits to: every node's digest and every input read.
// Statuses are excluded: they depend on the cache, not on the configuration.
func (p *Plan) identity() any {
	nodes := make(map[string]digest.Digest, len(p.Nodes))
	for _, n := range p.Nodes {
		nodes[n.Address] = n.Digest
	}
	return map[string]any{"format": PlanFormatVersion, "nodes": nodes, "inputs": p.Inputs}
}

func (g *Graph) stepView(n *Node) *StepView {
	s := n.Step
	// What stepDefinition says, without its input references, which the view shows as
	// mounts instead.
	v := &StepView{Argv: nonNil(s.Run), Env: s.Env, Workdir: s.Workdir, Mounts: Mounts{arts: s.Mounts},
		Outputs: nonNil(s.Outputs), Limits: limitsOf(s.Limits), Network: s.Network}
	if s.Image != nil {
		v.Image = s.Image.Node
	}
	return v
}

// WriteJSON writes the plan as indented JSON.
func (p *Plan) WriteJSON(w io.Writer) error {
	return jsonindent.Encode(w, p, "  ")
}

// SavePlan writes the plan to path atomically.
func SavePlan(p *Plan, path string) error {
	tmp, err := os.CreateTemp(dirOf(path), ".plan-*")
	if err != nil {
		return fmt.Errorf("saving plan: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := p.WriteJSON(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("saving plan: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving plan: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving plan: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i+1]
	}
	return "."
}

// LoadPlan reads a plan file written by SavePlan.
func LoadPlan(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Plan
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s is not a Foundry plan file: %v", path, err)
	}
	if p.FormatVersion != PlanFormatVersion {
		return nil, fmt.Errorf("%s has plan format %q; this Foundry reads format %q", path, p.FormatVersion, PlanFormatVersion)
	}
	return &p, nil
}

// StaleReasons compares a saved plan against a fresh one and lists what changed since it was
// made: every node whose digest changed, appeared or disappeared, and every input that changed.
// An empty result means the saved plan still describes the configuration exactly.
func StaleReasons(saved, fresh *Plan) []string {
	if saved.Digest == fresh.Digest {
		return nil
	}
	var out []string
	old := map[string]digest.Digest{}
	for _, n := range saved.Nodes {
		old[n.Address] = n.Digest
	}
	oldIn := map[string]digest.Digest{}
	for _, in := range saved.Inputs {
		oldIn[in.Kind+" "+in.Path] = in.Digest
	}
	for _, in := range fresh.Inputs {
		k := in.Kind + " " + in.Path
		if d, ok := oldIn[k]; !ok {
			out = append(out, fmt.Sprintf("input %s is new", k))
		} else if d != in.Digest {
			out = append(out, fmt.Sprintf("input %s changed (%s → %s)", k, short(d), short(in.Digest)))
		}
		delete(oldIn, k)
	}
	for _, k := range sortedKeys(oldIn) {
		out = append(out, fmt.Sprintf("input %s is no longer read", k))
	}
	for _, n := range fresh.Nodes {
		if d, ok := old[n.Address]; !ok {
			out = append(out, n.Address+" is new")
		} else if d != n.Digest {
			out = append(out, fmt.Sprintf("%s changed (%s → %s)", n.Address, short(d), short(n.Digest)))
		}
		delete(old, n.Address)
	}
	for _, a := range sortedKeys(old) {
		out = append(out, a+" was removed")
	}
	if len(out) == 0 {
		out = append(out, "the plan digest differs")
	}
	return out
}

// short abbreviates a digest for people: "sha256:" and the first 12 hex digits.
func short(d digest.Digest) string {
	s := string(d)
	if len(s) > 19 {
		return s[:19]
	}
	return s
}

// quarantinedInput returns the first quarantined digest among the node's own digest and
// the digests of the content it reads, with the reason.
func (n *Node) quarantinedInput(q map[digest.Digest]string) (digest.Digest, string) {
	if r, ok := q[n.Digest]; ok {
		return n.Digest, r
	}
	for _, a := range n.artifacts(true) {
		if r, ok := q[a.Digest]; ok && a.Digest != "" {
			return a.Digest, r
		}
	}
	if n.Seed != nil {
		for _, l := range n.Seed.Layers {
			for _, f := range l.Files {
				if r, ok := q[f.Digest]; ok {
					return f.Digest, r
				}
			}
			if l.Dir != nil {
				if r, ok := q[l.Dir.Digest]; ok {
					return l.Dir.Digest, r
				}
			}
		}
	}
	return "", ""
}
