// Package graphcache keeps compiled graphs in a project's state directory, keyed by
// everything the load that made them read, so that planning an unchanged project skips
// parsing, evaluating and compiling it. It follows Go's test cache: a first key covers what
// is known before loading (the foundry build, the *.hcl files, -var values, -var-file
// contents, the evaluation budget); its entry lists what the load read besides (Config.Inputs
// and Config.Globs), and is used only when every one of those re-derives to the digest
// recorded (lang.Changed).
//
// Guarantees: a hit is the graph a load and compile would make now; a damaged, truncated or
// foreign entry (another format, another foundry build) is a miss, never an error; a load
// with diagnostics is never stored. It must never write outside its directory, and writes
// only when the caller commits (see Load).
package graphcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/lang"
)

// formatVersion is bumped whenever the encoding or the meaning of an entry changes.
const formatVersion = "1"

// header starts every entry file; a SHA-256 of the rest follows it.
const header = "foundry-graph-cache " + formatVersion + "\n"

// entry is what a file of the cache holds: the reads of the load besides the first key's,
// and the parts of the configuration and graph that planning and applying use. Parsed files,
// variables and locals are left out: they serve diagnostics and evaluation only.
type entry struct {
	Key string // the first key, to refuse an entry under another name

	Inputs    []lang.InputRecord
	Globs     []lang.GlobRecord
	Dir       string
	Project   *lang.Project
	Seeds     map[string]*lang.Seed
	Sources   map[string]*lang.Source
	Caps      map[string]*lang.Capability
	Recipes   map[string]*lang.Recipe
	Products  map[string]*lang.Product
	Steps     []*lang.Step // top-level, in declaration order
	EvalUsage lang.Usage

	Nodes []graph.CompiledNode
	Order []string
}

// Load loads and compiles the project in dir, from the cache in cacheDir when an entry
// matches; cacheDir "" means no cache. trace, if not nil, is told of each hit and miss
// ("graph cache: hit KEY", "graph cache: miss: WHY"). commit writes a new entry when the
// load was a miss without diagnostics, and records a hit's use; the caller calls it once it
// has decided to write in the state directory at all. cfg is the loaded configuration, for
// rendering diagnostics (nil on a hit, which has none).
func Load(dir string, opts lang.Options, cacheDir string, trace io.Writer) (g *graph.Graph, cfg *lang.Config, diags hcl.Diagnostics, commit func() error) {
	commit = func() error { return nil }
	say := func(format string, args ...any) {
		if trace != nil {
			fmt.Fprintf(trace, "graph cache: "+format+"\n", args...)
		}
	}
	var key string
	if cacheDir != "" {
		var err error
		if key, err = firstKey(dir, opts); err != nil {
			say("miss: %v", err)
		} else {
			path := filepath.Join(cacheDir, key)
			g, why, digests := lookup(path, key, opts.StatCache)
			if g != nil {
				say("hit %s", key[:12])
				return g, nil, nil, func() error { return touch(path) }
			}
			say("miss: %s", why)
			opts.Digests = digests
		}
	}
	cfg, diags = lang.Load(dir, opts)
	if !diags.HasErrors() {
		var cdiags hcl.Diagnostics
		g, cdiags = graph.Compile(cfg)
		diags = append(diags, cdiags...)
	}
	if diags.HasErrors() {
		g = nil
	}
	switch {
	case key == "":
	case len(diags) > 0:
		say("not stored: the load has diagnostics")
	default:
		commit = func() error {
			if err := store(filepath.Join(cacheDir, key), key, g); err != nil {
				return err
			}
			say("stored %s", key[:12])
			return nil
		}
	}
	return g, cfg, diags, commit
}

// firstKey is the digest of what is known before loading: this format and foundry build,
// the project directory, its *.hcl files, the -var values, the -var-file contents and the
// evaluation budget.
func firstKey(dir string, opts lang.Options) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("no build identity: %v", err)
	}
	// The build is the running binary by what stat says of it: a rebuilt or replaced binary
	// has another inode or change time, and hashing it on every load would cost more than
	// a hit saves.
	fi, err := os.Stat(self)
	if err != nil {
		return "", fmt.Errorf("no build identity: %v", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", errors.New("no build identity: no stat data")
	}
	build := fmt.Sprintf("%s %d %d %d %d %d", self, st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
	h := sha256.New()
	field(h, header, runtime.Version(), build, abs)
	names, err := filepath.Glob(filepath.Join(abs, "*.hcl"))
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	field(h, "files", strconv.Itoa(len(names)))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return "", err
		}
		field(h, filepath.Base(n), string(b))
	}
	vars := make([]string, 0, len(opts.Vars))
	for n := range opts.Vars {
		vars = append(vars, n)
	}
	sort.Strings(vars)
	field(h, "vars", strconv.Itoa(len(vars)))
	for _, n := range vars {
		field(h, n, opts.Vars[n])
	}
	field(h, "var-files", strconv.Itoa(len(opts.VarFiles)))
	for _, p := range opts.VarFiles {
		pa, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err // the load reports it
		}
		field(h, pa, string(b))
	}
	b := opts.Budget
	field(h, "budget", strconv.FormatInt(b.MaxValues, 10), strconv.FormatInt(b.MaxBytes, 10), b.Timeout.String())
	return hex.EncodeToString(h.Sum(nil)), nil
}

// field writes each string length-first, so that no two sequences hash alike.
func field(h hash.Hash, ss ...string) {
	var n [8]byte
	for _, s := range ss {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		io.WriteString(h, s)
	}
}

// lookup returns the graph of the entry at path if it is whole, is the entry of key, and
// every read it lists is unchanged; else nil, why not, and the digests it computed in
// finding out (for the load that follows).
func lookup(path, key string, stat *digest.StatCache) (*graph.Graph, string, lang.Digests) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "no entry " + key[:12], lang.Digests{}
	}
	if err != nil {
		return nil, fmt.Sprintf("unreadable entry: %v", err), lang.Digests{}
	}
	e, err := decode(b)
	if err != nil {
		return nil, fmt.Sprintf("damaged entry %s: %v", key[:12], err), lang.Digests{}
	}
	if e.Key != key {
		return nil, fmt.Sprintf("damaged entry %s: it is another key's", key[:12]), lang.Digests{}
	}
	if why, digests := lang.Changed(e.Dir, e.Inputs, e.Globs, stat); why != "" {
		return nil, why, digests
	}
	cfg := &lang.Config{Dir: e.Dir, Files: map[string]*hcl.File{}, Project: e.Project,
		Variables: map[string]*lang.Variable{}, Locals: map[string]cty.Value{},
		Seeds: orEmpty(e.Seeds), Sources: orEmpty(e.Sources), Capabilities: orEmpty(e.Caps), Recipes: orEmpty(e.Recipes), Products: orEmpty(e.Products),
		Steps: make(map[string]*lang.Step, len(e.Steps)), Inputs: e.Inputs, Globs: e.Globs, EvalUsage: e.EvalUsage}
	for _, s := range e.Steps {
		if s == nil {
			return nil, fmt.Sprintf("damaged entry %s: a nil step", key[:12]), lang.Digests{}
		}
		cfg.Steps[s.Name] = s
	}
	cfg.SetDeclaredSteps(e.Steps)
	g, err := graph.Restore(cfg, e.Nodes, e.Order)
	if err != nil {
		return nil, fmt.Sprintf("damaged entry %s: %v", key[:12], err), lang.Digests{}
	}
	return g, "", lang.Digests{}
}

func orEmpty[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

// decode checks an entry file's header and checksum and decodes it. A decoder that panics
// on bytes it was not made for is an error like any other.
func decode(b []byte) (e *entry, err error) {
	rest, ok := bytes.CutPrefix(b, []byte(header))
	if !ok {
		return nil, errors.New("not this format")
	}
	if len(rest) < sha256.Size {
		return nil, errors.New("truncated")
	}
	sum, body := rest[:sha256.Size], rest[sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("checksum mismatch")
	}
	defer func() {
		if r := recover(); r != nil {
			e, err = nil, fmt.Errorf("decoding: %v", r)
		}
	}()
	e = new(entry)
	if err := gob.NewDecoder(bytes.NewReader(body)).Decode(e); err != nil {
		return nil, fmt.Errorf("decoding: %v", err)
	}
	return e, nil
}

// store writes g's entry at path atomically: a temporary file in the same directory, then
// a rename, so that a reader sees a whole entry or none.
func store(path, key string, g *graph.Graph) error {
	c := g.Config
	nodes, order := g.Compiled()
	e := &entry{Key: key, Inputs: c.Inputs, Globs: c.Globs, Dir: c.Dir, Project: c.Project,
		Seeds: c.Seeds, Sources: c.Sources, Caps: c.Capabilities, Recipes: c.Recipes, Products: c.Products,
		Steps: c.DeclaredSteps(), EvalUsage: c.EvalUsage, Nodes: nodes, Order: order}
	var body bytes.Buffer
	if err := gob.NewEncoder(&body).Encode(e); err != nil {
		return fmt.Errorf("graph cache: %w", err)
	}
	sum := sha256.Sum256(body.Bytes())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("graph cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".entry-*")
	if err != nil {
		return fmt.Errorf("graph cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(header)
	if err == nil {
		_, err = tmp.Write(sum[:])
	}
	if err == nil {
		_, err = tmp.Write(body.Bytes())
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("graph cache: %w", err)
	}
	return nil
}

// touch records a hit's use in the entry's modification time, which Prune goes by; it is
// rewritten at most once a minute.
func touch(path string) error {
	now := time.Now()
	if st, err := os.Stat(path); err == nil && now.Sub(st.ModTime()) < time.Minute {
		return nil
	}
	if err := os.Chtimes(path, now, now); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("graph cache: %w", err)
	}
	return nil
}

// Prune deletes all but the keep most recently used entries of the cache in dir, and any
// temporary file older than an hour (left by a writer that died), and returns how many
// files it deleted (or would, when dry) and their bytes.
func Prune(dir string, keep int, dry bool) (removed int, bytesFreed int64, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("graph cache: %w", err)
	}
	type file struct {
		name string
		info os.FileInfo
	}
	var live []file
	for _, de := range ents {
		info, err := de.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if name := de.Name(); len(name) > 0 && name[0] == '.' {
			if time.Since(info.ModTime()) > time.Hour {
				removed, bytesFreed = removed+1, bytesFreed+info.Size()
				if !dry {
					os.Remove(filepath.Join(dir, name))
				}
			}
			continue
		}
		live = append(live, file{de.Name(), info})
	}
	sort.Slice(live, func(i, j int) bool {
		if !live[i].info.ModTime().Equal(live[j].info.ModTime()) {
			return live[i].info.ModTime().After(live[j].info.ModTime())
		}
		return live[i].name < live[j].name
	})
	for i, f := range live {
		if i < keep {
			continue
		}
		removed++
		bytesFreed += f.info.Size()
		if !dry {
			if err := os.Remove(filepath.Join(dir, f.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return removed, bytesFreed, fmt.Errorf("graph cache: %w", err)
			}
		}
	}
	return removed, bytesFreed, nil
}
