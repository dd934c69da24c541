package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/store"
)

// A tree is built in memory, entry by entry, from what an archive, a git commit or an OCI
// image's layers say, and only then stored: file contents go into the content store as
// blobs as they are read (bounded), and the manifest last. Nothing an archive says is ever
// written to the host's filesystem by path, so no name, link or device in it can reach
// anything outside the store; what the store later materializes is a manifest that
// store.ReadManifest checked. The rules (spec/language.md §6a):
//
//   - names are relative, clean once "./" and "." are dropped, valid UTF-8, and never have a
//     ".." element: an absolute name or one with ".." is refused, not rewritten;
//   - a name may not pass through a symlink or a file of the tree (a/b where a is a link);
//   - a symlink's target must resolve inside the tree, following the tree's own links
//     (an absolute target, or one whose ".." climbs above the root, is refused);
//   - a hard link is a copy of a regular file named earlier in the same archive (no link is
//     ever made); one to anything else is refused;
//   - devices, FIFOs and sockets are refused;
//   - the files' bytes and the number of entries are bounded (lang.SourceLimits).

// ErrHostile wraps every refusal of what an archive says (as opposed to failing to read it).
var ErrHostile = errors.New("refused")

// Bounds on names and link targets, whatever the limits: the manifest holds them all.
const (
	maxNameBytes   = 4096
	maxTargetBytes = 4096
	maxLinkHops    = 40 // as Linux's ELOOP
)

// treeEntry is an entry of a tree being built.
type treeEntry struct {
	digest.Entry
	implicit bool // a directory no entry named: made for an entry under it
	layer    int  // the layer that made it (OCI images; 0 for an archive)
}

// tree builds a tree from entries and stores it.
type tree struct {
	ctx     context.Context
	st      *store.Store
	lim     lang.SourceLimits
	entries map[string]*treeEntry
	files   int64 // bytes of files read so far
	// layered trees (OCI images) let a later layer replace what an earlier one made, and
	// delete it with whiteouts; an archive may name a path only once.
	layered bool
	layer   int
}

func newTree(ctx context.Context, st *store.Store, lim lang.SourceLimits, layered bool) *tree {
	return &tree{ctx: ctx, st: st, lim: lim, entries: map[string]*treeEntry{}, layered: layered}
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrHostile, fmt.Sprintf(format, args...))
}

// cleanName makes an archive entry's name a tree path: "./" prefixes and "." elements
// dropped, a trailing slash dropped; "" for the archive's root itself. An absolute name, a
// ".." element, an empty element in the middle, a NUL or invalid UTF-8 is refused.
func cleanName(name string) (string, error) {
	if len(name) > maxNameBytes {
		return "", refuse("an entry's name is longer than %d bytes", maxNameBytes)
	}
	if !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return "", refuse("entry %q: its name is not valid UTF-8 text", name)
	}
	if strings.HasPrefix(name, "/") {
		return "", refuse("entry %q has an absolute name", name)
	}
	var parts []string
	for _, p := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		switch p {
		case ".":
			continue
		case "..":
			return "", refuse("entry %q has a \"..\" element", name)
		case "":
			if len(parts) > 0 {
				return "", refuse("entry %q has an empty element", name)
			}
			continue
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "/"), nil
}

// strip removes n leading elements of p, and reports false when nothing is left.
func strip(p string, n int) (string, bool) {
	for ; n > 0; n-- {
		_, rest, ok := strings.Cut(p, "/")
		if !ok {
			return "", false
		}
		p = rest
	}
	return p, p != ""
}

// count charges one entry.
func (t *tree) count() error {
	if len(t.entries) >= t.lim.Entries {
		return refuse("more than %d entries (limits.entries)", t.lim.Entries)
	}
	return nil
}

// parent makes p's parent directories (implicit ones where nothing named them), refusing a
// parent that is a file or a link.
func (t *tree) parents(p string) error {
	dir := path.Dir(p)
	if dir == "." {
		return nil
	}
	if e := t.entries[dir]; e != nil {
		if e.Type != digest.TypeDir {
			return refuse("entry %q is under %q, which is a %s, not a directory", p, dir, e.Type)
		}
		return nil
	}
	if err := t.parents(dir); err != nil {
		return err
	}
	if err := t.count(); err != nil {
		return err
	}
	t.entries[dir] = &treeEntry{Entry: digest.Entry{Path: dir, Type: digest.TypeDir, Mode: digest.ModeDir}, implicit: true, layer: t.layer}
	return nil
}

// put adds e at its path: after its parents, and in place of what is there when the tree
// is layered (a directory over a directory keeps what is in it).
func (t *tree) put(e treeEntry) error {
	if err := t.parents(e.Path); err != nil {
		return err
	}
	if old := t.entries[e.Path]; old != nil {
		switch {
		case old.Type == digest.TypeDir && e.Type == digest.TypeDir && (old.implicit || t.layered):
			old.implicit, old.layer = false, t.layer
			return nil
		case !t.layered:
			return refuse("entry %q is named twice", e.Path)
		}
		t.remove(old)
	}
	if err := t.count(); err != nil {
		return err
	}
	e.layer = t.layer
	t.entries[e.Path] = &e
	return nil
}

// remove deletes e and, for a directory, everything under it.
func (t *tree) remove(e *treeEntry) {
	delete(t.entries, e.Path)
	if e.Type != digest.TypeDir {
		return
	}
	for q := range t.entries {
		if strings.HasPrefix(q, e.Path+"/") {
			delete(t.entries, q)
		}
	}
}

// dir adds a directory.
func (t *tree) dir(p string) error {
	return t.put(treeEntry{Entry: digest.Entry{Path: p, Type: digest.TypeDir, Mode: digest.ModeDir}})
}

// file reads a file's bytes into the store and adds it, executable when any execute bit
// of mode is set.
func (t *tree) file(p string, mode int64, r io.Reader) error {
	if err := t.parents(p); err != nil { // before its bytes are stored
		return err
	}
	left := t.lim.Unpacked - t.files
	lr := &io.LimitedReader{R: store.ContextReader(t.ctx, r), N: left + 1}
	d, n, err := t.st.Put(lr)
	if lr.N == 0 {
		return refuse("the files hold more than %d bytes (limits.unpacked)", t.lim.Unpacked)
	}
	if err != nil {
		if e := t.ctx.Err(); e != nil {
			return e
		}
		return fmt.Errorf("entry %q: %w", p, err)
	}
	t.files += n
	m := digest.ModeFile
	if mode&0o111 != 0 {
		m = digest.ModeExecutable
	}
	return t.put(treeEntry{Entry: digest.Entry{Path: p, Type: digest.TypeFile, Mode: m, Size: n, Digest: d}})
}

// symlink adds a link; its target is checked once the tree is whole (see check).
func (t *tree) symlink(p, target string) error {
	switch {
	case target == "":
		return refuse("symlink %q has an empty target", p)
	case len(target) > maxTargetBytes:
		return refuse("symlink %q has a target longer than %d bytes", p, maxTargetBytes)
	case !utf8.ValidString(target) || strings.ContainsRune(target, 0):
		return refuse("symlink %q: its target is not valid UTF-8 text", p)
	case strings.HasPrefix(target, "/"):
		return refuse("symlink %q points to %q, outside the tree (an absolute target)", p, target)
	}
	return t.put(treeEntry{Entry: digest.Entry{Path: p, Type: digest.TypeSymlink, Mode: digest.ModeSymlink, Target: target}})
}

// hardlink adds a copy of the regular file target, which an earlier entry named.
func (t *tree) hardlink(p, target string) error {
	e := t.entries[target]
	if e == nil || e.Type != digest.TypeFile {
		return refuse("hard link %q names %q, which is not a file named earlier in the archive", p, target)
	}
	c := *e
	c.Path = p
	return t.put(c)
}

// whiteout deletes p, and what is under it, from the layers below (an OCI layer's
// ".wh.NAME"); opaque deletes everything those layers put under dir (".wh..wh..opq").
func (t *tree) whiteout(p string) error {
	if e := t.entries[p]; e != nil && e.layer < t.layer {
		t.remove(e)
	}
	return nil
}

func (t *tree) opaque(dir string) error {
	if dir != "" {
		if err := t.dir(dir); err != nil {
			return err
		}
	}
	for q, e := range t.entries {
		if (dir == "" || strings.HasPrefix(q, dir+"/")) && e.layer < t.layer {
			delete(t.entries, q)
		}
	}
	return nil
}

// check refuses a symlink whose target, resolved through the tree's own links, leaves the
// tree. A link to something the tree lacks is allowed (a dangling link inside the tree).
func (t *tree) check() error {
	for _, p := range slices.Sorted(maps.Keys(t.entries)) {
		if e := t.entries[p]; e.Type == digest.TypeSymlink {
			if err := t.resolve(p, e.Target); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolve follows link p's target from p's directory, element by element, through the
// tree's links, and refuses it when it climbs above the root or loops.
func (t *tree) resolve(link, target string) error {
	var at []string // the directory reached, from the root
	if d := path.Dir(link); d != "." {
		at = strings.Split(d, "/")
	}
	todo := strings.Split(target, "/")
	hops := 0
	for len(todo) > 0 {
		el := todo[0]
		todo = todo[1:]
		switch el {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 {
				return refuse("symlink %q points to %q, outside the tree", link, target)
			}
			at = at[:len(at)-1]
			continue
		}
		p := strings.Join(append(slices.Clone(at), el), "/")
		if e := t.entries[p]; e != nil && e.Type == digest.TypeSymlink {
			if hops++; hops > maxLinkHops {
				return refuse("symlink %q: its target %q goes through more than %d links", link, target, maxLinkHops)
			}
			if strings.HasPrefix(e.Target, "/") {
				return refuse("symlink %q points to %q, outside the tree", link, target)
			}
			todo = append(strings.Split(e.Target, "/"), todo...)
			continue
		}
		at = append(at, el)
	}
	return nil
}

// store checks the tree, writes its manifest and returns its digest.
func (t *tree) store() (digest.Digest, error) {
	if err := t.check(); err != nil {
		return "", err
	}
	m := &digest.Manifest{Entries: make([]digest.Entry, 0, len(t.entries))}
	for _, e := range t.entries {
		m.Entries = append(m.Entries, e.Entry)
	}
	slices.SortFunc(m.Entries, func(a, b digest.Entry) int { return strings.Compare(a.Path, b.Path) })
	md, err := m.Digest()
	if err != nil {
		return "", refuse("%v", err)
	}
	raw, err := digest.Canonical(m)
	if err != nil {
		return "", err
	}
	if _, err := t.st.PutExpected(bytes.NewReader(raw), md); err != nil {
		return "", err
	}
	// What the store will materialize must pass its own checks too.
	if _, err := t.st.ReadManifest(md); err != nil {
		return "", refuse("%v", err)
	}
	return md, nil
}
