package seed

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	contentstore "github.com/foundry-build/foundry/store"
)

// MountPoints are the empty directories every built image ends with, as its last layer.
//
// OCI runtimes create mount points for /proc, /dev, /sys and the sandbox's /tmp and /out; on
// a read-only rootfs (or a read-only containerd snapshot view) they cannot, and task
// creation fails. Foundry adds them as a final deterministic layer, rather than only when
// unpacking, so that the image itself is complete for the containerd executor (which imports
// the layout, not the unpacked tree) and so that the manifest digest covers exactly what runs.
// Imported images keep their digest and get the directories only in the unpacked rootfs
// (see ensureRootfs).
var MountPoints = []string{"/dev", "/out", "/proc", "/sys", "/tmp"}

// mountPointMode is the mode of a mount-point directory: /tmp is world-writable and sticky
// (1777). It matters although a tmpfs is mounted there: runc 1.1 gives the tmpfs the mode of
// the directory it covers, whatever mode= the spec asks for, and a 0755 /tmp is not writable
// by the sandbox's non-root user.
func mountPointMode(p string) int64 {
	if p == "/tmp" {
		return 0o1777
	}
	return 0o755
}

// epoch is the mtime of every entry a built layer writes.
var epoch = time.Unix(0, 0)

// entry is one tar entry of a built layer.
type entry struct {
	name string // image path without the leading "/", e.g. "usr/bin/env"
	typ  byte   // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	mode int64  // 0755 or 0644 (symlinks 0777)
	size int64  // regular files: the size observed when the layer was planned
	host string // regular files: host path to copy from
	link string // symlinks: target, verbatim
	// follow is true for Files entries (the host path may be a symlink to the file) and
	// false for entries found by walking a Dir (symlinks there are entries of their own).
	follow bool
}

// buildLayers packs s.Layers, appends the mount-point layer, and writes config and manifest.
func (b *Builder) buildLayers(ctx context.Context, st *store, s *Spec) (v1.Hash, error) {
	pl, _ := parsePlatform(s.Platform)
	env, _ := envList(s.Env)
	mp, err := mountPointLayer(st)
	if err != nil {
		return v1.Hash{}, err
	}
	var layers []layerRef
	for i, l := range s.Layers {
		refs, err := b.packLayer(ctx, st, l, mp.desc.Digest)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("layer %d: %w", i, err)
		}
		layers = append(layers, refs...)
	}
	layers = append(layers, mp)
	cfgRaw, err := encodeConfig(pl, env, s.User, s.Workdir, layers)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("encode config: %w", err)
	}
	return writeImage(st, cfgRaw, layers)
}

// writeImage stores config and manifest blobs for layers (whose blobs already exist).
func writeImage(st *store, cfgRaw []byte, layers []layerRef) (v1.Hash, error) {
	ch, csize, err := st.writeBlobBytes(cfgRaw)
	if err != nil {
		return v1.Hash{}, err
	}
	cfg := descriptor{MediaType: string(types.OCIConfigJSON), Digest: ch.String(), Size: csize}
	mRaw, err := encodeManifest(cfg, layers)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("encode manifest: %w", err)
	}
	h, _, err := st.writeBlobBytes(mRaw)
	return h, err
}

func (b *Builder) packLayer(ctx context.Context, st *store, l Layer, mountPoints string) ([]layerRef, error) {
	n := 0
	if l.From != nil {
		n++
	}
	if len(l.Files) > 0 || len(l.Symlinks) > 0 {
		n++
	}
	if l.Dir != "" {
		n++
	}
	if n != 1 {
		return nil, errors.New("set exactly one of From, Files and Dir")
	}
	if l.At != "" && l.Dir == "" {
		return nil, errors.New("the At field is only meaningful with Dir")
	}
	if l.From != nil {
		return fromLayers(ctx, st, l.From, mountPoints)
	}
	var entries []entry
	var err error
	if l.Files != nil || l.Symlinks != nil {
		entries, err = filesEntries(l.Files)
		if err == nil {
			var links []entry
			links, err = symlinkEntries(l.Symlinks, l.Files)
			entries = append(entries, links...)
		}
	} else {
		entries, err = dirEntries(l.Dir, l.At)
	}
	if err != nil {
		return nil, err
	}
	entries, err = withParents(entries)
	if err != nil {
		return nil, err
	}
	h, size, err := st.writeBlobFunc(func(w io.Writer) error { return writeTar(ctx, w, entries) }, nil)
	if err != nil {
		return nil, err
	}
	return []layerRef{{
		desc:   descriptor{MediaType: string(types.OCIUncompressedLayer), Digest: h.String(), Size: size},
		diffID: h.String(),
	}}, nil
}

// cleanImagePath checks that p is an absolute, clean image path and returns it without the
// leading slash. Components named like whiteouts (".wh.*") are refused: an unpacker would
// delete files instead of creating them.
func cleanImagePath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("image path %q is not absolute", p)
	}
	if path.Clean(p) != p {
		return "", fmt.Errorf("image path %q is not clean (want %q)", p, path.Clean(p))
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("image path %q contains NUL", p)
	}
	rel := strings.TrimPrefix(p, "/")
	for _, c := range strings.Split(rel, "/") {
		if strings.HasPrefix(c, ".wh.") {
			return "", fmt.Errorf("image path %q: component %q is an OCI whiteout name", p, c)
		}
	}
	return rel, nil
}

func normMode(m fs.FileMode) int64 {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

func filesEntries(files map[string]string) ([]entry, error) {
	var out []entry
	for img, host := range files {
		rel, err := cleanImagePath(img)
		if err != nil {
			return nil, err
		}
		if rel == "" {
			return nil, errors.New(`files: "/" is not a file path`)
		}
		fi, err := os.Stat(host)
		if err != nil {
			return nil, fmt.Errorf("files[%s]: %w", img, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("files[%s]: host %s is not a regular file (%s)", img, host, fi.Mode().Type())
		}
		out = append(out, entry{name: rel, typ: tar.TypeReg, mode: normMode(fi.Mode()), size: fi.Size(), host: host, follow: true})
	}
	return out, nil
}

// symlinkEntries turns image path → target into symlink entries; a path may not also be a file.
func symlinkEntries(links map[string]string, files map[string]string) ([]entry, error) {
	var out []entry
	for img, target := range links {
		rel, err := cleanImagePath(img)
		if err != nil {
			return nil, err
		}
		if rel == "" {
			return nil, errors.New(`symlinks: "/" cannot be a symlink`)
		}
		if _, clash := files[img]; clash {
			return nil, fmt.Errorf("symlinks[%s]: the path is also a file of this layer", img)
		}
		if target == "" || strings.ContainsRune(target, 0) {
			return nil, fmt.Errorf("symlinks[%s]: invalid target %q", img, target)
		}
		out = append(out, entry{name: rel, typ: tar.TypeSymlink, mode: 0o777, link: target})
	}
	return out, nil
}

func dirEntries(dir, at string) ([]entry, error) {
	if at == "" {
		at = "/"
	}
	base, err := cleanImagePath(at)
	if err != nil {
		return nil, err
	}
	// Dir itself may be a symlink (e.g. /bin on a merged-/usr host); nothing below it is
	// ever followed.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("dir %s: %w", dir, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("dir %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("dir %s is not a directory", dir)
	}
	var out []entry
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", p, err)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := path.Join(base, filepath.ToSlash(rel))
		if name == "." {
			name = ""
		}
		if rel != "." && strings.HasPrefix(d.Name(), ".wh.") {
			return fmt.Errorf("%s: file name starts with the OCI whiteout prefix %q", p, ".wh.")
		}
		switch t := d.Type(); {
		case t.IsDir():
			if name != "" {
				out = append(out, entry{name: name, typ: tar.TypeDir, mode: 0o755})
			}
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return fmt.Errorf("stat %s: %w", p, err)
			}
			out = append(out, entry{name: name, typ: tar.TypeReg, mode: normMode(fi.Mode()), size: fi.Size(), host: p})
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("readlink %s: %w", p, err)
			}
			if strings.ContainsRune(target, 0) {
				return fmt.Errorf("symlink %s: target contains NUL", p)
			}
			out = append(out, entry{name: name, typ: tar.TypeSymlink, mode: 0o777, link: target})
		default:
			return fmt.Errorf("refusing %s: a %s is not a file, directory or symlink", p, kindOf(t))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dir %s: %w", dir, err)
	}
	return out, nil
}

// withParents adds every missing ancestor directory (mode 0755), refuses an entry that is
// also used as a directory, and sorts by path. Sorting by the path string puts a directory
// before its contents, since a prefix sorts first.
func withParents(entries []entry) ([]entry, error) {
	byName := make(map[string]int, len(entries))
	for i, e := range entries {
		if _, dup := byName[e.name]; dup {
			return nil, fmt.Errorf("image path /%s appears twice", e.name)
		}
		byName[e.name] = i
	}
	for _, e := range entries {
		for p := path.Dir(e.name); p != "." && p != "/"; p = path.Dir(p) {
			if i, ok := byName[p]; ok {
				if entries[i].typ != tar.TypeDir {
					return nil, fmt.Errorf("image path /%s is a file but /%s is inside it", p, e.name)
				}
				break // its own ancestors were or will be added from it
			}
			byName[p] = len(entries)
			entries = append(entries, entry{name: p, typ: tar.TypeDir, mode: 0o755})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries, nil
}

// writeTar writes entries as a deterministic tar stream: PAX format, mtime 0, uid/gid 0, no
// user or group names, the normalized modes. File contents stream from the host.
func writeTar(ctx context.Context, w io.Writer, entries []entry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr := &tar.Header{
			Typeflag: e.typ,
			Name:     e.name,
			Mode:     e.mode,
			ModTime:  epoch,
			Format:   tar.FormatPAX,
		}
		switch e.typ {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeSymlink:
			hdr.Linkname = e.link
		case tar.TypeReg:
			hdr.Size = e.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("tar header /%s: %w", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if err := copyHostFile(ctx, tw, e); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close tar: %w", err)
	}
	return nil
}

func copyHostFile(ctx context.Context, w io.Writer, e entry) error {
	flags := os.O_RDONLY
	if !e.follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(e.host, flags, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", e.host, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", e.host, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s changed while packing: no longer a regular file", e.host)
	}
	if normMode(fi.Mode()) != e.mode {
		return fmt.Errorf("%s changed while packing: mode", e.host)
	}
	n, err := io.Copy(w, io.LimitReader(contentstore.ContextReader(ctx, f), e.size))
	if err != nil {
		return fmt.Errorf("copy %s: %w", e.host, err)
	}
	var one [1]byte
	if m, _ := f.Read(one[:]); n != e.size || m != 0 {
		return fmt.Errorf("%s changed size while packing (planned %d bytes)", e.host, e.size)
	}
	return nil
}

var mountPoints struct {
	once sync.Once
	data []byte
	err  error
}

// mountPointLayer stores the constant mount-point layer and returns its reference.
func mountPointLayer(st *store) (layerRef, error) {
	mountPoints.once.Do(func() {
		var entries []entry
		for _, p := range MountPoints {
			entries = append(entries, entry{name: strings.TrimPrefix(p, "/"), typ: tar.TypeDir, mode: mountPointMode(p)})
		}
		var buf strings.Builder
		mountPoints.err = writeTar(context.Background(), &buf, entries)
		mountPoints.data = []byte(buf.String())
	})
	if mountPoints.err != nil {
		return layerRef{}, mountPoints.err
	}
	h, size, err := st.writeBlobBytes(mountPoints.data)
	if err != nil {
		return layerRef{}, err
	}
	return layerRef{
		desc:   descriptor{MediaType: string(types.OCIUncompressedLayer), Digest: h.String(), Size: size},
		diffID: h.String(),
	}, nil
}

func kindOf(t fs.FileMode) string {
	switch {
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeNamedPipe != 0:
		return "FIFO"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	}
	return "special file (" + t.String() + ")"
}
