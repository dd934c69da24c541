package lang

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/internal/parallel"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Options are the inputs of a load that do not come from the project's files.
type Options struct {
	// Vars are -var NAME=VALUE assignments, VALUE as written on the command line. They win
	// over VarFiles, which win over defaults.
	Vars map[string]string
	// VarFiles are -var-file paths: HCL files of NAME = VALUE attributes, applied in order.
	VarFiles []string
	// StatCache, if set, supplies the digests of input files unchanged since it last saw
	// them (file, dir, host_file, host_dir) and learns the others. The caller saves it.
	StatCache *digest.StatCache
	// Digests, if set, are file and tree digests computed for this load already (by
	// Changed, just before): they are used instead of hashing those paths again.
	Digests Digests
	// Budget bounds evaluation (see Budget); zero fields take DefaultBudget's. It is the
	// operator's: nothing in the project's files can set it.
	Budget Budget
}

var rootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "project", LabelNames: []string{"name"}},
	{Type: "variable", LabelNames: []string{"name"}},
	{Type: "locals"},
	{Type: "seed", LabelNames: []string{"name"}},
	{Type: "source", LabelNames: []string{"name"}},
	{Type: "capability", LabelNames: []string{"name"}},
	{Type: "recipe", LabelNames: []string{"name"}},
	{Type: "step", LabelNames: []string{"name"}},
	{Type: "product", LabelNames: []string{"name"}},
	{Type: "module", LabelNames: []string{"name"}},
	{Type: "output", LabelNames: []string{"name"}},
}}

// loader holds the state of one Load.
type loader struct {
	cfg    *Config
	in     *inputs
	parser *hclparse.Parser
	diags  hcl.Diagnostics
	// declared block ranges by address, for duplicate detection
	declared map[string]hcl.Range
	// sealed lists every sealed case file (project-relative), for the mount check
	sealed []sealedFile
	// seedGroups are the seed blocks with for_each or count, by block name: seed.NAME
	// of one is its instances.
	seedGroups map[string]*repeated
	// ctx caches the base evaluation context once locals are final (localsDone).
	ctx        *hcl.EvalContext
	localsDone bool
	// budget bounds the whole load's evaluation; the forks share it.
	budget *budget
	// prefix is "" for the project's files, and the address of the module instance whose
	// files this loader loads (module.NAME, module.NAME["KEY"], ...); module says more.
	prefix string
	module *moduleLoad
	// modules are the module blocks decoded, by name; outputs a module's output values.
	modules map[string]*moduleRef
	outputs map[string]cty.Value
}

type sealedFile struct {
	path       string // project-relative
	real       string // absolute, symlinks resolved
	capability string
}

// Load parses and decodes every *.hcl file in dir.
func Load(dir string, opts Options) (*Config, hcl.Diagnostics) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, hcl.Diagnostics{errorf(nil, "Invalid project directory", "%v", err)}
	}
	in, err := newInputs(abs)
	if err != nil {
		return nil, hcl.Diagnostics{errorf(nil, "Invalid project directory", "%v", err)}
	}
	in.stat = opts.StatCache
	maps.Copy(in.hashed, opts.Digests.hashed)
	l := newLoader(in, newBudget(opts.Budget))
	if files := l.readFiles(l.cfg.Dir); files != nil {
		l.load(files, opts)
	}
	l.cfg.Inputs = l.in.sorted()
	l.cfg.Globs = l.in.sortedGlobs()
	l.cfg.EvalUsage = l.budget.usage()
	// The parser owns every file read, including var files: expose them all for rendering,
	// which needs only the source text.
	for name, f := range l.parser.Files() {
		l.cfg.Files[name] = &hcl.File{Bytes: f.Bytes}
	}
	return l.cfg, l.diags
}

func newLoader(in *inputs, b *budget) *loader {
	in.charge = func(v cty.Value) error {
		if err := b.chargeValue(v); err != nil {
			return err
		}
		return nil
	}
	return &loader{
		budget: b,
		cfg: &Config{
			Dir: in.dir, Files: map[string]*hcl.File{},
			Variables: map[string]*Variable{}, Locals: map[string]cty.Value{},
			Seeds: map[string]*Seed{}, Sources: map[string]*Source{}, Capabilities: map[string]*Capability{},
			Recipes: map[string]*Recipe{}, Steps: map[string]*Step{}, Products: map[string]*Product{},
		},
		in:       in,
		parser:   hclparse.NewParser(),
		declared: map[string]hcl.Range{},
	}
}

// load parses every file, then decodes every block.
func (l *loader) load(files []sourceFile, opts Options) {
	byType, ok := l.parseAndDeclare(files)
	if !ok {
		return
	}
	for _, b := range byType["output"] {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Output outside a module",
			"output blocks say what a module gives the configuration that uses it; the project's own files have none."))
	}
	l.budget.begin()
	if !l.decodeGlobals(byType, opts) || l.budget.exceeded() {
		return
	}
	// Every step's declared outputs must be known before any step expression is evaluated,
	// because step.x.output[...] refers to them.
	top := newStepScope("", len(byType["step"]))
	l.cfg.Steps = make(map[string]*Step, len(byType["step"]))
	top.addAll(l, byType["step"])
	delete(byType, "step")
	// Modules' inputs may mount the project's steps, and its steps their outputs.
	top.modules = map[string]cty.Value{}
	l.decodeModules(byType["module"], top)
	l.cfg.stepOrder = append(l.decodeSteps(top, l.cfg.Steps), l.cfg.stepOrder...)
	if l.budget.exceeded() {
		return
	}
	l.decodeRest(byType)
}

// parseAndDeclare parses the files and declares their named blocks, which it returns by
// type; ok is false when a file does not parse.
func (l *loader) parseAndDeclare(files []sourceFile) (byType map[string][]*hcl.Block, ok bool) {
	var blocks []*hcl.Block
	for _, pf := range parseFiles(files, l.budget) {
		l.diags = append(l.diags, pf.diags...)
		if pf.file == nil {
			continue
		}
		// The parser keeps only the text, for rendering diagnostics: the syntax trees
		// are let go block by block as they are decoded (see decodeSteps).
		l.parser.AddFile(pf.rel, &hcl.File{Bytes: pf.file.Bytes})
		blocks = append(blocks, pf.blocks...)
	}
	if l.diags.HasErrors() {
		return nil, false
	}
	// Maps keyed by address are sized up front: growing a large one rehashes it again and
	// again, each time touching every entry.
	l.declared = make(map[string]hcl.Range, len(blocks))
	byType = map[string][]*hcl.Block{}
	for _, b := range blocks {
		if len(b.Labels) == 1 && !l.declare(b.Type+"."+b.Labels[0], b) {
			continue
		}
		byType[b.Type] = append(byType[b.Type], b)
	}
	return byType, true
}

// decodeGlobals decodes what every step may refer to besides other steps. Order matters:
// variables feed locals; locals, seeds and capabilities are visible to all blocks. It
// reports whether the variables decoded without errors; nothing else can be evaluated
// without them.
func (l *loader) decodeGlobals(byType map[string][]*hcl.Block, opts Options) bool {
	l.decodeVariables(byType["variable"], opts)
	if l.diags.HasErrors() {
		return false
	}
	l.decodeLocals(byType["locals"])
	// A seed's instances, before the base context that makes seed.NAME of them is fixed.
	type seedInstance struct {
		b     *hcl.Block
		in    instance
		count bool
	}
	var seeds []seedInstance
	l.seedGroups = map[string]*repeated{}
	for _, b := range byType["seed"] {
		insts, r := l.instances(b)
		if r != nil {
			l.seedGroups[b.Labels[0]] = r
		}
		for _, in := range insts {
			seeds = append(seeds, seedInstance{b, in, r != nil && r.count})
		}
	}
	l.localsDone = true
	if l.budget.exceeded() {
		return true // what remains would only be refused
	}
	if l.module == nil {
		l.decodeProject(byType["project"]) // a module's is the project's
	}
	// Sources before seeds: a seed's layer may be a source's tree.
	for _, b := range byType["source"] {
		l.decodeSource(b)
	}
	for _, s := range seeds {
		l.decodeSeed(s.b, s.in, s.count)
	}
	for _, b := range byType["capability"] {
		l.decodeCapability(b)
	}
	return true
}

// decodeRest decodes recipes and products, whose steps see only their own block's steps,
// and checks that nothing reads a sealed case.
func (l *loader) decodeRest(byType map[string][]*hcl.Block) {
	for _, b := range byType["recipe"] {
		l.decodeRecipe(b)
	}
	for _, b := range byType["product"] {
		l.decodeProduct(b)
	}
	var suites []*Suite
	for _, c := range l.cfg.Capabilities {
		for _, s := range c.Suites {
			suites = append(suites, s)
		}
	}
	// A product's acceptance cases are shown in its failure reports, like dev cases.
	for _, p := range l.cfg.Products {
		if p.Accept != nil && p.Accept.Cases != nil {
			suites = append(suites, p.Accept.Cases)
		}
	}
	l.checkSealed(suites)
}

// sourceFile is one configuration file, read and cut into pieces (see parse.go).
type sourceFile struct {
	rel    string
	src    []byte
	pieces []piece
	err    error // reading it failed
}

// readFiles reads and cuts every *.hcl file of dir (the project's or a module's), in name
// order.
func (l *loader) readFiles(dir string) []sourceFile {
	names, err := filepath.Glob(filepath.Join(dir, "*.hcl"))
	if err != nil || len(names) == 0 {
		hint := " Run 'foundry init' to create a starter project."
		if l.module != nil {
			hint = " A module's directory holds its own *.hcl files."
		}
		l.diags = append(l.diags, errorf(nil, "No configuration files", "The directory %s has no *.hcl files.%s", dir, hint))
		return nil
	}
	sort.Strings(names)
	files := make([]sourceFile, len(names))
	// Files are read and cut on every core: a large project has a thousand files or more.
	parallel.Parts(len(names), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			f := &files[i]
			f.rel, _ = filepath.Rel(l.cfg.Dir, names[i])
			if f.src, f.err = os.ReadFile(names[i]); f.err == nil {
				f.pieces = cutPieces(f.src, minPiece)
			}
		}
	})
	return files
}

// parsedFile is one configuration file, parsed and split into its top-level blocks.
type parsedFile struct {
	rel    string
	file   *hcl.File
	blocks []*hcl.Block
	diags  hcl.Diagnostics
}

// parseFiles parses the files and returns them in the order given, so that diagnostics and
// blocks keep the sorted file order, with their expressions rewritten to be evaluated under
// b (see budgetExpr). Parsing dominates loading a large project: the pieces of all files
// (see parse.go) are parsed in parallel.
func parseFiles(files []sourceFile, b *budget) []parsedFile {
	out := make([]parsedFile, len(files))
	var jobs []pieceJob
	for i := range files {
		out[i].rel = files[i].rel
		for k := range files[i].pieces {
			jobs = append(jobs, pieceJob{&files[i].pieces[k], files[i].rel})
		}
	}
	parsePieces(jobs, b)
	for i := range out {
		if err := files[i].err; err != nil {
			out[i].diags = hcl.Diagnostics{errorf(nil, "Cannot read configuration file", "%v", err)}
			continue
		}
		f, diags := joinPieces(files[i].src, out[i].rel, files[i].pieces, b)
		out[i].diags = diags
		if f == nil {
			continue
		}
		out[i].file = f
		content, diags := f.Body.Content(rootSchema)
		hintUnsupported(diags, rootSchema)
		out[i].diags = append(out[i].diags, diags...)
		out[i].blocks = content.Blocks
	}
	return out
}

// pieceJob is a piece to parse and the name of its file.
type pieceJob struct {
	p   *piece
	rel string
}

// parsePieces parses the pieces on every core.
func parsePieces(jobs []pieceJob, b *budget) {
	work := make(chan pieceJob)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				j.p.parse(j.rel, b)
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
}

// declare records a named block and reports a duplicate.
func (l *loader) declare(addr string, b *hcl.Block) bool {
	if b.Type != "project" && !validName(b.Labels[0]) { // a project's name is only shown
		l.diags = append(l.diags, invalidName(b))
		return false
	}
	if prev, dup := l.declared[addr]; dup {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Duplicate " + b.Type,
			Detail:   fmt.Sprintf("%s was already declared at %s. Names must be unique within their block type.", addr, prev),
			Subject:  b.DefRange.Ptr(),
		})
		return false
	}
	l.declared[addr] = b.DefRange
	return true
}

// validName reports whether a block's name is an HCL identifier: a letter or underscore,
// then letters, digits, underscores and dashes. A name is part of an address (step.NAME,
// recipe.R.step.NAME) and of the reference to it, and a dot or a space in it would make an
// address that names another block (product "p.step.x" is product p's step x) or one that
// no reference can spell.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return hclsyntax.ValidIdentifier(s) // Unicode letters, by hclsyntax's own rules
		}
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && (c == '-' || '0' <= c && c <= '9')) {
			return false
		}
	}
	return s != ""
}

// invalidName is the diagnostic for a block whose name is not an identifier (validName).
func invalidName(b *hcl.Block) *hcl.Diagnostic {
	return errorf(&b.LabelRanges[0], "Invalid name", "%s %q: a name is a letter or underscore followed by letters, digits, underscores or dashes, such as \"build-tool\": it is part of the block's address and of every reference to it.", b.Type, b.Labels[0])
}

func (l *loader) decodeProject(blocks []*hcl.Block) {
	p := &Project{Platform: "linux/amd64"}
	l.cfg.Project = p
	if len(blocks) == 0 {
		p.Name = filepath.Base(l.cfg.Dir)
		return
	}
	if len(blocks) > 1 {
		l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate project block",
			Detail: fmt.Sprintf("A project has one project block; the first is at %s.", blocks[0].DefRange), Subject: blocks[1].DefRange.Ptr()})
	}
	b := blocks[0]
	p.Name, p.DeclRange = b.Labels[0], b.DefRange
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "brief"}, {Name: "registry"}, {Name: "platform"}, {Name: "keep_pins"}, {Name: "min_undisclosed_sealed"},
		{Name: "reconstruct_deadline"}, {Name: "reconstruct_spend"}, {Name: "reconstruct_depth"},
	}})
	l.diags = append(l.diags, diags...)
	ctx := l.baseContext()
	l.optString(content, "brief", ctx, &p.Brief)
	l.optString(content, "registry", ctx, &p.Registry)
	l.optString(content, "platform", ctx, &p.Platform)
	if a := content.Attributes["platform"]; a != nil {
		l.checkPlatform(p.Platform, a.Expr.Range())
	}
	if a := content.Attributes["keep_pins"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if !v.IsKnown() || v.IsNull() || v.Type() != cty.Bool {
				l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid keep_pins", "keep_pins must be true or false."))
			} else {
				p.KeepPins = v.True()
			}
		}
	}
	if a := content.Attributes["min_undisclosed_sealed"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if n, ok := l.number(v, a.Expr.Range(), "min_undisclosed_sealed"); ok {
				if n < 1 || n != math.Trunc(n) || n > 1<<20 {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid min_undisclosed_sealed",
						"min_undisclosed_sealed = %v must be a whole number of at least 1: nothing is admitted without a sealed case no builder has seen.", n))
				} else {
					p.MinUndisclosedSealed = int(n)
				}
			}
		}
	}
	if a := content.Attributes["reconstruct_deadline"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			p.ReconstructDeadline, _ = l.duration(v, a.Expr.Range(), "reconstruct_deadline", "30m", ": the wall time all reconstruction jobs may take in one apply")
		}
	}
	if a := content.Attributes["reconstruct_depth"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if n, ok := l.number(v, a.Expr.Range(), "reconstruct_depth"); ok {
				if n < 1 || n > 16 || n != math.Trunc(n) {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid reconstruct_depth", "reconstruct_depth = %v must be a whole number from 1 to 16: how deep reconstructions may nest.", n))
				}
				p.ReconstructDepth = int(n)
			}
		}
	}
	if a := content.Attributes["reconstruct_spend"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if n, ok := l.number(v, a.Expr.Range(), "reconstruct_spend"); ok {
				if n < 0 || math.IsInf(n, 0) {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid reconstruct_spend", "reconstruct_spend = %v must be a number of at least 0: what all reconstruction jobs may spend together.", n))
				}
				p.ReconstructSpend = n
			}
		}
	}
}

func (l *loader) checkPlatform(p string, rng hcl.Range) {
	parts := strings.Split(p, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid platform",
			Detail: fmt.Sprintf("%q is not an OCI platform; write os/arch[/variant], for example \"linux/amd64\".", p), Subject: rng.Ptr()})
	}
}

func (l *loader) decodeVariables(blocks []*hcl.Block, opts Options) {
	for _, b := range blocks {
		v := &Variable{Name: b.Labels[0], Type: cty.DynamicPseudoType, DeclRange: b.DefRange}
		content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
			{Name: "type"}, {Name: "default"}, {Name: "description"},
		}})
		l.diags = append(l.diags, diags...)
		if a := content.Attributes["type"]; a != nil {
			ty, diags := typeexpr.TypeConstraint(a.Expr)
			l.diags = append(l.diags, diags...)
			v.Type = ty
		}
		if a := content.Attributes["description"]; a != nil {
			l.optString(content, "description", nil, &v.Description)
		}
		v.Default = cty.NilVal
		if a := content.Attributes["default"]; a != nil {
			val, diags := a.Expr.Value(nil)
			l.report(diags)
			if !diags.HasErrors() {
				v.Default = l.convertVar(v, val, a.Expr.Range())
			}
		}
		v.Value = v.Default
		l.cfg.Variables[v.Name] = v
	}
	if l.module != nil {
		l.moduleInputs()
		return
	}
	// -var-file values, then -var values.
	for _, path := range opts.VarFiles {
		src, err := os.ReadFile(path)
		if err != nil {
			l.diags = append(l.diags, errorf(nil, "Cannot read variable file", "%v", err))
			continue
		}
		f, diags := l.parser.ParseHCL(src, path)
		l.diags = append(l.diags, diags...)
		if f == nil {
			continue
		}
		attrs, diags := f.Body.JustAttributes()
		l.diags = append(l.diags, diags...)
		names := make([]string, 0, len(attrs))
		for n := range attrs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := attrs[n]
			v := l.cfg.Variables[n]
			if v == nil {
				l.diags = append(l.diags, l.undeclaredVar(n, a.NameRange))
				continue
			}
			val, diags := a.Expr.Value(nil)
			l.diags = append(l.diags, diags...)
			if !diags.HasErrors() {
				v.Value = l.convertVar(v, val, a.Expr.Range())
			}
		}
	}
	names := make([]string, 0, len(opts.Vars))
	for n := range opts.Vars {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		raw := opts.Vars[n]
		v := l.cfg.Variables[n]
		if v == nil {
			l.diags = append(l.diags, l.undeclaredVar(n, hcl.Range{Filename: "-var " + n}))
			continue
		}
		// A string variable takes the text literally; other types are parsed as HCL values.
		if v.Type == cty.String || v.Type == cty.DynamicPseudoType {
			v.Value = cty.StringVal(raw)
			if v.Type == cty.String {
				continue
			}
		}
		expr, diags := hclsyntax.ParseExpression([]byte(raw), "-var "+n, hcl.InitialPos)
		var val cty.Value
		if !diags.HasErrors() {
			val, diags = expr.Value(nil)
		}
		if diags.HasErrors() {
			if v.Type == cty.DynamicPseudoType {
				continue // not an HCL value: keep the literal string
			}
			l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value for variable",
				Detail: fmt.Sprintf("-var %s=%s: variable %q is of type %s; write its value in HCL syntax, for example 3, [\"a\", \"b\"] or {k = \"v\"}.",
					n, raw, n, v.Type.FriendlyName()),
				Subject: &hcl.Range{Filename: "-var " + n}})
			continue
		}
		if v.Type == cty.DynamicPseudoType {
			v.Value = val // an untyped variable takes the HCL value: -var x=[1,2] is a list
		} else {
			v.Value = l.convertVar(v, val, expr.Range())
		}
	}
	for _, v := range l.cfg.Variables {
		if _, given := opts.Vars[v.Name]; given {
			continue // its -var was invalid and has been reported
		}
		if v.Value == cty.NilVal {
			l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No value for required variable",
				Detail:  fmt.Sprintf("variable %q has no default; set it with -var %s=VALUE or in a -var-file.", v.Name, v.Name),
				Subject: v.DeclRange.Ptr()})
		}
	}
}

// moduleInputs sets a module's variables from the module block's inputs.
func (l *loader) moduleInputs() {
	for _, n := range sortedKeys(l.module.inputs) {
		a := l.module.inputs[n]
		v := l.cfg.Variables[n]
		if v == nil {
			var names []string
			for vn := range l.cfg.Variables {
				names = append(names, vn)
			}
			l.diags = append(l.diags, errorAt(a.NameRange, "Unsupported module input",
				"The module at ./%s declares no variable %q.%s", l.module.dir, n, didYouMean(n, names)))
			continue
		}
		out, err := convert.Convert(l.module.values[n], v.Type)
		if err != nil {
			l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid value for module input",
				"%s = …: variable %q of the module at ./%s is of type %s: %v.", n, n, l.module.dir, v.Type.FriendlyName(), err))
			continue
		}
		v.Value = out
	}
	for _, n := range sortedKeys(l.cfg.Variables) {
		if v := l.cfg.Variables[n]; v.Value == cty.NilVal && l.module.inputs[n] == nil {
			l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing module input",
				Detail:  fmt.Sprintf("%s needs %s = VALUE: its variable %q has no default.", l.prefix, n, n),
				Subject: v.DeclRange.Ptr()})
		}
	}
}

func (l *loader) undeclaredVar(name string, rng hcl.Range) *hcl.Diagnostic {
	var names []string
	for n := range l.cfg.Variables {
		names = append(names, n)
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Value for undeclared variable",
		Detail: fmt.Sprintf("No variable %q is declared in the project.%s", name, didYouMean(name, names)), Subject: rng.Ptr()}
}

func (l *loader) convertVar(v *Variable, val cty.Value, rng hcl.Range) cty.Value {
	out, err := convert.Convert(val, v.Type)
	if err != nil {
		l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value for variable",
			Detail: fmt.Sprintf("variable %q: %v", v.Name, err), Subject: rng.Ptr()})
		return cty.NilVal
	}
	return out
}

// decodeLocals evaluates locals in dependency order; a cycle among them is reported whole.
func (l *loader) decodeLocals(blocks []*hcl.Block) {
	attrs := map[string]*hcl.Attribute{}
	for _, b := range blocks {
		as, diags := b.Body.JustAttributes()
		l.diags = append(l.diags, diags...)
		for n, a := range as {
			if prev, dup := attrs[n]; dup {
				l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate local value",
					Detail: fmt.Sprintf("local.%s was already defined at %s.", n, prev.NameRange), Subject: a.NameRange.Ptr()})
				continue
			}
			attrs[n] = a
		}
	}
	deps := map[string][]string{}
	for n, a := range attrs {
		for _, t := range a.Expr.Variables() {
			if t.RootName() == "local" && len(t) > 1 {
				if at, ok := t[1].(hcl.TraverseAttr); ok {
					deps[n] = append(deps[n], at.Name)
				}
			}
			if t.RootName() == "step" {
				l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid reference in local value",
					Detail: "Local values cannot refer to steps; refer to the step where its output is used.", Subject: t.SourceRange().Ptr()})
			}
		}
	}
	done := map[string]bool{}
	for len(done) < len(attrs) {
		progress := false
		for _, n := range sortedKeys(attrs) {
			if done[n] {
				continue
			}
			ready := true
			for _, d := range deps[n] {
				if _, declared := attrs[d]; declared && !done[d] {
					ready = false
				}
			}
			if !ready {
				continue
			}
			a := attrs[n]
			val, diags := l.eval(a.Expr, l.baseContext(), nil)
			if !diags.HasErrors() {
				// A local is charged with everything it holds: it is how a value is used
				// again and again, and a local that holds another twice is twice its size.
				if err := l.budget.chargeValue(val); err != nil {
					l.report(hcl.Diagnostics{err.diag(a.Expr.Range())})
					diags = append(diags, err.diag(a.Expr.Range()))
				}
			}
			if diags.HasErrors() {
				val = cty.DynamicVal
			}
			l.cfg.Locals[n] = val
			done[n] = true
			progress = true
		}
		if !progress {
			var rest []string
			for _, n := range sortedKeys(attrs) {
				if !done[n] {
					rest = append(rest, n)
				}
			}
			cycle := findCycle(rest, func(n string) []string { return deps[n] })
			var parts []string
			for _, n := range cycle {
				parts = append(parts, "local."+n)
			}
			l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cycle in local values",
				Detail: "These local values refer to each other: " + strings.Join(parts, " → ") + ".", Subject: attrs[cycle[0]].NameRange.Ptr()})
			return
		}
	}
}

// findCycle returns a cycle among nodes (first node repeated at the end), following edges.
func findCycle(nodes []string, edges func(string) []string) []string {
	in := map[string]bool{}
	for _, n := range nodes {
		in[n] = true
	}
	state := map[string]int{} // 0 new, 1 on stack, 2 done
	var stack []string
	var found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		state[n] = 1
		stack = append(stack, n)
		for _, m := range edges(n) {
			if !in[m] {
				continue
			}
			if state[m] == 1 {
				for i, s := range stack {
					if s == m {
						found = append(append([]string{}, stack[i:]...), m)
						return true
					}
				}
			}
			if state[m] == 0 && visit(m) {
				return true
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = 2
		return false
	}
	for _, n := range nodes {
		if state[n] == 0 && visit(n) {
			return found
		}
	}
	return nodes
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cleanContent is body.Content(schema) for a body as parsed (no part of it taken by
// PartialContent, which every body the loader decodes is) when Content would report
// nothing: every attribute and block is in the schema, with its labels, and no required
// attribute is missing. It reports false otherwise, and Content is asked for the
// diagnostics. hclsyntax's Content makes four maps and a copy of the body to find what
// remains, for every block of every step.
func cleanContent(body hcl.Body, schema *hcl.BodySchema) (*hcl.BodyContent, bool) {
	b, ok := body.(*hclsyntax.Body)
	if !ok {
		return nil, false
	}
	for name := range b.Attributes {
		if !slices.ContainsFunc(schema.Attributes, func(a hcl.AttributeSchema) bool { return a.Name == name }) {
			return nil, false
		}
	}
	attrs := make(hcl.Attributes, len(b.Attributes))
	// What AsHCLAttribute makes, in one allocation for the body rather than one each.
	held := make([]hcl.Attribute, 0, len(b.Attributes))
	for _, as := range schema.Attributes {
		if a := b.Attributes[as.Name]; a != nil {
			held = append(held, hcl.Attribute{Name: a.Name, Expr: a.Expr, Range: a.SrcRange, NameRange: a.NameRange})
			attrs[as.Name] = &held[len(held)-1]
		} else if as.Required {
			return nil, false
		}
	}
	var blocks hcl.Blocks
	for _, blk := range b.Blocks {
		i := slices.IndexFunc(schema.Blocks, func(s hcl.BlockHeaderSchema) bool { return s.Type == blk.Type })
		if i < 0 || len(blk.Labels) != len(schema.Blocks[i].LabelNames) {
			return nil, false
		}
		blocks = append(blocks, blk.AsHCLBlock())
	}
	return &hcl.BodyContent{Attributes: attrs, Blocks: blocks, MissingItemRange: b.MissingItemRange()}, true
}

var unsupportedName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:argument named|[Bb]locks of type) "([^"]+)"`) })

// content decodes body against schema and adds a "Did you mean" to each unsupported
// argument or block that is close to one the schema has.
func (l *loader) content(body hcl.Body, schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	if content, ok := cleanContent(body, schema); ok {
		return content, nil
	}
	content, diags := body.Content(schema)
	hintUnsupported(diags, schema)
	return content, diags
}

// hintUnsupported adds a "Did you mean" to each unsupported argument or block of diags that is close
// to one the schema has, and puts diags in source order: hcl reports unsupported arguments
// in the order of a map, which differs from run to run.
func hintUnsupported(diags hcl.Diagnostics, schema *hcl.BodySchema) {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		var ra, rb hcl.Range
		if a.Subject != nil {
			ra = *a.Subject
		}
		if b.Subject != nil {
			rb = *b.Subject
		}
		return cmp.Or(strings.Compare(ra.Filename, rb.Filename), ra.Start.Byte-rb.Start.Byte)
	})
	for _, d := range diags {
		var names []string
		switch d.Summary {
		case "Unsupported argument":
			for _, a := range schema.Attributes {
				names = append(names, a.Name)
			}
		case "Unsupported block type":
			for _, b := range schema.Blocks {
				names = append(names, b.Type)
			}
		default:
			continue
		}
		if strings.Contains(d.Detail, "Did you mean") {
			continue
		}
		if m := unsupportedName().FindStringSubmatch(d.Detail); m != nil {
			if s := didYouMean(m[1], names); s != "" {
				d.Detail += s
			} else if len(names) > 0 {
				d.Detail += " Expected one of: " + strings.Join(names, ", ") + "."
			}
		}
	}
}
