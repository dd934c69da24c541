package lang

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/foundry-build/foundry/digest"
)

// maxFileBytes bounds file() and jsonschema(): configuration is not a place for large data.
const maxFileBytes = 16 << 20

// inputs confines project reads to the project directory and records every file or directory
// that evaluation reads, so that a saved plan can tell when any of them changed.
type inputs struct {
	dir     string // absolute project directory with symlinks resolved
	base    string // the project-relative directory paths are written relative to ("" for the project's)
	records map[string]InputRecord
	// hashed memoizes tree and file digests by kind and path for one load: a directory
	// mounted by a thousand steps is hashed once.
	hashed map[string]digest.Digest
	// dirs memoizes dir(PATH) by its argument for one load: resolving the path (symlinks,
	// the .foundry check) cost more than the rest of a step's decoding.
	dirs map[string]InputRecord
	// texts memoizes file(PATH) and jsonschema(PATH) by function and argument for one load:
	// a file that a thousand steps read is read, held and charged to the budget once.
	texts map[string]text
	// charge charges a value made here to the load's evaluation budget.
	charge func(cty.Value) error
	// reads remembers, for every record and every fileset, the real path read and the
	// expression that read it, so that reads reaching sealed cases can be refused with a
	// source range.
	reads map[string]readSite
	// current is the range of the expression being evaluated (set by loader.eval).
	current hcl.Range
	// quiet suppresses recording: suites read their case files through it.
	quiet bool
	// stat remembers file digests across loads (nil: hash everything).
	stat *digest.StatCache
	// globs records every glob expanded (fileset, suite cases) by base and pattern, quiet
	// or not: a file that starts or stops matching changes what a load makes.
	globs map[string]GlobRecord
}

// text is a memoized file() or jsonschema() result and the read it records.
type text struct {
	val cty.Value
	rec InputRecord
}

type readSite struct {
	real string
	rng  hcl.Range
	what string // "file(\"x\")" etc., for messages
}

// hash returns the digest of a file or tree, computing it once per load.
func (in *inputs) hash(kind ArtifactKind, path string, dir bool) (digest.Digest, error) {
	key := string(kind) + "\x00" + path
	if d, ok := in.hashed[key]; ok {
		return d, nil
	}
	var d digest.Digest
	var err error
	if dir {
		_, d, err = digest.DirCached(path, in.stat)
	} else {
		d, _, err = digest.FileCached(path, in.stat)
	}
	if err != nil {
		return "", err
	}
	in.hashed[key] = d
	return d, nil
}

func newInputs(dir string) (*inputs, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	return &inputs{dir: real, records: map[string]InputRecord{}, hashed: map[string]digest.Digest{}, dirs: map[string]InputRecord{},
		texts: map[string]text{}, reads: map[string]readSite{}, globs: map[string]GlobRecord{}, charge: func(cty.Value) error { return nil }}, nil
}

func (in *inputs) record(r InputRecord) {
	if in.quiet {
		return
	}
	key := r.Kind + "\x00" + r.Path
	in.records[key] = r
	if _, seen := in.reads[key]; !seen { // the first read is the one reported
		real := r.Path
		if r.Kind == string(ArtifactProjectFile) || r.Kind == string(ArtifactProjectDir) {
			real = filepath.Join(in.dir, filepath.FromSlash(r.Path))
		}
		if rp, err := filepath.EvalSymlinks(real); err == nil {
			real = rp
		}
		fn := map[string]string{string(ArtifactProjectFile): "file", string(ArtifactProjectDir): "dir",
			string(ArtifactHostFile): "host_file", string(ArtifactHostDir): "host_dir"}[r.Kind]
		in.reads[key] = readSite{real: real, rng: in.current, what: fmt.Sprintf("%s(%q)", fn, r.Path)}
	}
}

// noteRead remembers a read that records no input, for the sealed-case check: real is the
// path read, symlinks resolved.
func (in *inputs) noteRead(key, real, what string) {
	if in.quiet {
		return
	}
	if _, seen := in.reads[key]; !seen {
		in.reads[key] = readSite{real: real, rng: in.current, what: what}
	}
}

// sub returns inputs for a module's files: paths they name are relative to the module's
// directory base (project-relative), under the same confinement. What they read is recorded
// with the project's reads; the memos, keyed by the paths as written, are its own.
func (in *inputs) sub(base string) *inputs {
	return &inputs{dir: in.dir, base: base, records: in.records, hashed: in.hashed, dirs: map[string]InputRecord{},
		texts: map[string]text{}, reads: in.reads, quiet: in.quiet, stat: in.stat, charge: in.charge, globs: in.globs}
}

// fork returns inputs for another goroutine: the same project and stat cache (which locks),
// its own records and memos, seeded with these.
func (in *inputs) fork() *inputs {
	return &inputs{dir: in.dir, base: in.base, records: map[string]InputRecord{}, hashed: maps.Clone(in.hashed),
		dirs: maps.Clone(in.dirs), texts: maps.Clone(in.texts), reads: map[string]readSite{}, quiet: in.quiet,
		stat: in.stat, charge: in.charge, globs: map[string]GlobRecord{}}
}

// join adds the records and memos of a fork, as if in had read them after its own: a read
// site already known stays, so the first read in step order is the one reported.
func (in *inputs) join(f *inputs) {
	maps.Copy(in.records, f.records)
	maps.Copy(in.hashed, f.hashed)
	maps.Copy(in.dirs, f.dirs)
	maps.Copy(in.texts, f.texts)
	maps.Copy(in.globs, f.globs)
	for k, r := range f.reads {
		if _, seen := in.reads[k]; !seen {
			in.reads[k] = r
		}
	}
}

// sorted returns the records ordered by kind then path.
func (in *inputs) sorted() []InputRecord {
	out := make([]InputRecord, 0, len(in.records))
	for _, r := range in.records {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Path < out[j].Path
	})
	return out
}

// projectPath resolves p, a path written in the configuration, inside the project directory.
// It refuses absolute paths, ".." elements and symlinks that lead outside the project: recipe
// files may come from authors the operator does not fully trust, and host paths must enter
// through host_file/host_dir, where the plan lists them.
func (in *inputs) projectPath(p string) (abs, rel string, err error) {
	if p == "" {
		return "", "", errors.New("path is empty")
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") {
		return "", "", fmt.Errorf("%q is absolute: project paths are relative to the project directory (use host_file or host_dir in a seed for host paths)", p)
	}
	for _, el := range strings.Split(filepath.ToSlash(p), "/") {
		if el == ".." {
			return "", "", fmt.Errorf("%q contains \"..\": project paths may not leave the project directory", p)
		}
	}
	rel = path.Clean(path.Join(in.base, filepath.ToSlash(p)))
	joined := filepath.Join(in.dir, filepath.FromSlash(rel))
	real, err := filepath.EvalSymlinks(joined)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("%q does not exist in the project directory", p)
		}
		return "", "", err
	}
	if real != in.dir && !strings.HasPrefix(real, in.dir+string(filepath.Separator)) {
		return "", "", fmt.Errorf("%q resolves through a symlink to %s, outside the project directory", p, real)
	}
	if rel == ".foundry" || strings.HasPrefix(rel, ".foundry/") {
		return "", "", fmt.Errorf("%q is inside Foundry's state directory .foundry", p)
	}
	return real, rel, nil
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func (in *inputs) readProjectFile(p string) ([]byte, string, error) {
	b, rec, err := in.readProject(p)
	if err != nil {
		return nil, "", err
	}
	in.record(rec)
	return b, rec.Path, nil
}

// readText returns what makeText makes of the project file p, the value of a call of fn,
// reading and making it once per load: later calls record the read again and return the
// same value. The value is charged to the budget when it is made.
func (in *inputs) readText(fn, p string, makeText func(b []byte, rel string) (cty.Value, error)) (cty.Value, error) {
	key := fn + "\x00" + p
	if t, ok := in.texts[key]; ok {
		in.record(t.rec)
		return t.val, nil
	}
	b, rec, err := in.readProject(p)
	if err != nil {
		return cty.NilVal, function.NewArgError(0, err)
	}
	in.record(rec)
	v, err := makeText(b, rec.Path)
	if err != nil {
		return cty.NilVal, err
	}
	if err := in.charge(v); err != nil {
		return cty.NilVal, err
	}
	in.texts[key] = text{v, rec}
	return v, nil
}

// readProject reads the project file p and returns its text and the read to record.
func (in *inputs) readProject(p string) ([]byte, InputRecord, error) {
	abs, rel, err := in.projectPath(p)
	if err != nil {
		return nil, InputRecord{}, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, InputRecord{}, err
	}
	if st.IsDir() {
		return nil, InputRecord{}, fmt.Errorf("%q is a directory; use dir() for directories", p)
	}
	if st.Size() > maxFileBytes {
		return nil, InputRecord{}, fmt.Errorf("%q is %d bytes; files read into the configuration are limited to %d", p, st.Size(), maxFileBytes)
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, InputRecord{}, err
	}
	return b, InputRecord{Kind: string(ArtifactProjectFile), Path: rel, Digest: digest.FromBytes(b)}, nil
}

func fileMode(st os.FileInfo) uint32 {
	if st.Mode()&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// functions returns the function table of the language. See spec/language.md.
func (in *inputs) functions() map[string]function.Function {
	fns := map[string]function.Function{
		"file":       in.fileFunc(),
		"dir":        in.dirFunc(),
		"fileset":    in.filesetFunc(),
		"host_file":  in.hostFileFunc(),
		"host_dir":   in.hostDirFunc(),
		"jsonschema": in.jsonschemaFunc(),
		"filesha256": in.filesha256Func(),
		"sha256":     sha256Func,
		"jsonencode": stdlib.JSONEncodeFunc,
		"jsondecode": stdlib.JSONDecodeFunc,
		"abs":        stdlib.AbsoluteFunc,
		"ceil":       stdlib.CeilFunc,
		"chomp":      stdlib.ChompFunc,
		"coalesce":   stdlib.CoalesceFunc,
		"compact":    stdlib.CompactFunc,
		"concat":     stdlib.ConcatFunc,
		"contains":   stdlib.ContainsFunc,
		"distinct":   stdlib.DistinctFunc,
		"element":    stdlib.ElementFunc,
		"flatten":    stdlib.FlattenFunc,
		"floor":      stdlib.FloorFunc,
		"format":     stdlib.FormatFunc,
		"formatlist": stdlib.FormatListFunc,
		"indent":     stdlib.IndentFunc,
		"join":       stdlib.JoinFunc,
		"keys":       stdlib.KeysFunc,
		"length":     stdlib.LengthFunc,
		"lookup":     stdlib.LookupFunc,
		"lower":      stdlib.LowerFunc,
		"max":        stdlib.MaxFunc,
		"merge":      stdlib.MergeFunc,
		"min":        stdlib.MinFunc,
		"parseint":   stdlib.ParseIntFunc,
		"range":      stdlib.RangeFunc,
		"regex":      stdlib.RegexFunc,
		"regexall":   stdlib.RegexAllFunc,
		"replace":    stdlib.ReplaceFunc,
		"reverse":    stdlib.ReverseListFunc,
		"setunion":   stdlib.SetUnionFunc,
		"slice":      stdlib.SliceFunc,
		"sort":       stdlib.SortFunc,
		"split":      stdlib.SplitFunc,
		"strlen":     stdlib.StrlenFunc,
		"substr":     stdlib.SubstrFunc,
		"title":      stdlib.TitleFunc,
		"tolist":     stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":      stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber":   stdlib.MakeToFunc(cty.Number),
		"toset":      stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":   stdlib.MakeToFunc(cty.String),
		"trim":       stdlib.TrimFunc,
		"trimprefix": stdlib.TrimPrefixFunc,
		"trimspace":  stdlib.TrimSpaceFunc,
		"trimsuffix": stdlib.TrimSuffixFunc,
		"upper":      stdlib.UpperFunc,
		"values":     stdlib.ValuesFunc,
		"zipmap":     stdlib.ZipmapFunc,
	}
	return fns
}

var pathParam = []function.Parameter{{Name: "path", Type: cty.String}}

// file(path) returns the UTF-8 text of a project file.
func (in *inputs) fileFunc() function.Function {
	return function.New(&function.Spec{
		Params: pathParam,
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return in.readText("file", args[0].AsString(), func(b []byte, _ string) (cty.Value, error) {
				if !utf8.Valid(b) {
					return cty.NilVal, function.NewArgErrorf(0, "%q is not valid UTF-8 text; mount binary files with dir() instead", args[0].AsString())
				}
				return cty.StringVal(string(b)), nil
			})
		},
	})
}

// dir(path) returns a project directory as an Artifact addressed by its tree digest.
func (in *inputs) dirFunc() function.Function {
	return function.New(&function.Spec{
		Params: pathParam,
		Type:   function.StaticReturnType(ArtifactType),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			if r, ok := in.dirs[p]; ok {
				in.record(r)
				return artifactVal(&Artifact{Kind: ArtifactProjectDir, Path: r.Path, IsDir: true, Digest: r.Digest}), nil
			}
			abs, rel, err := in.projectPath(p)
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			st, err := os.Stat(abs)
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			if !st.IsDir() {
				return cty.NilVal, function.NewArgErrorf(0, "%q is a file, not a directory; use file() for a file's text", p)
			}
			if exists(filepath.Join(abs, ".foundry")) {
				return cty.NilVal, function.NewArgErrorf(0, "%q contains Foundry's state directory .foundry; mount a subdirectory instead", p)
			}
			d, err := in.hash(ArtifactProjectDir, abs, true)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "hashing %q: %v", p, err)
			}
			r := InputRecord{Kind: string(ArtifactProjectDir), Path: rel, Digest: d}
			in.dirs[p] = r
			in.record(r)
			return artifactVal(&Artifact{Kind: ArtifactProjectDir, Path: rel, IsDir: true, Digest: d}), nil
		},
	})
}

// fileset(path, pattern) returns the set of files under a project directory that match a
// glob ("*" within a path element, "**" across elements), as paths relative to path.
func (in *inputs) filesetFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}, {Name: "pattern", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Set(cty.String)),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			base, pattern := args[0].AsString(), args[1].AsString()
			matches, err := in.glob(base, pattern, "")
			if err != nil {
				return cty.NilVal, function.NewArgError(1, err)
			}
			// It records no input, but its names are a read all the same: a fileset of a
			// directory that holds sealed cases is refused as dir() of it is.
			if abs, _, err := in.projectPath(base); err == nil {
				in.noteRead("fileset\x00"+base, abs, fmt.Sprintf("fileset(%q, %q)", base, pattern))
			}
			if len(matches) == 0 {
				return cty.SetValEmpty(cty.String), nil
			}
			vals := make([]cty.Value, len(matches))
			for i, m := range matches {
				vals[i] = cty.StringVal(m)
			}
			return cty.SetVal(vals), nil
		},
	})
}

// glob lists regular files under the project directory base that match pattern, relative to
// base, sorted. Symlinks are not followed. It records the glob (GlobRecord), for the suite
// input it lists the cases of when suite is set.
func (in *inputs) glob(base, pattern, suite string) ([]string, error) {
	abs, relBase, err := in.projectPath(base)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(pattern, "/") || strings.Contains("/"+pattern+"/", "/../") {
		return nil, fmt.Errorf("pattern %q must be relative and may not contain \"..\"", pattern)
	}
	if _, err := path.Match(strings.ReplaceAll(pattern, "**", "*"), ""); err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	var out []string
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".foundry" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(abs, p)
		rel = filepath.ToSlash(rel)
		if globMatch(strings.Split(pattern, "/"), strings.Split(rel, "/")) {
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	if err == nil && in.globs != nil {
		// Base is recorded project-relative: a module's base is its directory's.
		in.globs[suite+"\x00"+relBase+"\x00"+pattern] = GlobRecord{Base: relBase, Pattern: pattern, Suite: suite, Digest: globDigest(out)}
	}
	return out, err
}

// globDigest is the digest of a glob's sorted matches.
func globDigest(matches []string) digest.Digest {
	return digest.FromBytes([]byte(strings.Join(matches, "\x00")))
}

// sortedGlobs returns the globs ordered by suite, base, then pattern.
func (in *inputs) sortedGlobs() []GlobRecord {
	out := make([]GlobRecord, 0, len(in.globs))
	for _, g := range in.globs {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Suite != out[j].Suite {
			return out[i].Suite < out[j].Suite
		}
		if out[i].Base != out[j].Base {
			return out[i].Base < out[j].Base
		}
		return out[i].Pattern < out[j].Pattern
	})
	return out
}

// globMatch matches path elements against pattern elements; "**" matches zero or more elements.
func globMatch(pat, elems []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(elems); i++ {
				if globMatch(pat[1:], elems[i:]) {
					return true
				}
			}
			return false
		}
		if len(elems) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], elems[0]); !ok {
			return false
		}
		pat, elems = pat[1:], elems[1:]
	}
	return len(elems) == 0
}

func hostPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q is not absolute: host paths must be absolute", p)
	}
	return filepath.Clean(p), nil
}

// host_file(path) returns a host file as an Artifact (symlinks are followed: the content is
// what is hashed and packed); host_dir(path) a host directory tree, by its tree digest.
func (in *inputs) hostFileFunc() function.Function { return in.hostFunc(false) }
func (in *inputs) hostDirFunc() function.Function  { return in.hostFunc(true) }

func (in *inputs) hostFunc(dir bool) function.Function {
	kind, wrong := ArtifactHostFile, "%q is not a regular file (use host_dir for directories)"
	if dir {
		kind, wrong = ArtifactHostDir, "%q is not a directory (use host_file for files)"
	}
	return function.New(&function.Spec{
		Params: pathParam,
		Type:   function.StaticReturnType(ArtifactType),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, err := hostPath(args[0].AsString())
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			st, err := os.Stat(p)
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			if dir != st.IsDir() || (!dir && !st.Mode().IsRegular()) {
				return cty.NilVal, function.NewArgErrorf(0, wrong, p)
			}
			if err := in.refuseStateDir(p, dir); err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			d, err := in.hash(kind, p, dir)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "hashing %q: %v", p, err)
			}
			a := &Artifact{Kind: kind, Path: p, Digest: d, IsDir: dir}
			if !dir {
				a.Mode = fileMode(st)
			}
			in.record(InputRecord{Kind: string(kind), Path: p, Digest: d, Mode: a.Mode})
			return artifactVal(a), nil
		},
	})
}

// refuseStateDir refuses host path p when it is the project's state directory or inside it,
// or, for a directory, holds it: the signing keys, registry and state database there are
// Foundry's own, and an image packed from them would hand them to every step and candidate
// that runs on it. dir() and file() refuse the same by project path (projectPath); symlinks
// are resolved, and the state directory need not exist yet (the first apply makes it).
func (in *inputs) refuseStateDir(p string, dir bool) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	state := filepath.Join(in.dir, ".foundry")
	within := func(child, parent string) bool {
		rel, err := filepath.Rel(parent, child)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	switch {
	case within(real, state):
		return fmt.Errorf("%q is inside the project's state directory %s, which holds its signing key, registry and state", p, state)
	case dir && within(state, real):
		return fmt.Errorf("%q contains the project's state directory %s, which holds its signing key, registry and state; name a directory beside it", p, state)
	}
	return nil
}

// noLoader refuses every external $ref: schemas are self-contained so that a schema's meaning
// is fixed by the bytes the contract digest covers.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q: schemas must be self-contained", url)
}

// jsonschema(path) reads a project file holding a JSON Schema (Draft 2020-12 unless the
// schema says otherwise), checks that it compiles, and returns its RFC 8785 canonical JSON.
func (in *inputs) jsonschemaFunc() function.Function {
	return function.New(&function.Spec{
		Params: pathParam,
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return in.readText("jsonschema", args[0].AsString(), func(b []byte, rel string) (cty.Value, error) {
				canon, err := CompileSchema(rel, b)
				if err != nil {
					return cty.NilVal, function.NewArgError(0, err)
				}
				return cty.StringVal(string(canon)), nil
			})
		},
	})
}

// CompileSchema checks that b is valid, self-contained JSON Schema and returns it with
// insignificant whitespace removed. It is deliberately not RFC 8785 canonical: JCS rounds
// numbers to doubles, and a schema's "maximum": 9223372036854775807 must keep its meaning.
func CompileSchema(name string, b []byte) ([]byte, error) {
	if _, err := digest.Canonicalize(b); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %v", name, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %v", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(compact.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	loc := "foundry:///" + name
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if _, err := c.Compile(loc); err != nil {
		return nil, fmt.Errorf("%s is not a valid JSON Schema: %v", name, err)
	}
	return compact.Bytes(), nil
}

// filesha256(path) returns the hex SHA-256 of a project file.
func (in *inputs) filesha256Func() function.Function {
	return function.New(&function.Spec{
		Params: pathParam,
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			b, _, err := in.readProjectFile(args[0].AsString())
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			sum := sha256.Sum256(b)
			return cty.StringVal(hex.EncodeToString(sum[:])), nil
		},
	})
}

// sha256(string) returns the hex SHA-256 of a string's UTF-8 bytes.
var sha256Func = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		sum := sha256.Sum256([]byte(args[0].AsString()))
		return cty.StringVal(hex.EncodeToString(sum[:])), nil
	},
})
