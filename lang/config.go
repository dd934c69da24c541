// Package lang turns a directory of Foundry HCL files into a typed, validated configuration.
//
// It parses every *.hcl file of one directory, evaluates expressions (variables, locals,
// functions) and resolves references between blocks. References (seed.x, capability.x,
// step.y.output["/out/z"]) evaluate to Artifact values: opaque handles that the engine turns
// into graph edges and content digests. lang reads files only inside the project directory,
// except through host_file/host_dir, whose every use is recorded in Config.HostInputs. lang
// never executes anything and never writes.
//
// Files are parsed by hclsyntax and expressions evaluated by hcl's own evaluator, under the
// Budget the caller sets (Options.Budget): a configuration cannot make a load take more
// values, bytes or time than the operator allows, and cannot raise the budget.
//
// Diagnostics are hcl.Diagnostics from parsing to planning; each carries a source range.
package lang

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/foundry-build/foundry/digest"
)

// Config is a whole project, decoded and validated.
type Config struct {
	Dir     string               // absolute project directory
	Files   map[string]*hcl.File // parsed sources by file name, for rendering diagnostics
	Project *Project

	Variables map[string]*Variable
	Locals    map[string]cty.Value
	Seeds     map[string]*Seed
	// Sources hold the top-level ones by name, and those of modules by address
	// (module.M.source.NAME), as Seeds do.
	Sources      map[string]*Source
	Capabilities map[string]*Capability
	Recipes      map[string]*Recipe
	// Seeds and Steps hold the top-level ones by name, and those of modules by address
	// (module.M.seed.NAME, module.M.step.NAME).
	Steps    map[string]*Step // top-level steps
	Products map[string]*Product

	// Inputs lists every file or directory that evaluation read, project and host alike,
	// with its digest: a saved plan is stale when any of them changes.
	Inputs []InputRecord
	// Globs lists every glob that evaluation expanded (fileset, suite cases) with the digest
	// of its matches. They are not plan inputs (a saved plan notices a change through the
	// nodes and suites that use them), but a cache of the load must notice a new match.
	Globs []GlobRecord

	// EvalUsage is what evaluating the configuration took of its budget (Options.Budget).
	EvalUsage Usage

	// stepOrder is Steps in declaration order, when the configuration came from Load (see
	// EachStep).
	stepOrder []*Step
}

// InputRecord is one file or directory read while evaluating the configuration.
type InputRecord struct {
	Kind   string        `json:"kind"` // project_file | project_dir | host_file | host_dir
	Path   string        `json:"path"` // project-relative (slash) or absolute host path
	Digest digest.Digest `json:"digest"`
	// Mode is a host_file's mode as its artifact took it (0755 or 0644), which the digest
	// of its content does not cover. It is not part of a plan's inputs: the definition of
	// the seed that packs the file is.
	Mode uint32 `json:"-"`
}

// GlobRecord is one glob expanded while evaluating the configuration.
type GlobRecord struct {
	Base    string        // project-relative directory
	Pattern string        // as written
	Suite   string        // the suite input it lists the cases of, "" for a fileset
	Digest  digest.Digest // of the sorted matches, relative to Base
}

// Project is the optional project block.
type Project struct {
	Name     string
	Brief    string
	Registry string
	Platform string // default target platform of steps, "linux/amd64" unless set
	// KeepPins keeps pinning an admitted version that passed an earlier sealed suite than
	// the current one, instead of evaluating it again on the current suite.
	KeepPins bool
	// MinUndisclosedSealed is how many sealed cases never shown to a builder a capability
	// must keep for a candidate to be promoted (at least 1; 0 when not set).
	MinUndisclosedSealed int
	// ReconstructDeadline and ReconstructSpend are the ceiling above every reconstruction
	// job: the wall time all of them may take in one apply (DefaultReconstructDeadline when
	// 0), and what they may spend together, over every apply.
	ReconstructDeadline time.Duration
	ReconstructSpend    float64
	// ReconstructDepth bounds how deep reconstructions nest (a builder mounting a
	// capability that is reconstructed too is one level more); DefaultReconstructDepth
	// when 0.
	ReconstructDepth int
	DeclRange        hcl.Range
}

// Variable is a variable block and the value it resolved to.
type Variable struct {
	Name        string
	Description string
	Type        cty.Type
	Default     cty.Value
	Value       cty.Value
	DeclRange   hcl.Range
}

// Seed is a provisioned input: an image built from host files or imported, never built by steps.
type Seed struct {
	Name      string
	Scope     string    // "" at the project's top level, module.M (…) in a module
	Instance  *Instance // see Step.Instance
	Layers    []*SeedLayer
	Image     string    // registry reference pinned by digest, for imported seeds
	OCILayout *Artifact // an OCI image layout directory
	Tarball   *Artifact // an OCI or docker-save image tarball
	Env       map[string]string
	User      string
	Workdir   string
	Platform  string
	DeclRange hcl.Range
}

// SeedLayer is one layer of a seed: all layers of another seed, files, or a directory tree.
type SeedLayer struct {
	From  *Artifact            // kind ArtifactSeed
	Files map[string]*Artifact // image path → host_file or project file
	Dir   *Artifact            // a directory copied under At
	At    string
	// Symlinks are image path → link target, added to a files layer (busybox applets, say).
	Symlinks map[string]string
	Range    hcl.Range
}

// Capability is a contract: what a built tool must do, not how it is built.
type Capability struct {
	Name        string
	Summary     string
	Target      string
	Effects     []string
	Interface   *Interface
	Equivalence string // bytes | json | lines | numeric
	Tolerance   *Tolerance
	// Unordered makes every array of the output an unordered collection (a multiset) under
	// the json and numeric equivalences (spec/capability-cases.md §5.5).
	Unordered bool
	Suites    map[string]*Suite
	// Reconstruct, when set, says how to acquire the capability when no admitted version
	// and no feasible recipe provides it (spec/capability.md §5a). Not in the contract.
	Reconstruct *Reconstruct
	DeclRange   hcl.Range
}

// Reconstruct is a capability's reconstruct block: a builder, an untrusted program run as
// a sandboxed step, proposes a candidate per round under /out; a proposal becomes a
// candidate one of two ways: the package lays the proposal's files on a base seed, as a
// recipe's package does, or, with a build block, a build step runs over the proposal
// (mounted read-only at ProposalDir) and the package lays the build's outputs instead; the
// budget bounds the rounds.
type Reconstruct struct {
	// Builder is decoded as a step (image, run, env, mounts, outputs, limits; no network).
	// It may mount project directories, inline files and capabilities, and never /job,
	// where apply mounts the job. Nil when Proposals is set.
	Builder *Step
	// Proposals, set instead of a builder, says the proposals come from outside (a model
	// over MCP, or a person with foundry jobs propose): the files each holds.
	Proposals *Proposals
	// Build, when set, is a step run over each proposal, decoded as the builder is (image,
	// run, env, mounts, outputs, limits; no network): it reads the proposal's files
	// read-only under ProposalDir and never /job. Its outputs form the candidate.
	Build *Step
	// Package.Files name the proposal's files (kind ArtifactStepOutput, Node the builder's
	// address, BuilderAddress, Path a file the proposal holds) or, with a build, the
	// build's outputs (Node BuildAddress, Path a declared output of the build).
	Package *Package
	Budget  ReconstructBudget
	// References are the reference dossier: pinned implementations the capability is
	// reconstructed from, by name (spec/capability.md §5b). Nil when it names none.
	References map[string]*Reference
	Range      hcl.Range
}

// Reference is one entry of a reconstruct block's reference dossier: a pinned
// implementation (a seed, whose bytes are pinned by content), how it is run, where it came
// from and under what licence, and the rights the operator grants over it, each a separate
// decision: Inspect (a builder may read its bytes: its image is mounted read-only at
// ReferenceDir/NAME in the builder's sandbox), Observe (its outputs may serve as expected
// outputs of generated cases, expect = reference.NAME, and a builder may ask it as an
// oracle: requests it writes under OracleDir/NAME are run on the reference between rounds,
// each charged as a probe, and the answers are in the next round's /job), and
// Distribute (its bytes may appear in a candidate; when false, a candidate holding a file
// byte-identical to one of the reference's is refused).
type Reference struct {
	Name       string
	Image      *Artifact // kind ArtifactSeed
	Entrypoint []string
	Licence    string
	Origin     string
	Inspect    bool
	Observe    bool
	Distribute bool
	Range      hcl.Range
}

// ReferenceDir is where a builder finds the references it may inspect, each at
// ReferenceDir/NAME, read-only.
const ReferenceDir = "/reference"

// OracleDir is where a builder of a capability with a reference dossier writes the
// requests it asks the references as an oracle: OracleDir/NAME/ID.json, each holding one
// input (a JSON value) for reference NAME, which must allow observe. It is not part of the
// proposal (spec/capability.md §5b).
const OracleDir = "/out/oracle"

// Proposals is a reconstruct block's proposals block: each round waits for a proposal sent
// from outside, a file tree holding Outputs.
type Proposals struct {
	Outputs []string // paths such as "/out/tool", which the package's files name
	Range   hcl.Range
}

// ProposalOutputs are the paths a proposal of rc holds: its builder's declared outputs,
// or its proposals block's.
func (rc *Reconstruct) ProposalOutputs() []string {
	switch {
	case rc.Builder != nil:
		return rc.Builder.Outputs
	case rc.Proposals != nil:
		return rc.Proposals.Outputs
	}
	return nil
}

// ReconstructBudget bounds a reconstruction job, over every round and every apply that
// works on it (spec/capability.md §5a): what is spent stays spent.
type ReconstructBudget struct {
	Candidates int           // proposals at most; DefaultBudget's when not written
	Probes     int           // dev and repair case runs at most
	Wall       time.Duration // wall time of the job's rounds together
	Scratch    int64         // bytes one proposal may write
	Spend      float64       // what proposals may cost together (a model's, in the operator's unit); a command builder costs 0
}

// DefaultReconstructBudget is the budget of a reconstruct block, field by field where its
// budget block does not say.
var DefaultReconstructBudget = ReconstructBudget{Candidates: 3, Probes: 20, Wall: 10 * time.Minute, Scratch: 512 << 20, Spend: 0}

// DefaultReconstructDeadline is the project's ceiling on the wall time of all its
// reconstruction jobs in one apply, unless reconstruct_deadline says otherwise.
const DefaultReconstructDeadline = time.Hour

// DefaultReconstructDepth is how deep reconstructions may nest unless the project's
// reconstruct_depth says otherwise.
const DefaultReconstructDepth = 2

// BuilderAddress is the address of capability name's builder: what its rounds are
// recorded under, and the node its package's files name.
func BuilderAddress(capability string) string {
	return "capability." + capability + ".reconstruct.builder"
}

// BuildAddress is the address of capability name's build step, which its package's files
// name when it has one.
func BuildAddress(capability string) string {
	return "capability." + capability + ".reconstruct.build"
}

// Interface says how a capability is invoked.
type Interface struct {
	Kind         string // cli | service
	Entrypoint   []string
	InputSchema  string         // canonical JSON of a Draft 2020-12 schema, or empty
	OutputSchema string         // likewise
	Errors       map[string]int // error name → exit code (cli) or HTTP status (service)
	Port         int            // service: the TCP port it listens on inside its sandbox
	Ready        string         // service: an HTTP path that answers 2xx once it is ready; "" = the port accepts
	Range        hcl.Range
}

// Tolerance qualifies the numeric equivalence.
type Tolerance struct {
	Absolute float64
	Relative float64
	NaNEqual bool // NaN equals NaN when true
}

// Suite is a set of case files for a capability.
type Suite struct {
	Name    string   // dev | repair | sealed
	Pattern string   // project-relative glob as written; "" when the suite is only generated
	Files   []string // matched project-relative paths, sorted
	Sealed  bool
	// Generate, when set, adds generated cases to the suite (spec/capability.md §6b).
	Generate *Generate
	// Expect, for a service capability's suite, names the reference whose trace of effects
	// on each case's requests the candidate's must match (spec/capability.md §5b): a
	// differential service suite, whose requests name no expectation.
	Expect      string
	ExpectRange hcl.Range
	Range       hcl.Range
}

// Reference names the reference whose outputs (a generated cli suite) or trace of effects
// (a service suite) the suite expects; "" when none.
func (s *Suite) Reference() string {
	if s.Expect != "" {
		return s.Expect
	}
	if s.Generate != nil {
		return s.Generate.Expect
	}
	return ""
}

// Generate is a suite's generate block: Count inputs made from the contract's input
// schema by the built-in generators (engine/generate). A dev or repair suite names its
// Seed, which builders know; a sealed suite has none: the evaluator draws a fresh secret
// seed for each candidate.
type Generate struct {
	Count int
	Seed  string
	// Expect, when set, names the reference (of the capability's reconstruct block) whose
	// output on each generated input is the case's expected output: a differential suite.
	// "" expects only what the contract says of every valid input.
	Expect      string
	ExpectRange hcl.Range
	Range       hcl.Range
}

// MaxGenerated bounds a generate block's count.
const MaxGenerated = 10000

// Recipe is one way to provide a capability.
type Recipe struct {
	Name     string
	Provides *Artifact // kind ArtifactCapability
	Cost     int64
	// Reproducible requires, before a candidate it builds is evaluated, that each of its
	// steps be rebuilt in a fresh sandbox with empty caches and make the same bytes (as
	// apply -rebuild does; spec/language.md §8).
	Reproducible bool
	Steps        map[string]*Step
	Package      *Package
	DeclRange    hcl.Range
}

// Package assembles a recipe's outputs into the capability artifact.
type Package struct {
	Base  *Artifact // a seed, or nil for a files-only artifact
	Files map[string]*Artifact
	Range hcl.Range
}

// Address is the seed's node address: seed.NAME, or under a module module.M.seed.NAME.
func (s *Seed) Address() string {
	if s.Scope == "" {
		return "seed." + s.Name
	}
	return s.Scope + ".seed." + s.Name
}

// Step is one sandboxed action.
type Step struct {
	Name        string
	Kind        string // "step", or "check" for a product's acceptance check
	Scope       string // "" for top level, "recipe.x" or "product.x" when nested
	Description string // excluded from the digest
	Image       *Artifact
	Run         []string
	Env         map[string]string
	Workdir     string
	User        string
	Platform    string
	Mounts      map[string]*Artifact // sandbox path → content
	// Caches are the cache volumes it mounts, writable, by sandbox path (§9b); nil for
	// none. Not in its definition: what a cache holds never changes what a step means.
	Caches  map[string]*Cache
	Outputs []string // absolute paths under /out, sorted
	// Optional are outputs collected only when the step makes them. The language never
	// sets them: the engine does, for a reconstruct builder's oracle requests (OracleDir).
	Optional []string
	Limits   Limits
	// Network is NetworkNone, or NetworkEgress for a fixed-output step (spec/language.md
	// §9a): it reaches Egress, each endpoint granted by the operator, through the broker,
	// and its outputs must have the tree digest OutputDigest.
	Network      string
	Egress       []HostPort    // sorted by String, without duplicates; only with NetworkEgress
	OutputDigest digest.Digest // only with NetworkEgress
	// Instance says which instance of a block with for_each or count the step is; nil for
	// a block without.
	Instance  *Instance
	DeclRange hcl.Range
}

// Instance is one instance of a block with for_each or count.
type Instance struct {
	Block string // the block's name: the step, seed or module NAME of NAME["KEY"]
	Key   string // the for_each key, or the count index as text
	Count bool   // the block has count, not for_each
}

// Address is the step's node address: step.x, recipe.r.step.x, product.p.step.x or
// product.p.check.x.
func (s *Step) Address() string {
	if s.Scope == "" {
		return s.Kind + "." + s.Name
	}
	return s.Scope + "." + s.Kind + "." + s.Name
}

// Limits bound a step. Zero values mean Foundry's defaults (see spec/language.md).
type Limits struct {
	MemoryBytes int64
	CPUs        float64
	Pids        int64
	Time        time.Duration
	OutputBytes int64
	// EgressBytes bounds what a fixed-output step's broker relays, both ways and all
	// connections together; only with network egress.
	EgressBytes int64
	// DiskBytes and Inodes bound the step's writable space, /out and /tmp together, while
	// it runs: the bytes written and the files, directories and links made.
	DiskBytes int64
	Inodes    int64
}

// Product is a deliverable: steps that assemble it, acceptance checks, and where it goes.
type Product struct {
	Name      string
	Summary   string
	Requires  []*Artifact // capabilities it needs
	Steps     map[string]*Step
	Checks    map[string]*Step // acceptance checks: steps that must exit 0
	Deliver   *Delivery
	DeclRange hcl.Range

	// Accept, when set, is the acceptance of the service the product assembles: cases
	// sent through its HTTP interface, across restarts on a persistent data volume.
	Accept *Acceptance
}

// Delivery is where a product's artifact goes once its checks pass.
type Delivery struct {
	To    string      // as written
	Dest  Destination // To parsed, a relative path resolved against the project directory
	Files map[string]*Artifact
	// Start is the command that starts the delivered product, recorded in its release
	// manifest with the restart instructions; nil when it declares none.
	Start []string
	Range hcl.Range
}
