package lang

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Modules. A module block loads a directory of the project as a configuration of its own:
//
//	module "tool" {
//	  source   = "./modules/tool"
//	  platform = "linux/arm64" // every other attribute sets one of the module's variables
//	}
//
// The module's files hold variables, locals, seeds, steps, outputs and modules. They are
// loaded like the root's, under the same confinement (paths are relative to the module's
// directory and may not leave the project), and their nodes are addressed under the module:
// module.tool.step.build, module.tool.seed.base. The module's output blocks are what the
// configuration that uses it sees: module.tool.OUTPUT. A module block may have for_each or
// count; its instances are module.tool["KEY"] and module.tool[INDEX].

// moduleLoad is what a loader loading a module's files knows of it.
type moduleLoad struct {
	dir    string   // the module's directory, project-relative ("" is the project)
	stack  []string // the directories being loaded, outermost first
	inputs map[string]*hcl.Attribute
	values map[string]cty.Value // each input's value
}

// moduleRef is a module block as references see it.
type moduleRef struct {
	outputs []string  // its output names, sorted
	rep     *repeated // its instances, nil for a lone module
}

// moduleMeta are the module block's own arguments; every other attribute is an input.
var moduleMeta = map[string]bool{"source": true, "for_each": true, "count": true}

// moduleBlockTypes are the blocks a module's files may hold.
var moduleBlockTypes = map[string]bool{"variable": true, "locals": true, "seed": true, "source": true, "step": true, "output": true, "module": true}

// addr is the address of block kind.name in the configuration l loads.
func (l *loader) addr(kind, name string) string {
	if l.prefix == "" {
		return kind + "." + name
	}
	return l.prefix + "." + kind + "." + name
}

// decodeModules decodes the module blocks, in the order their inputs refer to each other's
// outputs: a cycle among them is reported whole. top is the scope whose steps the inputs
// may mount.
func (l *loader) decodeModules(blocks []*hcl.Block, top *stepScope) {
	l.modules = map[string]*moduleRef{}
	byName := map[string]*hcl.Block{}
	var names []string
	for _, b := range blocks {
		byName[b.Labels[0]] = b
		names = append(names, b.Labels[0])
	}
	uses := func(name string) []string {
		attrs, _ := byName[name].Body.JustAttributes()
		var out []string
		for _, a := range attrs {
			for _, t := range a.Expr.Variables() {
				if t.RootName() == "module" && len(t) > 1 {
					if at, ok := t[1].(hcl.TraverseAttr); ok {
						out = append(out, at.Name)
					}
				}
			}
		}
		slices.Sort(out)
		return out
	}
	if cycle := findCycle(names, uses); len(cycle) > 1 && cycle[0] == cycle[len(cycle)-1] {
		for i := range cycle {
			cycle[i] = "module." + cycle[i]
		}
		l.diags = append(l.diags, errorf(byName[strings.TrimPrefix(cycle[0], "module.")].DefRange.Ptr(), "Module cycle",
			"The inputs of these modules refer to each other's outputs in a cycle: %s. Break it by passing one of them what it needs directly.",
			strings.Join(cycle, " → ")))
		return
	}
	done := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		if done[name] {
			return
		}
		done[name] = true
		for _, u := range uses(name) {
			if byName[u] != nil {
				visit(u)
			}
		}
		l.decodeModule(byName[name], top)
	}
	slices.Sort(names)
	for _, n := range names {
		visit(n)
	}
}

// decodeModule loads the module of block b, each of its instances, and merges their nodes
// into this configuration.
func (l *loader) decodeModule(b *hcl.Block, top *stepScope) {
	name := b.Labels[0]
	attrs, diags := b.Body.JustAttributes()
	l.diags = append(l.diags, diags...)
	src := attrs["source"]
	if src == nil {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Missing module source",
			"module %q needs source = \"./DIR\": the project directory holding the module's files.", name))
		return
	}
	dir, ok := l.moduleDir(src)
	if !ok {
		return
	}
	insts, r := l.instances(b)
	values := map[string]cty.Value{}
	var outputs []string
	for _, in := range insts {
		ml := &moduleLoad{dir: dir, stack: append(slices.Clone(l.moduleStack()), dir), inputs: map[string]*hcl.Attribute{}, values: map[string]cty.Value{}}
		ctx := withInstance(l.baseContext(), in, r != nil && r.count)
		for n, a := range attrs {
			if moduleMeta[n] {
				continue
			}
			v, d := l.eval(a.Expr, ctx, top)
			if d.HasErrors() {
				continue
			}
			ml.inputs[n], ml.values[n] = a, v
		}
		child := l.child(l.addr("module", in.name), ml)
		child.loadModule()
		l.mergeModule(child)
		values[in.name] = child.outputValue()
		outputs = sortedKeys(child.outputs)
	}
	ref := &moduleRef{outputs: outputs, rep: r}
	l.modules[name] = ref
	if r == nil {
		top.setModule(name, values[name])
	} else {
		top.setModule(name, r.value(func(in instance) cty.Value { return values[in.name] }))
	}
}

// moduleStack is the directories of the modules being loaded, outermost first.
func (l *loader) moduleStack() []string {
	if l.module == nil {
		return []string{""}
	}
	return l.module.stack
}

// moduleDir resolves a module's source: a project directory, relative to the directory of the
// configuration that names it, that is not already being loaded.
func (l *loader) moduleDir(a *hcl.Attribute) (string, bool) {
	v, d := a.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid module source",
			"source must be a literal string naming a directory of the project, for example \"./modules/tool\"."))
		return "", false
	}
	s := v.AsString()
	if !strings.HasPrefix(s, "./") && !strings.HasPrefix(s, "../") {
		l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid module source",
			"source = %q: a module comes from a directory of the project, written relative to this one and starting with \"./\".", s))
		return "", false
	}
	base := ""
	if l.module != nil {
		base = l.module.dir
	}
	rel := path.Clean(path.Join(base, s))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid module source", "source = %q leaves the project directory.", s))
		return "", false
	}
	if rel == "." {
		rel = ""
	}
	real, err := filepath.EvalSymlinks(filepath.Join(l.in.dir, filepath.FromSlash(rel)))
	if err == nil && real != l.in.dir && !strings.HasPrefix(real, l.in.dir+string(filepath.Separator)) {
		err = fmt.Errorf("it resolves through a symlink to %s, outside the project directory", real)
	}
	if err == nil {
		if fi, serr := os.Stat(real); serr != nil || !fi.IsDir() {
			err = fmt.Errorf("it is not a directory")
		}
	}
	if err != nil {
		l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid module source", "source = %q: %v.", s, err))
		return "", false
	}
	if stack := l.moduleStack(); slices.Contains(stack, rel) {
		shown := make([]string, 0, len(stack)+1)
		for _, d := range append(slices.Clone(stack), rel) {
			shown = append(shown, "./"+d)
		}
		l.diags = append(l.diags, errorAt(a.Expr.Range(), "Module cycle",
			"The module sources form a cycle: %s. A module cannot contain itself.", strings.Join(shown, " → ")))
		return "", false
	}
	return rel, true
}

// child returns a loader for a module's files, addressed under prefix.
func (l *loader) child(prefix string, m *moduleLoad) *loader {
	c := newLoader(l.in.sub(m.dir), l.budget)
	c.in.charge = l.in.charge
	c.parser, c.prefix, c.module = l.parser, prefix, m
	c.cfg.Project = l.cfg.Project
	return c
}

// loadModule loads a module's files, as load does the project's.
func (l *loader) loadModule() {
	files := l.readFiles(filepath.Join(l.in.dir, filepath.FromSlash(l.module.dir)))
	if files == nil {
		return
	}
	// The module's files are read like any project file, so that a cache of the load (which
	// knows the project's own *.hcl files) notices a change to them, or a new one.
	if _, err := l.in.glob(".", "*.hcl", ""); err != nil {
		l.diags = append(l.diags, errorf(nil, "Cannot read module", "./%s: %v", l.module.dir, err))
	}
	for _, f := range files {
		if _, _, err := l.in.readProjectFile(path.Base(filepath.ToSlash(f.rel))); err != nil {
			l.diags = append(l.diags, errorf(nil, "Cannot read module file", "%s: %v", f.rel, err))
		}
	}
	byType, ok := l.parseAndDeclare(files)
	if !ok {
		return
	}
	for t, bs := range byType {
		if !moduleBlockTypes[t] {
			for _, b := range bs {
				l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Block not allowed in a module",
					"A module holds variable, locals, seed, source, step, output and module blocks; a %s block belongs in the project's own files.", t))
			}
		}
	}
	if !l.decodeGlobals(byType, Options{}) || l.budget.exceeded() {
		return
	}
	top := newStepScope(l.prefix, len(byType["step"]))
	top.modules = map[string]cty.Value{}
	top.addAll(l, byType["step"])
	l.decodeModules(byType["module"], top)
	l.cfg.stepOrder = append(l.decodeSteps(top, l.cfg.Steps), l.cfg.stepOrder...)
	l.decodeOutputs(byType["output"], top)
}

// decodeOutputs evaluates a module's output blocks.
func (l *loader) decodeOutputs(blocks []*hcl.Block, top *stepScope) {
	l.outputs = map[string]cty.Value{}
	for _, b := range blocks {
		content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "value", Required: true}, {Name: "description"}}})
		l.diags = append(l.diags, diags...)
		a := content.Attributes["value"]
		if a == nil {
			continue
		}
		if v, d := l.eval(a.Expr, l.baseContext(), top); !d.HasErrors() {
			l.outputs[b.Labels[0]] = v
		}
	}
}

// outputValue is the module as the configuration that uses it sees it: its outputs.
func (l *loader) outputValue() cty.Value {
	if len(l.outputs) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(l.outputs)
}

// mergeModule adds what a module's loader made to this configuration: its diagnostics, and
// its seeds and steps (and those of its modules) under their addresses.
func (l *loader) mergeModule(c *loader) {
	l.diags = append(l.diags, c.diags...)
	for _, s := range c.cfg.Seeds {
		l.cfg.Seeds[strings.TrimPrefix(s.Address(), "seed.")] = s
	}
	for _, s := range c.cfg.Sources {
		l.cfg.Sources[strings.TrimPrefix(s.Address(), "source.")] = s
	}
	for _, s := range c.cfg.stepOrder {
		l.cfg.Steps[strings.TrimPrefix(s.Address(), "step.")] = s
	}
	l.cfg.stepOrder = append(l.cfg.stepOrder, c.cfg.stepOrder...)
}

// setModule makes module.NAME refer to v in the scope's expressions.
func (s *stepScope) setModule(name string, v cty.Value) {
	if s.modules == nil {
		s.modules = map[string]cty.Value{}
	}
	s.modules[name] = v
}
