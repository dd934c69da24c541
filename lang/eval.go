package lang

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

func errorf(rng *hcl.Range, summary, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: rng}
}

// errorAt is errorf at rng, a copy. Passing &rng of a local or a parameter to errorf moves
// that variable to the heap wherever it is declared, error or not: an allocation for the
// range of every attribute and reference of every step.
func errorAt(rng hcl.Range, summary, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: &rng}
}

// didYouMean returns " Did you mean "x"?" when a candidate is close to name.
func didYouMean(name string, candidates []string) string {
	best, bestD := "", 3
	// Sorted for a stable choice among equally close names; a copy, because callers pass
	// slices they print (refRoots was printed in a different order after the first call).
	sorted := slices.Clone(candidates)
	sort.Strings(sorted)
	for _, c := range sorted {
		if d := levenshtein.Distance(name, c, nil); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

// stepScope is the set of steps a step expression may refer to as step.NAME: top-level steps
// see top-level steps; steps inside a recipe or product see that block's steps only.
type stepScope struct {
	prefix string // "" or "recipe.x" / "product.x"
	// steps holds what the scope knows of each step, by name: one lookup per reference.
	steps map[string]*scopeStep
	order []string
	// value is the object step.NAME.output["PATH"] is evaluated in (see stepValue).
	valueOnce sync.Once
	value     cty.Value
}

// scopeStep is one step of a scope.
type scopeStep struct {
	block   *hcl.Block // until the step is decoded
	outputs []string   // its declared outputs, sorted
}

// newStepScope returns an empty scope with room for about n steps.
func newStepScope(prefix string, n int) *stepScope {
	return &stepScope{prefix: prefix, steps: make(map[string]*scopeStep, n)}
}

// outputsOf returns the declared outputs of the scope's step name; a check of a product is
// decoded in its product's scope but is not one of its steps.
func (s *stepScope) outputsOf(name string) []string {
	if st := s.steps[name]; st != nil {
		return st.outputs
	}
	return nil
}

func (s *stepScope) address(name string) string {
	if s.prefix == "" {
		return "step." + name
	}
	return s.prefix + ".step." + name
}

// add registers a step block and evaluates its declared outputs, which may use only variables,
// locals and functions.
func (s *stepScope) add(l *loader, b *hcl.Block) {
	name := b.Labels[0]
	if s.prefix != "" && !l.declare(s.prefix+".step."+name, b) {
		return
	}
	s.insert(name, b, l.declaredOutputs(b))
}

func (s *stepScope) insert(name string, b *hcl.Block, outputs []string) {
	s.steps[name] = &scopeStep{block: b, outputs: outputs}
	s.order = append(s.order, name)
}

// addAll adds the blocks of a scope whose names need no declaring (the top level's, declared
// with every other block). A large scope's outputs are evaluated on every core, each worker
// with a fork of the loader, joined in block order: the same outputs and diagnostics as
// adding the blocks one by one (see forked).
func (s *stepScope) addAll(l *loader, blocks []*hcl.Block) {
	outs := make([][]string, len(blocks))
	l.forked(len(blocks), func(fl *loader, lo, hi int) {
		for i := lo; i < hi; i++ {
			outs[i] = fl.declaredOutputs(blocks[i])
		}
	})
	for i, b := range blocks {
		s.insert(b.Labels[0], b, outs[i])
	}
}

// declaredOutputs evaluates a step block's outputs attribute: the sorted, valid paths.
func (l *loader) declaredOutputs(b *hcl.Block) []string {
	expr := outputsExpr(b.Body)
	if expr == nil {
		return nil
	}
	for _, t := range variables(expr) {
		if r := t.RootName(); r != "var" && r != "local" {
			l.diags = append(l.diags, errorf(t.SourceRange().Ptr(), "Invalid reference in outputs",
				"A step's outputs may refer only to variables and locals: other steps see them before this step runs."))
			return nil
		}
	}
	val, diags := l.eval(expr, l.baseContext(), nil)
	if diags.HasErrors() {
		return nil
	}
	rng := expr.Range()
	var outputs []string
	seen := map[string]bool{}
	for _, o := range l.stringList(val, rng, "outputs") {
		if !validOutputPath(o) {
			l.diags = append(l.diags, errorAt(rng, "Invalid output path",
				"%q: outputs are absolute, clean paths under /out, for example \"/out/bin/tool\".", o))
			continue
		}
		if seen[o] {
			l.diags = append(l.diags, errorAt(rng, "Duplicate output", "%q is declared twice.", o))
			continue
		}
		seen[o] = true
		outputs = append(outputs, o)
	}
	sort.Strings(outputs)
	return outputs
}

// outputsExpr returns the expression of a step body's outputs attribute, or nil. Errors in
// the body are left to the full decode.
func outputsExpr(body hcl.Body) hcl.Expression {
	if sb, ok := body.(*hclsyntax.Body); ok { // what JustAttributes would find, without copying every attribute
		if a := sb.Attributes["outputs"]; a != nil {
			return a.Expr
		}
		return nil
	}
	attrs, _ := body.JustAttributes()
	if a := attrs["outputs"]; a != nil {
		return a.Expr
	}
	return nil
}

// variables is expr.Variables(), without walking a tuple of plain strings (outputs are
// nearly always one), which has none.
func variables(expr hcl.Expression) []hcl.Traversal {
	if t, ok := expr.(*hclsyntax.TupleConsExpr); ok {
		plain := true
		for _, e := range t.Exprs {
			if s, ok := e.(*hclsyntax.TemplateExpr); !ok || !s.IsStringLiteral() {
				plain = false
				break
			}
		}
		if plain {
			return nil
		}
	}
	return expr.Variables()
}

func validOutputPath(p string) bool {
	if !strings.HasPrefix(p, "/out/") || strings.HasSuffix(p, "/") {
		return false
	}
	for _, el := range strings.Split(p[1:], "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}

// stepValue returns the scope's step object, built on first use (a configuration without
// step references never needs it). It is safe for concurrent use.
func (s *stepScope) stepValue() cty.Value {
	s.valueOnce.Do(func() {
		attrs := make(map[string]cty.Value, len(s.steps))
		for name, st := range s.steps {
			outVal := cty.MapValEmpty(ArtifactType)
			if len(st.outputs) > 0 {
				vals := make(map[string]cty.Value, len(st.outputs))
				for _, o := range st.outputs {
					vals[o] = artifactVal(&Artifact{Kind: ArtifactStepOutput, Node: s.address(name), Path: o})
				}
				outVal = cty.MapVal(vals)
			}
			attrs[name] = cty.ObjectVal(map[string]cty.Value{"output": outVal})
		}
		s.value = cty.ObjectVal(attrs)
	})
	return s.value
}

// baseContext is the evaluation context of every expression: variables, locals, seeds,
// capabilities and functions. A scope's steps are added by eval (withSteps).
func (l *loader) baseContext() *hcl.EvalContext {
	if l.ctx != nil {
		return l.ctx
	}
	vars := map[string]cty.Value{}
	for n, v := range l.cfg.Variables {
		if v.Value == cty.NilVal {
			vars[n] = cty.DynamicVal
		} else {
			vars[n] = v.Value
		}
	}
	seeds := map[string]cty.Value{}
	caps := map[string]cty.Value{}
	for addr := range l.declared {
		kind, name, _ := strings.Cut(addr, ".")
		switch kind {
		case "seed":
			seeds[name] = artifactVal(&Artifact{Kind: ArtifactSeed, Node: addr})
		case "capability":
			caps[name] = artifactVal(&Artifact{Kind: ArtifactCapability, Node: addr})
		}
	}
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"var":        cty.ObjectVal(vars),
			"local":      cty.ObjectVal(l.cfg.Locals),
			"seed":       cty.ObjectVal(seeds),
			"capability": cty.ObjectVal(caps),
		},
		Functions: l.budget.functions(l.in.functions()),
	}
	if l.localsDone {
		l.ctx = ctx
	}
	return ctx
}

// withSteps returns ctx with the scope's steps as "step".
func withSteps(ctx *hcl.EvalContext, s *stepScope) *hcl.EvalContext {
	vars := make(map[string]cty.Value, len(ctx.Variables)+1)
	for k, v := range ctx.Variables {
		vars[k] = v
	}
	vars["step"] = s.stepValue()
	return &hcl.EvalContext{Variables: vars, Functions: ctx.Functions}
}

var refRoots = []string{"var", "local", "seed", "capability", "step"}

// eval checks every reference in expr against what is declared, then evaluates it. Checking
// first gives one precise diagnostic per bad reference, with a suggestion, instead of cty's
// generic "unsupported attribute".
func (l *loader) eval(expr hcl.Expression, ctx *hcl.EvalContext, scope *stepScope) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	for _, t := range expr.Variables() {
		if d := l.checkRef(t, scope); d != nil {
			diags = append(diags, d)
		}
	}
	if diags.HasErrors() {
		l.diags = append(l.diags, diags...)
		return cty.DynamicVal, diags
	}
	l.in.current = expr.Range()
	if scope != nil {
		ctx = withSteps(ctx, scope)
	}
	val, diags := expr.Value(ctx)
	l.report(diags)
	return val, diags
}

func (l *loader) checkRef(t hcl.Traversal, scope *stepScope) *hcl.Diagnostic {
	root := t.RootName()
	rng := t.SourceRange()
	attrName := func(i int) (string, bool) {
		if len(t) <= i {
			return "", false
		}
		a, ok := t[i].(hcl.TraverseAttr)
		return a.Name, ok
	}
	name, ok := attrName(1)
	switch root {
	case "var", "local", "seed", "capability", "step":
		if !ok {
			return errorAt(rng, "Invalid reference", "A reference to %s needs a name, for example %s.NAME.", root, root)
		}
	default:
		return errorAt(rng, "Unknown reference", "There is no %q in this language; references start with one of %s.%s",
			root, strings.Join(refRoots, ", "), didYouMean(root, refRoots))
	}
	switch root {
	case "var":
		if _, ok := l.cfg.Variables[name]; !ok {
			return errorAt(rng, "Reference to undeclared variable", "No variable %q is declared.%s", name, didYouMean(name, sortedKeys(l.cfg.Variables)))
		}
	case "local":
		if _, ok := l.cfg.Locals[name]; !ok {
			return errorAt(rng, "Reference to undeclared local value", "No local value %q is defined (or it is defined later in a cycle).%s", name, didYouMean(name, sortedKeys(l.cfg.Locals)))
		}
	case "seed", "capability":
		if _, ok := l.declared[root+"."+name]; !ok {
			var names []string
			for addr := range l.declared {
				if k, n, _ := strings.Cut(addr, "."); k == root {
					names = append(names, n)
				}
			}
			return errorAt(rng, "Reference to undeclared "+root, "No %s %q is declared.%s", root, name, didYouMean(name, names))
		}
	case "step":
		if scope == nil {
			return errorAt(rng, "Invalid reference", "Steps cannot be referenced here; step outputs may be used in steps, packages, checks and deliveries.")
		}
		st, ok := scope.steps[name]
		if !ok {
			where := "at the top level"
			if scope.prefix != "" {
				where = "in " + scope.prefix
			}
			return errorAt(rng, "Reference to undeclared step", "No step %q is declared %s; a step sees only the steps of its own recipe or product (or the top-level steps).%s",
				name, where, didYouMean(name, sortedKeys(scope.steps)))
		}
		attr, ok := attrName(2)
		if !ok || attr != "output" {
			return errorAt(rng, "Invalid step reference", "A step's outputs are referred to as step.%s.output[\"/out/PATH\"].", name)
		}
		if len(t) > 3 {
			if idx, ok := t[3].(hcl.TraverseIndex); ok && idx.Key.Type() == cty.String {
				key := idx.Key.AsString()
				found := false
				for _, o := range st.outputs {
					found = found || o == key
				}
				if !found {
					return errorAt(rng, "Reference to undeclared output", "step %q declares no output %q; its outputs are %s.%s",
						name, key, quoteList(st.outputs), didYouMean(key, st.outputs))
				}
			}
		}
	}
	return nil
}

func quoteList(xs []string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// --- conversions from cty values, each reporting at the expression's range ---

func (l *loader) typeErr(rng hcl.Range, what, want string, v cty.Value) {
	got := "null"
	if !v.IsNull() {
		got = v.Type().FriendlyName()
	}
	l.diags = append(l.diags, errorAt(rng, "Incorrect attribute value type", "%s must be %s, not %s.", what, want, got))
}

// plainString returns v as a Go string when it is a known, non-null, unmarked string: what
// str returns for it, without naming the value for a diagnostic that cannot arise. Lists
// and maps of strings take it first for each element.
func plainString(v cty.Value) (string, bool) {
	if v.Type() == cty.String && v.IsKnown() && !v.IsNull() && !v.IsMarked() {
		return v.AsString(), true
	}
	return "", false
}

func (l *loader) str(v cty.Value, rng hcl.Range, what string) (string, bool) {
	if !v.IsKnown() {
		return "", false
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil || s.IsNull() {
		l.typeErr(rng, what, "a string", v)
		return "", false
	}
	return s.AsString(), true
}

func (l *loader) stringList(v cty.Value, rng hcl.Range, what string) []string {
	if !v.IsKnown() || v.IsNull() {
		if v.IsNull() {
			l.typeErr(rng, what, "a list of strings", v)
		}
		return nil
	}
	if !(v.Type().IsListType() || v.Type().IsTupleType() || v.Type().IsSetType()) {
		l.typeErr(rng, what, "a list of strings", v)
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if s, ok := plainString(e); ok {
			out = append(out, s)
			continue
		}
		s, ok := l.str(e, rng, what+" elements")
		if !ok {
			return nil
		}
		out = append(out, s)
	}
	return out
}

func (l *loader) stringMap(v cty.Value, rng hcl.Range, what string) map[string]string {
	out := map[string]string{}
	if !v.IsKnown() {
		return out
	}
	if v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		l.typeErr(rng, what, "a map of strings", v)
		return out
	}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if s, ok := plainString(e); ok {
			out[k.AsString()] = s
			continue
		}
		s, ok := l.str(e, rng, fmt.Sprintf("%s[%q]", what, k.AsString()))
		if !ok {
			continue
		}
		out[k.AsString()] = s
	}
	return out
}

func (l *loader) number(v cty.Value, rng hcl.Range, what string) (float64, bool) {
	if !v.IsKnown() {
		return 0, false
	}
	n, err := convert.Convert(v, cty.Number)
	if err != nil || n.IsNull() {
		l.typeErr(rng, what, "a number", v)
		return 0, false
	}
	f, _ := n.AsBigFloat().Float64()
	if math.IsInf(f, 0) || math.IsNaN(f) {
		l.diags = append(l.diags, errorAt(rng, "Invalid number", "%s must be finite.", what))
		return 0, false
	}
	return f, true
}

// artifact converts v to an Artifact of one of the allowed kinds. A string is accepted as
// inline content when allowInline is set.
func (l *loader) artifact(v cty.Value, rng hcl.Range, what string, allowInline bool, kinds ...ArtifactKind) *Artifact {
	if !v.IsKnown() {
		return nil
	}
	if c, ok := allowedArtifact(v, rng, kinds); ok {
		return c
	}
	if a := asArtifact(v); a != nil {
		l.diags = append(l.diags, errorAt(rng, "Invalid value", "%s cannot be %s; it must be %s.", what, describeKind(a.Kind), describeKinds(kinds, allowInline)))
		return nil
	}
	if allowInline && !v.IsNull() {
		if s, err := convert.Convert(v, cty.String); err == nil {
			b := []byte(s.AsString())
			return &Artifact{Kind: ArtifactInline, Inline: b, Digest: digestBytes(b), Mode: 0o644, Range: rng}
		}
	}
	l.diags = append(l.diags, errorAt(rng, "Invalid value", "%s must be %s.", what, describeKinds(kinds, allowInline)))
	return nil
}

// allowedArtifact returns a copy of the artifact in v, placed at rng, if v holds one of the
// given kinds.
func allowedArtifact(v cty.Value, rng hcl.Range, kinds []ArtifactKind) (*Artifact, bool) {
	a := asArtifact(v)
	if a == nil || !slices.Contains(kinds, a.Kind) {
		return nil, false
	}
	c := *a
	c.Range = rng
	return &c, true
}

func (l *loader) artifactMap(v cty.Value, rng hcl.Range, what string, allowInline bool, kinds ...ArtifactKind) map[string]*Artifact {
	out := map[string]*Artifact{}
	if !v.IsKnown() {
		return out
	}
	if v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		l.typeErr(rng, what, "a map", v)
		return out
	}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		// What artifact returns for an artifact of an allowed kind, without naming the
		// element for a diagnostic that cannot arise (a Sprintf per mount of every step).
		if c, ok := allowedArtifact(e, rng, kinds); ok {
			out[k.AsString()] = c
			continue
		}
		if a := l.artifact(e, rng, fmt.Sprintf("%s[%q]", what, k.AsString()), allowInline, kinds...); a != nil {
			out[k.AsString()] = a
		}
	}
	return out
}

func describeKind(k ArtifactKind) string {
	switch k {
	case ArtifactProjectFile:
		return "a project file"
	case ArtifactProjectDir:
		return "a project directory (dir(...))"
	case ArtifactHostFile:
		return "a host file (host_file(...))"
	case ArtifactHostDir:
		return "a host directory (host_dir(...))"
	case ArtifactSeed:
		return "a seed (seed.NAME)"
	case ArtifactCapability:
		return "a capability (capability.NAME)"
	case ArtifactStepOutput:
		return "a step output (step.NAME.output[\"/out/...\"])"
	}
	return string(k)
}

func describeKinds(kinds []ArtifactKind, inline bool) string {
	var parts []string
	for _, k := range kinds {
		parts = append(parts, describeKind(k))
	}
	if inline {
		parts = append(parts, "a string (its text becomes a file)")
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// optString evaluates an optional string attribute into dst.
func (l *loader) optString(content *hcl.BodyContent, name string, ctx *hcl.EvalContext, dst *string) {
	a := content.Attributes[name]
	if a == nil {
		return
	}
	val, diags := l.eval(a.Expr, ctx, nil)
	if diags.HasErrors() {
		return
	}
	if s, ok := l.str(val, a.Expr.Range(), name); ok {
		*dst = s
	}
}
