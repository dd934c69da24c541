package lang

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/foundry-build/foundry/internal/suggest"
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
	if best := suggest.Closest(name, candidates); best != "" {
		return fmt.Sprintf(" Did you mean %q?", best)
	}
	return ""
}

// stepScope is the set of steps a step expression may refer to as step.NAME: top-level steps
// see top-level steps; steps inside a recipe or product see that block's steps only.
type stepScope struct {
	prefix string // "" or "recipe.x" / "product.x"
	// steps holds what the scope knows of each step, by name (an instance's: NAME["KEY"] or
	// NAME[INDEX]): one lookup per reference.
	steps map[string]*scopeStep
	order []string
	// groups are the blocks with for_each or count, by block name.
	groups map[string]*repeated
	// modules are module.NAME's values, by name, where the scope sees modules (the top
	// level of the project or of a module).
	modules map[string]cty.Value
	// value is the object step.NAME.output["PATH"] is evaluated in (see stepValue).
	valueOnce sync.Once
	value     cty.Value
}

// scopeStep is one step of a scope.
type scopeStep struct {
	block   *hcl.Block // until the step is decoded
	outputs []string   // its declared outputs, sorted
	inst    instance   // which instance of the block it is
	count   bool       // the block has count (inst.each is count), not for_each
}

// newStepScope returns an empty scope with room for about n steps.
func newStepScope(prefix string, n int) *stepScope {
	return &stepScope{prefix: prefix, steps: make(map[string]*scopeStep, n), groups: map[string]*repeated{}}
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
// locals, functions and its instance's each or count.
func (s *stepScope) add(l *loader, b *hcl.Block) {
	name := b.Labels[0]
	if s.prefix != "" && !l.declare(s.prefix+".step."+name, b) {
		return
	}
	s.addAll(l, []*hcl.Block{b})
}

// addAll adds the blocks of a scope, each instance of a block with for_each or count as a
// step of its own. The top level's blocks need no declaring (they are declared with every
// other block). A large scope's outputs are evaluated on every core, each worker with a
// fork of the loader, joined in block order: the same outputs and diagnostics as adding the
// blocks one by one (see forked).
func (s *stepScope) addAll(l *loader, blocks []*hcl.Block) {
	type added struct {
		b     *hcl.Block
		inst  instance
		count bool
	}
	all := make([]added, 0, len(blocks))
	for _, b := range blocks {
		if !repeats(b.Body) {
			all = append(all, added{b: b, inst: instance{name: b.Labels[0]}})
			continue
		}
		insts, r := l.instances(b)
		if r != nil {
			s.groups[b.Labels[0]] = r
		}
		for _, in := range insts {
			all = append(all, added{b, in, r != nil && r.count})
		}
	}
	outs := make([][]string, len(all))
	l.forked(len(all), func(fl *loader, lo, hi int) {
		for i := lo; i < hi; i++ {
			outs[i] = fl.declaredOutputs(all[i].b, all[i].inst, all[i].count)
		}
	})
	for i, a := range all {
		s.steps[a.inst.name] = &scopeStep{block: a.b, outputs: outs[i], inst: a.inst, count: a.count}
		s.order = append(s.order, a.inst.name)
	}
}

// declaredOutputs evaluates the outputs attribute of a step block's instance: the sorted,
// valid paths.
func (l *loader) declaredOutputs(b *hcl.Block, in instance, count bool) []string {
	expr := outputsExpr(b.Body)
	if expr == nil {
		return nil
	}
	for _, t := range variables(expr) {
		if r := t.RootName(); r != "var" && r != "local" && r != "each" && r != "count" {
			l.diags = append(l.diags, errorf(t.SourceRange().Ptr(), "Invalid reference in outputs",
				"A step's outputs may refer only to variables, locals and its each or count: other steps see them before this step runs."))
			return nil
		}
	}
	val, diags := l.eval(expr, withInstance(l.baseContext(), in, count), nil)
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

// repeats reports whether a block body has a for_each or count attribute, without decoding
// it (nearly every block has neither).
func repeats(body hcl.Body) bool {
	if sb, ok := body.(*hclsyntax.Body); ok {
		return sb.Attributes["for_each"] != nil || sb.Attributes["count"] != nil
	}
	content, _, _ := body.PartialContent(repetitionSchema)
	return len(content.Attributes) > 0
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
		step := func(name string) cty.Value {
			st := s.steps[name]
			outVal := cty.MapValEmpty(ArtifactType)
			if len(st.outputs) > 0 {
				vals := make(map[string]cty.Value, len(st.outputs))
				for _, o := range st.outputs {
					vals[o] = artifactVal(&Artifact{Kind: ArtifactStepOutput, Node: s.address(name), Path: o})
				}
				outVal = cty.MapVal(vals)
			}
			return cty.ObjectVal(map[string]cty.Value{"output": outVal})
		}
		for name, st := range s.steps {
			if st.inst.each == cty.NilVal {
				attrs[name] = step(name)
			}
		}
		for name, r := range s.groups {
			attrs[name] = r.value(func(in instance) cty.Value { return step(in.name) })
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
	seeds := map[string]cty.Value{}
	caps := map[string]cty.Value{}
	sources := map[string]cty.Value{}
	for addr := range l.declared {
		kind, name, _ := strings.Cut(addr, ".")
		switch kind {
		case "seed":
			if r := l.seedGroups[name]; r != nil {
				seeds[name] = r.value(func(in instance) cty.Value {
					return artifactVal(&Artifact{Kind: ArtifactSeed, Node: l.addr("seed", in.name)})
				})
			} else {
				seeds[name] = artifactVal(&Artifact{Kind: ArtifactSeed, Node: l.addr("seed", name)})
			}
		case "capability":
			caps[name] = artifactVal(&Artifact{Kind: ArtifactCapability, Node: addr})
		case "source":
			sources[name] = l.sourceValue(name)
		}
	}
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"var":        l.varObject(),
			"local":      cty.ObjectVal(l.cfg.Locals),
			"seed":       cty.ObjectVal(seeds),
			"capability": cty.ObjectVal(caps),
			"source":     cty.ObjectVal(sources),
		},
		Functions: l.budget.functions(l.in.functions()),
	}
	if l.localsDone {
		l.ctx = ctx
	}
	return ctx
}

// varObject is var: every variable's value, unknown for one without a value.
func (l *loader) varObject() cty.Value {
	vars := make(map[string]cty.Value, len(l.cfg.Variables))
	for n, v := range l.cfg.Variables {
		if v.Value == cty.NilVal {
			vars[n] = cty.DynamicVal
		} else {
			vars[n] = v.Value
		}
	}
	return cty.ObjectVal(vars)
}

// withSteps returns ctx with the scope's steps as "step".
func withSteps(ctx *hcl.EvalContext, s *stepScope) *hcl.EvalContext {
	vars := make(map[string]cty.Value, len(ctx.Variables)+1)
	for k, v := range ctx.Variables {
		vars[k] = v
	}
	vars["step"] = s.stepValue()
	if s.modules != nil {
		vars["module"] = cty.ObjectVal(s.modules)
	}
	return &hcl.EvalContext{Variables: vars, Functions: ctx.Functions}
}

var refRoots = []string{"var", "local", "seed", "source", "capability", "step", "each", "count", "module"}

// eval checks every reference in expr against what is declared, then evaluates it. Checking
// first gives one precise diagnostic per bad reference, with a suggestion, instead of cty's
// generic "unsupported attribute".
func (l *loader) eval(expr hcl.Expression, ctx *hcl.EvalContext, scope *stepScope) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	for _, t := range expr.Variables() {
		if d := l.checkRef(t, ctx, scope); d != nil {
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

func (l *loader) checkRef(t hcl.Traversal, ctx *hcl.EvalContext, scope *stepScope) *hcl.Diagnostic {
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
	case "each", "count":
		want := map[string]string{"each": "for_each", "count": "count"}[root]
		if _, in := ctx.Variables[root]; !in {
			return errorAt(rng, "Reference to "+root+" outside a repeated block",
				"%s.%s is only available in a step, check or seed block that has %s.", root, name, want)
		}
		attrs := map[string][]string{"each": {"key", "value"}, "count": {"index"}}[root]
		if !ok || !slices.Contains(attrs, name) {
			return errorAt(rng, "Invalid "+root+" reference", "%s has %s.", root, quoteList(prefixed(root+".", attrs)))
		}
		return nil
	case "module":
		return l.checkModuleRef(t, scope)
	case "var", "local", "seed", "source", "capability", "step":
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
	case "seed", "source", "capability":
		if r := l.seedGroups[name]; root == "seed" && r != nil {
			return checkInstance(t, 2, "seed", name, r)
		}
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
		at := 2 // where .output is in t
		st, ok := scope.steps[name]
		if r := scope.groups[name]; r != nil {
			if d := checkInstance(t, 2, "step", name, r); d != nil || len(t) == 2 {
				return d
			}
			in, _ := r.find(t[2].(hcl.TraverseIndex).Key)
			st, ok, at = scope.steps[in.name], true, 3
		}
		if !ok {
			where := "at the top level"
			if scope.prefix != "" {
				where = "in " + scope.prefix
			}
			return errorAt(rng, "Reference to undeclared step", "No step %q is declared %s; a step sees only the steps of its own recipe or product (or the top-level steps).%s",
				name, where, didYouMean(name, scope.blockNames()))
		}
		attr, ok := attrName(at)
		if !ok || attr != "output" {
			return errorAt(rng, "Invalid step reference", "A step's outputs are referred to as step.%s.output[\"/out/PATH\"].", name)
		}
		if len(t) > at+1 {
			if idx, ok := t[at+1].(hcl.TraverseIndex); ok && idx.Key.Type() == cty.String {
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

// checkModuleRef checks a reference to a module's output: module.NAME.OUTPUT, or
// module.NAME[KEY].OUTPUT for a module with for_each or count.
func (l *loader) checkModuleRef(t hcl.Traversal, scope *stepScope) *hcl.Diagnostic {
	rng := t.SourceRange()
	name := ""
	if len(t) > 1 {
		if a, ok := t[1].(hcl.TraverseAttr); ok {
			name = a.Name
		}
	}
	if name == "" {
		return errorAt(rng, "Invalid reference", "A reference to a module's output is module.NAME.OUTPUT.")
	}
	if scope == nil || scope.modules == nil {
		return errorAt(rng, "Invalid reference", "Module outputs can be used in steps, module inputs and outputs of the configuration that holds the module block.")
	}
	m := l.modules[name]
	if m == nil {
		return errorAt(rng, "Reference to undeclared module", "No module %q is declared here.%s", name, didYouMean(name, sortedKeys(l.modules)))
	}
	at := 2
	if m.rep != nil {
		if d := checkInstance(t, 2, "module", name, m.rep); d != nil || len(t) == 2 {
			return d
		}
		at = 3
	}
	if len(t) <= at {
		return nil // the whole module's outputs
	}
	out, ok := t[at].(hcl.TraverseAttr)
	if !ok {
		return errorAt(rng, "Invalid module reference", "A module's outputs are referred to as module.%s.OUTPUT.", name)
	}
	if !slices.Contains(m.outputs, out.Name) {
		return errorAt(rng, "Reference to undeclared module output", "module %q has no output %q; its outputs are %s.%s",
			name, out.Name, quoteList(m.outputs), didYouMean(out.Name, m.outputs))
	}
	return nil
}

// checkInstance checks a reference to block name of the given kind, which has for_each or
// count: t[at] is absent (the whole block) or an index naming one of its instances.
func checkInstance(t hcl.Traversal, at int, kind, name string, r *repeated) *hcl.Diagnostic {
	rng := t.SourceRange()
	if len(t) == at {
		return nil
	}
	meta, example := "for_each", `["KEY"]`
	if r.count {
		meta, example = "count", "[INDEX]"
	}
	idx, ok := t[at].(hcl.TraverseIndex)
	if !ok {
		return errorAt(rng, "Missing instance key", "%s %q has %s: refer to one instance as %s.%s%s, or to all of them with values(%s.%s) or a for expression.",
			kind, name, meta, kind, name, example, kind, name)
	}
	if _, found := r.find(idx.Key); !found {
		key := "that key"
		if idx.Key.IsKnown() && !idx.Key.IsNull() && (idx.Key.Type() == cty.String || idx.Key.Type() == cty.Number) {
			key = InstanceName("", keyText(idx.Key), idx.Key.Type() == cty.Number)
		}
		keys := r.keys()
		return errorAt(rng, "Reference to undeclared instance", "%s %q has no instance %s; its %s gives %s.%s",
			kind, name, key, meta, instanceList(keys, r.count), didYouMean(keyText(idx.Key), keys))
	}
	return nil
}

// keyText is an index key as text ("" when it is not a known string or number).
func keyText(k cty.Value) string {
	switch {
	case k.IsNull() || !k.IsKnown():
		return ""
	case k.Type() == cty.String:
		return k.AsString()
	case k.Type() == cty.Number:
		return k.AsBigFloat().Text('f', -1)
	}
	return ""
}

// instanceList names a block's instances for a diagnostic.
func instanceList(keys []string, count bool) string {
	if len(keys) == 0 {
		return "no instances"
	}
	if count {
		return fmt.Sprintf("[0] to [%d]", len(keys)-1)
	}
	shown := keys
	if len(shown) > 10 {
		shown = shown[:10]
	}
	out := make([]string, len(shown))
	for i, k := range shown {
		out[i] = InstanceName("", k, false)
	}
	s := strings.Join(out, ", ")
	if len(keys) > len(shown) {
		s += fmt.Sprintf(" and %d more", len(keys)-len(shown))
	}
	return s
}

func prefixed(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}

// blockNames are the names of a scope's step blocks (an instance's block once).
func (s *stepScope) blockNames() []string {
	var out []string
	for name, st := range s.steps {
		if st.inst.each == cty.NilVal {
			out = append(out, name)
		}
	}
	for name := range s.groups {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
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

// duration is v as a positive Go duration ("90s", "10m"); a value that is not one gets an
// «Invalid duration» diagnostic naming what, with example and why in its detail.
func (l *loader) duration(v cty.Value, rng hcl.Range, what, example, why string) (time.Duration, bool) {
	s, ok := l.str(v, rng, what)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		l.diags = append(l.diags, errorAt(rng, "Invalid duration", "%s = %q must be a positive duration such as %q%s.", what, s, example, why))
		return d, false
	}
	return d, true
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
	case ArtifactSource:
		return "a source (source.NAME)"
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
