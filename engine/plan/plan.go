package plan

import (
	"encoding/json"
	"fmt"
	"github.com/foundry-build/foundry/engine/deliver"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/internal/jsonindent"
	"github.com/foundry-build/foundry/internal/parallel"
	"github.com/foundry-build/foundry/lang"
)

// FormatVersion is the version of the JSON plan format (spec/plan-json.md). It changes
// only when a field changes meaning or is removed; new fields keep the version.
const FormatVersion = "2"

// Node statuses in a plan.
const (
	StatusRun         = "run"         // a step that will execute
	StatusCached      = "cached"      // a step whose result is in the action cache, a seed whose image is built
	StatusBuild       = "build"       // a seed image, package or recipe that will be assembled
	StatusRegistry    = "registry"    // a capability pinned to an admitted version in the registry
	StatusMissing     = "missing"     // cannot be produced: see Reason
	StatusAlternative = "alternative" // a recipe that is not chosen, kept as a fallback
	// StatusReconstruct is a capability with no admitted version and no feasible recipe
	// that its reconstruct block will acquire at apply time: reachable, not ready.
	StatusReconstruct = "reconstruct"
	// StatusNeedsGrant is a product whose deliver destination no grant of the operator's
	// grants file allows, a source not stored that no network grant lets Foundry fetch, or
	// a fixed-output step that would run and reaches an endpoint no network grant allows:
	// apply refuses to run the plan, and fetches and writes nothing.
	StatusNeedsGrant = "needs-grant"
	// StatusFetch is a source that apply fetches into the content store (StatusCached: it
	// is stored already, and apply needs no network for it).
	StatusFetch = "fetch"
)

// Plan says, before anything runs, what each node of the graph will do and why.
type Plan struct {
	FormatVersion string             `json:"format_version"`
	Project       Project            `json:"project"`
	Digest        digest.Digest      `json:"plan_digest"`
	Inputs        []lang.InputRecord `json:"inputs"`
	Nodes         []*Node            `json:"nodes"`
	Capabilities  []*Capability      `json:"capabilities"`
	Summary       Summary            `json:"summary"`
	// Targets, when set, are the -target addresses the plan is restricted to: it holds
	// them and what they need. Replace are the -replace addresses: steps that run again
	// even when cached.
	Targets []string `json:"targets,omitempty"`
	Replace []string `json:"replace,omitempty"`
	// replaced are the steps and checks Replace names.
	replaced map[string]bool
	// keys are the cache keys known before the apply, and what they found (keys.go):
	// apply settles those steps from them without asking the cache again.
	keys map[string]*Keyed
	// keysHold is the hold of the workspace's apply lock the keys were found under; 0 when
	// it was not held, and apply looks them up again.
	keysHold uint64
	// grants are the operator's grants the plan was made under (Selection.Grants): apply
	// fetches sources under them.
	grants *lang.Grants
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

// Project identifies the project a plan was made for.
type Project struct {
	Name     string `json:"name"`
	Dir      string `json:"dir"`
	Platform string `json:"platform"`
	Registry string `json:"registry,omitempty"`
}

// Node is one node of the plan.
type Node struct {
	Address string         `json:"address"`
	Kind    graph.NodeKind `json:"kind"`
	Digest  digest.Digest  `json:"digest"`
	Deps    []string       `json:"deps"`
	Status  string         `json:"status"`
	Reason  string         `json:"reason,omitempty"`
	Source  SourcePos      `json:"source"`
	Step    *StepView      `json:"step,omitempty"`
	// Block is the address of the block with for_each or count that the node is an
	// instance of, with the instance's Key (for_each) or Index (count); Module is the
	// address of the module instance the node belongs to.
	Block  string `json:"block,omitempty"`
	Key    string `json:"key,omitempty"`
	Index  *int   `json:"index,omitempty"`
	Module string `json:"module,omitempty"`
	// Deliver is, for a product with a deliver block, where it goes and whether a grant
	// allows it.
	Deliver *Delivery `json:"deliver,omitempty"`
	// Egress is, for a fixed-output step, the endpoints it reaches and whether a grant
	// allows each (egress.go).
	Egress *Egress `json:"egress,omitempty"`
	// Fetch is, for a source, what pins it, where it comes from and whether a grant allows
	// fetching it (source.go).
	Fetch *Fetch `json:"fetch,omitempty"`
}

// Delivery is a product's destination as the plan shows it.
type Delivery struct {
	To      string `json:"to"`               // the destination, its path absolute: "dir:/srv/releases"
	Granted bool   `json:"granted"`          // a grant of the grants file allows it
	Grants  string `json:"grants,omitempty"` // the grants file consulted; omitted when there was none
	// Refused says why a destination a grant names cannot be delivered to: its path below
	// the granted directory passes a symbolic link or an earlier release
	// (deliver.CheckBeneath). Granted is false then, and no grant would change it.
	Refused string `json:"refused,omitempty"`
}

// placeOf fills a plan node's Block, Key, Index and Module from its graph node.
func placeOf(pn *Node, n *graph.Node) {
	var scope, kind string
	var in *lang.Instance
	switch {
	case n.Step != nil:
		scope, kind, in = n.Step.Scope, n.Step.Kind, n.Step.Instance
	case n.Seed != nil:
		scope, kind, in = n.Seed.Scope, "seed", n.Seed.Instance
	default:
		return
	}
	if strings.HasPrefix(scope, "module.") {
		pn.Module = scope
	}
	if in == nil {
		return
	}
	pn.Block = kind + "." + in.Block
	if scope != "" {
		pn.Block = scope + "." + pn.Block
	}
	if in.Count {
		i, _ := strconv.Atoi(in.Key)
		pn.Index = &i
	} else {
		pn.Key = in.Key
	}
}

// SourcePos is where a node was declared.
type SourcePos struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// StepView is what a step will run, for people and tools reading a plan.
type StepView struct {
	Image   string                 `json:"image"`
	Argv    []string               `json:"argv"`
	Env     map[string]string      `json:"env"`
	Workdir string                 `json:"workdir"`
	Mounts  Mounts                 `json:"mounts"`
	Outputs []string               `json:"outputs"`
	Limits  graph.LimitsDefinition `json:"limits"`
	Network string                 `json:"network"`
	// Egress and OutputDigest are a fixed-output step's (network egress).
	Egress       []string `json:"egress,omitempty"`
	OutputDigest string   `json:"output_digest,omitempty"`
	// Caches are the cache volumes it mounts (spec/language.md §9b) by sandbox path; omitted
	// when it mounts none. They are in no action digest: what a cache holds is not an input.
	Caches map[string]CacheView `json:"caches,omitempty"`
}

// CacheView is one cache volume a step mounts, as a plan shows it.
type CacheView struct {
	Name    string `json:"name"`
	Sharing string `json:"sharing"` // shared, locked or private
	// MaxSize is the bound given in bytes; omitted for the default (spec/language.md §9b).
	MaxSize int64 `json:"max_size,omitempty"`
}

// Mounts are a step's mounts as a plan shows them: each sandbox path with a description of
// what is mounted there (step.NAME.output["/out/o"], project_dir("src"), ...), written in
// JSON as an object of path → description.
//
// A plan Make makes holds the step's artifacts and describes them when asked (Text,
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

// Capability is how a required capability will be resolved (see Make and resolve.go).
type Capability struct {
	Address        string          `json:"address"`
	ContractDigest digest.Digest   `json:"contract_digest"`
	Status         string          `json:"status"` // registry, build or missing
	Recipe         string          `json:"recipe,omitempty"`
	Pinned         *admit.Admitted `json:"pinned,omitempty"` // status registry: the admitted version
	Reason         string          `json:"reason,omitempty"`
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
	// Reconstruct is set when the capability has a reconstruct block: its builder and
	// budget. It is what apply runs when the status is reconstruct.
	Reconstruct *Reconstruct `json:"reconstruct,omitempty"`
}

// Reconstruct is a capability's reconstruct block as the plan shows it.
type Reconstruct struct {
	// Source is where proposals come from: "builder" (the command builder), or "proposals"
	// (sent from outside: foundry jobs propose, or the MCP propose tool).
	Source     string   `json:"source"`
	Builder    string   `json:"builder"` // the address its rounds are recorded under
	Image      string   `json:"image"`   // the builder's seed
	Argv       []string `json:"argv"`
	Candidates int      `json:"candidates"` // the budget's candidates (also in Budget), as plan format 2 had it
	Budget     Budget   `json:"budget"`
	// Build is the build step each proposal goes through when the block has one: the
	// candidate is then packaged from its outputs, not the proposal's files.
	Build *ReconstructBuild `json:"build,omitempty"`
	// Job is the job apply opens or joins for it, when its status is reconstruct; what an
	// earlier apply recorded of it is ForWorkspace's to say, from the state database.
	Job *JobView `json:"job,omitempty"`
}

// ReconstructBuild is a reconstruct block's build step as the plan shows it.
type ReconstructBuild struct {
	Address string   `json:"address"` // what its runs are recorded under
	Image   string   `json:"image"`   // its seed
	Argv    []string `json:"argv"`
	Outputs []string `json:"outputs"` // what the package takes the candidate's files from
}

// Budget is a reconstruction job's budget over all its rounds.
type Budget struct {
	Candidates   int     `json:"candidates"`
	Probes       int     `json:"probes"`
	Wall         string  `json:"wall"` // a Go duration, "10m0s"
	ScratchBytes int64   `json:"scratch_bytes"`
	Spend        float64 `json:"spend"`
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
	// Reconstruct counts the capabilities to reconstruct.
	Reconstruct int `json:"reconstruct,omitempty"`
	// Exhausted counts those of them whose job is exhausted with its budget still spent:
	// apply cannot go on with them until the budget is raised (their job's next says how).
	Exhausted int `json:"exhausted,omitempty"`
	// NeedsGrant counts the products whose destination no grant allows, the sources not
	// stored whose hosts no grant allows, and the steps that reach an endpoint none allows.
	NeedsGrant int `json:"needs_grant,omitempty"`
	// Fetch counts the sources apply fetches.
	Fetch int `json:"fetch,omitempty"`
}

// Options are what a plan consults beyond the configuration.
type Options struct {
	// Lookup looks cache keys up in the action cache (Cache.LookupMany); nil means nothing
	// is cached. See keys.go.
	Lookup func(keys []digest.Digest) (map[digest.Digest]cache.Entry, error)
	// SeedBuilt reports whether a seed's image is built (seed.Builder.Built of its digest),
	// so that apply builds nothing for it; nil means no image is built.
	SeedBuilt func(*graph.Node) bool
	// Admitted finds an admitted, unquarantined version of a capability in the registry;
	// nil means there is no registry to consult.
	// the string says why the registry's version is not used, when it is not.
	Admitted func(*graph.Node) (*admit.Admitted, string, error)
	// Quarantined maps quarantined digests to the reason. A node whose own digest or any
	// input's digest is quarantined is missing, and everything built from it is affected.
	Quarantined map[digest.Digest]string
	Selection
}

// Selection is the part of the graph a plan is for: Targets restricts it to these nodes
// (or blocks, or modules) and what they need, none meaning the whole graph; Replace names
// steps to run again even when cached.
type Selection struct {
	Targets, Replace []string
	// Grants are the operator's grants (lang.LoadGrants), which the plan checks each
	// product's destination against; nil grants nothing. They are the operator's choice,
	// like the rest of the selection, and not part of the plan digest.
	Grants *lang.Grants
}

// Make decides each node's status.
func Make(g *graph.Graph, opt Options) (*Plan, error) {
	cfg := g.Config
	p := &Plan{
		FormatVersion: FormatVersion,
		Project:       Project{Name: cfg.Project.Name, Dir: cfg.Dir, Platform: cfg.Project.Platform, Registry: cfg.Project.Registry},
		Inputs:        cfg.Inputs,
		grants:        opt.Grants,
	}
	if p.Inputs == nil {
		p.Inputs = []lang.InputRecord{}
	}
	var keep map[string]bool
	if len(opt.Targets) > 0 {
		var err error
		if keep, err = Needed(g, opt.Targets); err != nil {
			return nil, err
		}
		p.Targets = sortedUnique(opt.Targets)
	}
	if len(opt.Replace) > 0 {
		var err error
		if p.replaced, err = replaced(g, opt.Replace); err != nil {
			return nil, err
		}
		p.Replace = sortedUnique(opt.Replace)
	}
	// Nodes are numbered in address order (graph.Index), and byNum[k] is node k's plan
	// node: maps keyed by address would be most of the time of planning.
	ix := g.Index()
	byNum := make([]*Node, len(ix.Nodes))
	p.Nodes = make([]*Node, len(ix.Order))
	// The plan nodes and the views of steps depend on nothing else, and are most of the work
	// of a large plan. They are made in the order the nodes were made (Index.Made), each
	// put in its place in the topological order: made in that order, as they once were,
	// they read the nodes' data in no order at all.
	at := make([]int32, len(ix.Nodes)) // node number -> position in the order, or -1
	for k := range at {
		at[k] = -1
	}
	for i, k := range ix.Order {
		at[k] = int32(i)
	}
	parallel.Parts(len(ix.Made), graph.ParallelMin/2, func(lo, hi int) {
		for _, k := range ix.Made[lo:hi] {
			i := at[k]
			if i < 0 {
				continue // a graph that failed to compile
			}
			n := ix.Nodes[k]
			pn := &Node{Address: n.Address, Kind: n.Kind, Digest: n.Digest, Deps: n.Deps,
				Source: SourcePos{File: n.Range.Filename, Line: n.Range.Start.Line, Column: n.Range.Start.Column}}
			placeOf(pn, n)
			if pn.Deps == nil {
				pn.Deps = []string{}
			}
			if n.Kind == graph.KindStep || n.Kind == graph.KindCheck {
				pn.Step = StepViewOf(n)
			}
			p.Nodes[i], byNum[k] = pn, pn
		}
	})
	// Passes that need no order go through the nodes in the order they were made, as above.
	for _, k := range ix.Made {
		pn := byNum[k]
		if pn == nil {
			continue // a graph that failed to compile
		}
		switch pn.Kind {
		case graph.KindStep, graph.KindCheck:
			pn.Status = StatusRun // or cached: see the cache keys below
		case graph.KindCapability:
			pn.Status = StatusMissing // settled by resolution below
		case graph.KindSeed:
			pn.Status = StatusBuild
			if opt.SeedBuilt != nil && opt.SeedBuilt(ix.Nodes[k]) {
				pn.Status = StatusCached
			}
		case graph.KindSource:
			pn.Status = StatusFetch // or cached, or needs-grant: see markSources
		default:
			pn.Status = StatusBuild
		}
	}
	unchosen, err := resolveCapabilities(g, p, byNum, at, opt.Admitted)
	if err != nil {
		return nil, err
	}
	// A seed that only unchosen recipes (fallbacks, or those of a pinned capability) or
	// idle reconstruct blocks use is not built unless apply falls back to one of them.
	// Without any every seed in use is needed, and the nodes' dependencies need not be read
	// (a cache miss each).
	if unchosen {
		markUnneededSeeds(g, byNum)
	}
	// Sources before the cache keys: a step mounting a source stored is keyed by its tree.
	if err := markSources(g, byNum, opt); err != nil {
		return nil, err
	}
	if opt.Lookup != nil {
		if err := markCached(g, p, byNum, opt.Lookup); err != nil {
			return nil, err
		}
	}
	quarantined := map[int32]bool{}
	if len(opt.Quarantined) > 0 {
		for i, pn := range p.Nodes {
			k := ix.Order[i]
			if d, reason := quarantinedInput(ix.Nodes[k], opt.Quarantined); d != "" {
				pn.Status, pn.Reason = StatusMissing, fmt.Sprintf("quarantined: %s (%s)", d.Short(), reason)
				quarantined[k] = true
			}
		}
	}
	for _, c := range p.Capabilities {
		if k := g.Nodes[c.Address].Num(); quarantined[k] {
			c.Status, c.Reason, c.Ready, c.Pinned = StatusMissing, byNum[k].Reason, false, nil
		}
	}
	markGrants(g, byNum, opt.Grants)
	markEgress(g, byNum, opt.Grants)
	// A node that needs a missing node is missing too; say which one, and call a node built
	// from a quarantined one affected.
	origin := map[int32]string{} // node number -> the quarantined node it is built from
	for k := range quarantined {
		origin[k] = ix.Addrs[k]
	}
	for i, pn := range p.Nodes {
		k := ix.Order[i]
		if pn.Status == StatusAlternative || pn.Kind == graph.KindCapability || quarantined[k] {
			continue
		}
		for _, d := range ix.Deps[k] {
			if byNum[d].Status == StatusMissing {
				pn.Status = StatusMissing
				pn.Reason = "needs " + ix.Addrs[d] + ", which is missing"
				if o := origin[d]; o != "" {
					origin[k] = o
					pn.Reason = "affected: built from " + o + ", which is quarantined"
				}
				break
			}
		}
	}
	if keep != nil {
		// A partial plan: the nodes the targets need, and nothing else.
		p.Nodes = slices.DeleteFunc(p.Nodes, func(n *Node) bool { return !keep[n.Address] })
		p.Capabilities = slices.DeleteFunc(p.Capabilities, func(c *Capability) bool { return !keep[c.Address] })
		for k, pn := range byNum {
			if pn != nil && !keep[pn.Address] {
				byNum[k] = nil
			}
		}
	}
	for _, k := range ix.Made {
		pn := byNum[k]
		if pn == nil {
			continue
		}
		switch pn.Status {
		case StatusRun:
			p.Summary.Run++
		case StatusCached:
			if pn.Kind == graph.KindStep || pn.Kind == graph.KindCheck {
				p.Summary.Cached++
			}
		case StatusBuild:
			if pn.Kind == graph.KindSeed || pn.Kind == graph.KindRecipe {
				p.Summary.Build++
			}
		case StatusRegistry:
			p.Summary.Registry++
		case StatusReconstruct:
			p.Summary.Reconstruct++
		case StatusNeedsGrant:
			p.Summary.NeedsGrant++
		case StatusFetch:
			p.Summary.Fetch++
		case StatusMissing:
			if pn.Kind == graph.KindCapability || pn.Kind == graph.KindStep || pn.Kind == graph.KindProduct {
				p.Summary.Missing++
			}
		}
	}
	// byNum is in address order, which is the digest's key order unless an address holds
	// a character that UTF-16 sorts differently. (A graph that failed to compile has no
	// order, and no plan nodes to write.)
	identity := func() ([]byte, error) { return p.identityJSONOf(byNum) }
	if len(ix.Order) != len(ix.Nodes) || keep != nil {
		identity = p.identityJSON
	}
	for _, a := range ix.Addrs {
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

// markGrants shows each product's destination, and marks needs-grant a product whose
// destination no grant allows: the one place a delivery is checked against the grants.
func markGrants(g *graph.Graph, byNum []*Node, grants *lang.Grants) {
	for _, p := range g.Config.Products {
		n := g.Nodes["product."+p.Name]
		if n == nil || p.Deliver == nil || byNum[n.Num()] == nil {
			continue
		}
		pn := byNum[n.Num()]
		root, ok := grants.DeliveryGrant(p.Deliver.Dest)
		d := &Delivery{To: p.Deliver.Dest.String(), Granted: ok}
		if grants != nil {
			d.Grants = grants.File
		}
		if ok && root.Scheme != lang.SchemeOCI {
			// A grant covers its directory and what is below it, reached without following
			// links and never inside an earlier release: what the delivery will refuse.
			if err := deliver.CheckBeneath(root.Path, p.Deliver.Dest.Path); err != nil {
				d.Granted, d.Refused = false, err.Error()
			}
		}
		pn.Deliver = d
		switch {
		case d.Granted || pn.Status != StatusBuild:
		case d.Refused != "":
			pn.Status = StatusNeedsGrant
			pn.Reason = fmt.Sprintf("no grant can allow delivering to %s: %s", d.To, d.Refused)
		default:
			pn.Status = StatusNeedsGrant
			pn.Reason = fmt.Sprintf("no grant allows delivering to %s: add it to a grant %q in the operator's grants file", d.To, lang.DeliverGrantKind)
		}
	}
}

// Grants are the operator's grants the plan was made under; nil (no grants) for a plan read
// from a file.
func (p *Plan) Grants() *lang.Grants { return p.grants }

// NeedsGrant returns the nodes of the plan that need a grant: products whose destination
// no grant allows, sources not stored whose hosts no grant allows, fixed-output steps that
// reach an endpoint none allows.
func (p *Plan) NeedsGrant() []*Node {
	var out []*Node
	for _, n := range p.Nodes {
		if n.Status == StatusNeedsGrant {
			out = append(out, n)
		}
	}
	return out
}

// markCached looks up the steps whose cache keys are known before anything runs, marks
// cached those found, and says of a step that waits for content built in this apply that
// it runs unless that content comes out as before.
func markCached(g *graph.Graph, p *Plan, byNum []*Node, lookup lookupFunc) error {
	keys, err := plannedKeys(g, p, lookup)
	if err != nil {
		return err
	}
	p.keys = keys
	pinned, fetched := pinnedTrees(p), sourceTrees(p)
	ix := g.Index()
	for _, k := range ix.Made {
		pn := byNum[k]
		if pn == nil || pn.Status != StatusRun {
			continue
		}
		n := ix.Nodes[k]
		if p.replaced[n.Address] {
			pn.Reason = "replaced: runs again although its result may be cached (-replace)"
			continue
		}
		if kd := keys[n.Address]; kd != nil {
			if kd.Result != nil {
				pn.Status = StatusCached
			}
			continue
		}
		if w := waitsOn(n, keys, pinned, fetched); len(w) > 0 {
			pn.Reason = "runs unless its inputs come out unchanged: it mounts what " + strings.Join(w, ", ") + " makes in this apply"
		}
	}
	return nil
}

// markUnneededSeeds marks alternative the seeds that only alternative nodes use.
func markUnneededSeeds(g *graph.Graph, byNum []*Node) {
	ix := g.Index()
	seeds := make([]bool, len(ix.Nodes)) // by number
	for _, s := range g.Config.Seeds {
		if n := g.Nodes[s.Address()]; n != nil {
			seeds[n.Num()] = true
		}
	}
	users := map[int32][]int32{} // seed number -> the numbers of the nodes that need it
	for _, k := range ix.Made {
		for _, d := range ix.Deps[k] {
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
			if byNum[u].Kind == graph.KindCapability && byNum[u].Status != StatusReconstruct {
				continue // a capability needs seeds only for its reconstruction
			}
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
	nodes := make(map[string]*Node, len(p.Nodes)) // as identity: the last of an address counts
	for _, n := range p.Nodes {
		nodes[n.Address] = n
	}
	sorted := make([]*Node, 0, len(nodes))
	for _, a := range digest.SortKeys(nodes) {
		sorted = append(sorted, nodes[a])
	}
	return p.identityJSONOf(sorted)
}

// identityJSONOf is identityJSON for the plan's nodes given in RFC 8785 key order, each
// address once.
func (p *Plan) identityJSONOf(sorted []*Node) ([]byte, error) {
	e := digest.NewEncoder(64 + 96*len(p.Inputs) + 112*len(sorted))
	e.Open('{')
	e.Key("format")
	e.String(FormatVersion)
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
	return map[string]any{"format": FormatVersion, "nodes": nodes, "inputs": p.Inputs}
}

// StepViewOf is the view of n, a step, that a plan shows.
func StepViewOf(n *graph.Node) *StepView {
	s := n.Step
	// What the step's definition says (graph.StepFields), without its input references,
	// which the view shows as mounts instead.
	d := graph.StepFields(n)
	v := &StepView{Argv: d.Argv, Env: d.Env, Workdir: d.Workdir, Mounts: Mounts{arts: s.Mounts},
		Outputs: d.Outputs, Limits: d.Limits, Network: d.Network, Egress: d.Egress, OutputDigest: d.OutputDigest}
	if s.Image != nil {
		v.Image = s.Image.Node
	}
	if len(s.Caches) > 0 {
		v.Caches = make(map[string]CacheView, len(s.Caches))
		for target, c := range s.Caches {
			v.Caches[target] = CacheView{Name: c.Name, Sharing: c.Sharing, MaxSize: c.MaxSize}
		}
	}
	return v
}

// WriteJSON writes the plan as indented JSON.
func (p *Plan) WriteJSON(w io.Writer) error {
	return jsonindent.Encode(w, p, "  ")
}

// Save writes the plan to path atomically.
func Save(p *Plan, path string) error {
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

// Load reads a plan file written by Save.
func Load(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Plan
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s is not a Foundry plan file: %v", path, err)
	}
	if p.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%s has plan format %q; this Foundry reads format %q", path, p.FormatVersion, FormatVersion)
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
			out = append(out, fmt.Sprintf("input %s changed (%s → %s)", k, d.Short(), in.Digest.Short()))
		}
		delete(oldIn, k)
	}
	for _, k := range slices.Sorted(maps.Keys(oldIn)) {
		out = append(out, fmt.Sprintf("input %s is no longer read", k))
	}
	for _, n := range fresh.Nodes {
		if d, ok := old[n.Address]; !ok {
			out = append(out, n.Address+" is new")
		} else if d != n.Digest {
			out = append(out, fmt.Sprintf("%s changed (%s → %s)", n.Address, d.Short(), n.Digest.Short()))
		}
		delete(old, n.Address)
	}
	for _, a := range slices.Sorted(maps.Keys(old)) {
		out = append(out, a+" was removed")
	}
	if len(out) == 0 {
		out = append(out, "the plan digest differs")
	}
	return out
}

// quarantinedInput returns the first quarantined digest among the node's own digest and
// the digests of the content it reads, with the reason.
func quarantinedInput(n *graph.Node, q map[digest.Digest]string) (digest.Digest, string) {
	if r, ok := q[n.Digest]; ok {
		return n.Digest, r
	}
	for _, a := range n.Artifacts(true) {
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
