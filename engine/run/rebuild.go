package run

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/store"
)

// A rebuild (apply -rebuild ADDRESS, spec/cli.md) runs a step whose result is cached again,
// in a fresh sandbox with every cache volume it mounts empty, and compares each output byte
// for byte with the cached one. The cached result stays; an identical rebuild is recorded
// as signed provenance that names the execution it reproduced (provenance.md §5,
// internalParameters.reproduces), and a difference fails the step with a report of each
// differing file.

// rebuildStep rebuilds n, whose cached result under key is orig.
func (r *runner) rebuildStep(ctx context.Context, n *graph.Node, key digest.Digest, keyDef []byte, orig *cache.Result) error {
	if n.Kind != graph.KindStep && n.Kind != graph.KindCheck {
		return fmt.Errorf("%s: -rebuild rebuilds steps and checks", n.Address)
	}
	if len(orig.Attestations) == 0 {
		return fmt.Errorf("%s: its cached result has no provenance to reproduce (a step that makes no output)", n.Address)
	}
	_, err := r.runActionMode(ctx, n, key, keyDef, "rebuilding (-rebuild): a fresh sandbox, empty caches", &rebuildMode{orig: orig})
	return err
}

// rebuildRecipe rebuilds each step of a recipe with reproducible = true (nodes, in order),
// once its steps have been built: a candidate is evaluated only when every one made the
// same bytes again in a fresh sandbox with empty caches.
func (r *runner) rebuildRecipe(ctx context.Context, nodes []string) error {
	for _, a := range nodes {
		n := r.g.Nodes[a]
		if n.Kind != graph.KindStep {
			continue
		}
		key, keyDef, ok, err := r.g.CacheKey(n, r.content)
		if err == nil && !ok {
			err = fmt.Errorf("%s: what it mounts was not built", n.Address)
		}
		if err != nil {
			return err
		}
		res := r.result(a)
		if res == nil || res.step == nil {
			return fmt.Errorf("%s has no result to rebuild", a)
		}
		if err := r.rebuildStep(ctx, n, key, keyDef, res.step); err != nil {
			return err
		}
	}
	return nil
}

// rebuildMode is how execute runs a rebuild: against orig, caching nothing.
type rebuildMode struct {
	orig *cache.Result
}

// compare reports each output of got that differs from orig's, file by file; "" when all
// are identical.
func (m *rebuildMode) compare(st *store.Store, got []cache.Output) string {
	var b strings.Builder
	want := map[string]cache.Output{}
	for _, o := range m.orig.Outputs {
		want[o.Path] = o
	}
	for _, o := range got {
		w, ok := want[o.Path]
		delete(want, o.Path)
		switch {
		case !ok:
			fmt.Fprintf(&b, "%s: made by the rebuild only\n", o.Path)
		case w.Digest == o.Digest:
		case w.Kind == cache.File && o.Kind == cache.File:
			b.WriteString(fileDiff(st, o.Path, w.Digest, o.Digest))
		case w.Kind == cache.Tree && o.Kind == cache.Tree:
			b.WriteString(treeDiff(st, o.Path, w.Digest, o.Digest))
		default:
			fmt.Fprintf(&b, "%s: a %s in the cached result, a %s in the rebuild\n", o.Path, w.Kind, o.Kind)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		fmt.Fprintf(&b, "%s: in the cached result only\n", p)
	}
	return b.String()
}

// reproduced is the message of an identical rebuild: how many files it made again, bit for
// bit, and each output's digest (a file's is the SHA-256 of its bytes, as sha256sum prints it).
func (m *rebuildMode) reproduced(st *store.Store) string {
	files := 0
	var each []string
	for _, o := range m.orig.Outputs {
		each = append(each, o.Path+" "+string(o.Digest))
		if o.Kind != cache.Tree {
			files++
			continue
		}
		man, err := st.ReadManifest(o.Digest)
		if err != nil {
			return fmt.Sprintf("reproduced bit for bit: %s (tree %s unreadable: %v)", strings.Join(each, ", "), o.Digest, err)
		}
		for _, e := range man.Entries {
			if e.Type == digest.TypeFile {
				files++
			}
		}
	}
	noun := "files"
	if files == 1 {
		noun = "file"
	}
	return fmt.Sprintf("reproduced bit for bit: %d %s, %s", files, noun, strings.Join(each, ", "))
}

// treeDiff reports the files of two trees that differ.
func treeDiff(st *store.Store, root string, a, b digest.Digest) string {
	ma, err := st.ReadManifest(a)
	if err != nil {
		return fmt.Sprintf("%s: cached tree %s: %v\n", root, a, err)
	}
	mb, err := st.ReadManifest(b)
	if err != nil {
		return fmt.Sprintf("%s: rebuilt tree %s: %v\n", root, b, err)
	}
	ea := map[string]digest.Entry{}
	for _, e := range ma.Entries {
		ea[e.Path] = e
	}
	var out strings.Builder
	for _, e := range mb.Entries {
		p := root + "/" + e.Path
		o, ok := ea[e.Path]
		delete(ea, e.Path)
		switch {
		case !ok:
			fmt.Fprintf(&out, "%s: made by the rebuild only\n", p)
		case o == e:
		case o.Type == digest.TypeFile && e.Type == digest.TypeFile && o.Digest != e.Digest:
			out.WriteString(fileDiff(st, p, o.Digest, e.Digest))
		default:
			fmt.Fprintf(&out, "%s: cached %s mode %o %s%s, rebuilt %s mode %o %s%s\n", p, o.Type, o.Mode, o.Digest, o.Target, e.Type, e.Mode, e.Digest, e.Target)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(ea)) {
		fmt.Fprintf(&out, "%s: in the cached result only\n", root+"/"+p)
	}
	return out.String()
}

// fileDiff reports one differing file: both digests and sizes, the first differing offset,
// and for text the first differing lines.
func fileDiff(st *store.Store, p string, a, b digest.Digest) string {
	ba, erra := st.Get(a)
	bb, errb := st.Get(b)
	if erra != nil || errb != nil {
		return fmt.Sprintf("%s: cached %s, rebuilt %s (contents unreadable: %v)\n", p, a, b, errorsOf(erra, errb))
	}
	return describeDiff(p, a, b, ba, bb)
}

func errorsOf(errs ...error) string {
	var s []string
	for _, e := range errs {
		if e != nil {
			s = append(s, e.Error())
		}
	}
	return strings.Join(s, "; ")
}

// describeDiff is fileDiff's report of contents ba (cached, digest a) and bb (rebuilt).
func describeDiff(p string, a, b digest.Digest, ba, bb []byte) string {
	off := 0
	for off < len(ba) && off < len(bb) && ba[off] == bb[off] {
		off++
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%s differs: cached %s (%d bytes), rebuilt %s (%d bytes); first difference at byte %d\n", p, a, len(ba), b, len(bb), off)
	if isText(ba) && isText(bb) {
		la, lb := strings.Split(string(ba), "\n"), strings.Split(string(bb), "\n")
		line := bytes.Count(ba[:off], []byte("\n"))
		for i := line; i < line+3 && (i < len(la) || i < len(lb)); i++ {
			if i < len(la) {
				fmt.Fprintf(&out, "  -%d: %s\n", i+1, clip(la[i]))
			}
			if i < len(lb) {
				fmt.Fprintf(&out, "  +%d: %s\n", i+1, clip(lb[i]))
			}
		}
	}
	return out.String()
}

// isText reports whether b looks like text: valid UTF-8 without NUL, of a size worth showing.
func isText(b []byte) bool {
	return len(b) <= 1<<20 && utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}

func clip(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

// emptyCacheDirs makes an empty, writable directory for each cache n mounts, in scratch: a
// rebuild's caches, which no other step ever saw.
func emptyCacheDirs(n *graph.Node, scratch string) ([]cacheLease, error) {
	var out []cacheLease
	for _, target := range slices.Sorted(maps.Keys(n.Step.Caches)) {
		dir := filepath.Join(scratch, "cache-"+fmt.Sprint(len(out)))
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return nil, err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return nil, err
		}
		out = append(out, cacheLease{target: target, name: n.Step.Caches[target].Name, empty: dir})
	}
	return out, nil
}
