package seed

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	contentstore "github.com/foundry-build/foundry/store"
)

// Unpacking is where untrusted bytes (imported images) meet the host filesystem. Every
// filesystem operation goes through an *os.Root opened on the target directory, so no entry
// — whatever its name, and whatever symlinks earlier entries created — can read or write
// outside it: the kernel-backed os.Root refuses to resolve a path that leaves the root,
// including through symlinks (absolute symlink targets count as leaving). On top of that,
// entry names that are absolute or contain ".." are refused outright, so a hostile layer is
// an error, never silently rewritten.
//
// Semantics follow the OCI image spec's layer changesets: later entries replace earlier
// ones (a directory over a directory merges), ".wh.NAME" deletes NAME from lower layers and
// ".wh..wh..opq" empties a directory of lower-layer content. Setuid/setgid bits are dropped
// (sandboxes run with no-new-privileges anyway); device nodes and FIFOs are skipped, since
// the runtime provides /dev; ownership is applied only when running as root.

// errTooLarge is returned when unpacking would exceed the byte or entry budget.
var errTooLarge = errors.New("unpack limit exceeded")

const maxEntries = 4 << 20

type unpacker struct {
	root      *os.Root
	remaining int64 // bytes of uncompressed tar stream still allowed
	// written bounds the bytes written to files separately: a sparse entry's logical size
	// can exceed the stream bytes it occupies by any factor.
	written   int64
	entries   int
	dirModes  map[string]fs.FileMode
	chown     bool
	whiteouts bool
}

func newUnpacker(root *os.Root, maxBytes int64, whiteouts bool) *unpacker {
	return &unpacker{
		root:      root,
		remaining: maxBytes,
		written:   maxBytes,
		dirModes:  map[string]fs.FileMode{},
		chown:     os.Geteuid() == 0,
		whiteouts: whiteouts,
	}
}

// budgetReader charges every byte read against the unpacker's budget.
type budgetReader struct {
	r io.Reader
	u *unpacker
}

func (b budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.u.remaining -= int64(n)
	if b.u.remaining < 0 {
		return n, errTooLarge
	}
	return n, err
}

// layer applies one uncompressed tar stream and drains it, so callers can hash all of it.
func (u *unpacker) layer(ctx context.Context, r io.Reader) error {
	br := budgetReader{contentstore.ContextReader(ctx, r), u}
	tr := tar.NewReader(br)
	seen := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		u.entries++
		if u.entries > maxEntries {
			return fmt.Errorf("more than %d entries: %w", maxEntries, errTooLarge)
		}
		if err := u.entry(hdr, tr, seen); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return fmt.Errorf("read tar trailer: %w", err)
	}
	return nil
}

// entryName validates a tar entry name and returns it clean and relative ("" for the root).
func entryName(n string) (string, error) {
	if strings.ContainsRune(n, 0) {
		return "", errors.New("name contains NUL")
	}
	if strings.HasPrefix(n, "/") {
		return "", errors.New("absolute path refused")
	}
	for _, c := range strings.Split(n, "/") {
		if c == ".." {
			return "", errors.New("path with .. refused")
		}
	}
	c := path.Clean(n)
	if c == "." {
		return "", nil
	}
	return c, nil
}

func markSeen(seen map[string]bool, name string) {
	for p := name; p != "." && !seen[p]; p = path.Dir(p) {
		seen[p] = true
	}
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader, seen map[string]bool) error {
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return nil
	}
	if name == "" {
		return nil // the root directory itself; its mode is fixed at 0755
	}
	dir, base := path.Dir(name), path.Base(name)
	if u.whiteouts && strings.HasPrefix(base, ".wh.") {
		if base == ".wh..wh..opq" {
			return u.opaque(dir, seen)
		}
		victim := strings.TrimPrefix(base, ".wh.")
		if victim == "" || victim == "." || victim == ".." {
			return errors.New("malformed whiteout")
		}
		return u.root.RemoveAll(path.Join(dir, victim))
	}
	if dir != "." {
		if err := u.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	markSeen(seen, name)
	if fi, err := u.root.Lstat(name); err == nil {
		if !(fi.IsDir() && hdr.Typeflag == tar.TypeDir) {
			if err := u.root.RemoveAll(name); err != nil {
				return err
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	perm := fs.FileMode(hdr.Mode & 0o777)
	if hdr.Mode&0o1000 != 0 {
		perm |= fs.ModeSticky
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := u.root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		// Applied at the end, so a read-only directory does not block its own contents.
		u.dirModes[name] = perm
	case tar.TypeReg: // the tar reader reports the legacy TypeRegA as TypeReg
		if hdr.Size > u.written {
			return fmt.Errorf("file of %d bytes: %w", hdr.Size, errTooLarge)
		}
		u.written -= hdr.Size
		f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if err == nil {
			err = f.Chmod(perm)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		if hdr.Linkname == "" || strings.ContainsRune(hdr.Linkname, 0) {
			return errors.New("symlink with empty or NUL target")
		}
		// The target is stored verbatim; os.Root refuses any later traversal that leaves the root.
		if err := u.root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hardlink target %q: %w", hdr.Linkname, err)
		}
		if target == "" {
			return errors.New("hardlink to the root refused")
		}
		if err := u.root.Link(target, name); err != nil {
			return err
		}
		return nil // ownership and mode belong to the target's inode
	default:
		return fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}
	if u.chown && hdr.Uid >= 0 && hdr.Gid >= 0 {
		if err := u.root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
	}
	return nil
}

// opaque removes the content of dir that no entry of the current layer wrote.
func (u *unpacker) opaque(dir string, seen map[string]bool) error {
	if dir != "." {
		if err := u.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		markSeen(seen, dir)
	}
	f, err := u.root.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		p := n
		if dir != "." {
			p = path.Join(dir, n)
		}
		if !seen[p] {
			if err := u.root.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish applies directory modes, deepest first.
func (u *unpacker) finish() error {
	names := make([]string, 0, len(u.dirModes))
	for n := range u.dirModes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		fi, err := u.root.Lstat(n)
		if err != nil || !fi.IsDir() {
			continue // replaced or removed by a later layer
		}
		if err := u.root.Chmod(n, u.dirModes[n]); err != nil {
			return fmt.Errorf("chmod %s: %w", n, err)
		}
	}
	return nil
}

// decompressed returns the tar stream inside a layer blob, by its magic bytes: gzip, zstd or
// plain tar. Media types are not trusted for this; the diff_id check afterwards is.
func decompressed(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read layer: %w", err)
	}
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip layer: %w", err)
		}
		return zr, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(128<<20))
		if err != nil {
			return nil, fmt.Errorf("zstd layer: %w", err)
		}
		return zr.IOReadCloser(), nil
	default:
		return io.NopCloser(br), nil
	}
}

// unpackLayerBlob decompresses one stored layer blob into u and checks its diff_id.
func unpackLayerBlob(ctx context.Context, st *store, u *unpacker, desc descriptor, diffID string) error {
	h, err := v1.NewHash(desc.Digest)
	if err != nil {
		return err
	}
	f, err := os.Open(st.blobPath(h))
	if err != nil {
		return fmt.Errorf("open layer %s: %w", h, err)
	}
	defer f.Close()
	rc, err := decompressed(f)
	if err != nil {
		return fmt.Errorf("layer %s: %w", h, err)
	}
	defer rc.Close()
	hasher := sha256.New()
	if err := u.layer(ctx, io.TeeReader(rc, hasher)); err != nil {
		return fmt.Errorf("layer %s: %w", h, err)
	}
	if got := "sha256:" + hex.EncodeToString(hasher.Sum(nil)); got != diffID {
		return fmt.Errorf("layer %s: uncompressed digest %s does not match diff_id %s", h, got, diffID)
	}
	return nil
}

func (b *Builder) maxUnpack() int64 {
	if b.MaxUnpackBytes > 0 {
		return b.MaxUnpackBytes
	}
	return DefaultMaxUnpackBytes
}

// ensureRootfs unpacks image h into Root/rootfs/<hex> unless it is there already. The tree is
// built in Root/tmp and renamed into place, so a rootfs that exists is complete; when two
// builds race, the first rename wins and the other discards its copy.
func (b *Builder) ensureRootfs(ctx context.Context, st *store, h v1.Hash, m *manifest, cfg *imageConfig) (string, error) {
	final := st.rootfsPath(h)
	if fi, err := os.Lstat(final); err == nil && fi.IsDir() {
		return final, nil
	}
	tmp, err := os.MkdirTemp(st.tmp, "rootfs-"+h.Hex[:12]+"-")
	if err != nil {
		return "", fmt.Errorf("unpack %s: %w", h, err)
	}
	defer removeTemp(tmp)
	if err := unpackImageInto(ctx, st, tmp, m, cfg, b.maxUnpack()); err != nil {
		return "", fmt.Errorf("unpack %s: %w", h, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		if fi, serr := os.Lstat(final); isExist(err) && serr == nil && fi.IsDir() {
			return final, nil
		}
		return "", fmt.Errorf("unpack %s: %w", h, err)
	}
	if err := syncDir(st.rootfs); err != nil {
		return "", err
	}
	return final, nil
}

func unpackImageInto(ctx context.Context, st *store, dir string, m *manifest, cfg *imageConfig, maxBytes int64) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	u := newUnpacker(root, maxBytes, true)
	for i, l := range m.Layers {
		if err := unpackLayerBlob(ctx, st, u, l, cfg.RootFS.DiffIDs[i]); err != nil {
			return err
		}
	}
	if err := u.finish(); err != nil {
		return err
	}
	// Imported images may lack the mount points; built ones have them as their last layer.
	for _, p := range MountPoints {
		rel := strings.TrimPrefix(p, "/")
		if _, err := root.Lstat(rel); errors.Is(err, fs.ErrNotExist) {
			if err := root.Mkdir(rel, 0o755); err != nil {
				return fmt.Errorf("mount point %s: %w", p, err)
			}
			if err := root.Chmod(rel, fs.FileMode(mountPointMode(p)&0o777)|modeBits(mountPointMode(p))); err != nil {
				return fmt.Errorf("mount point %s: %w", p, err)
			}
		}
	}
	return os.Chmod(dir, 0o755)
}

// unpackTar extracts one tar stream into dir (which must exist) with the same confinement as
// image layers, without whiteout semantics. It is used for OCI archives and by the fuzz test.
func unpackTar(ctx context.Context, dir string, r io.Reader, maxBytes int64) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	u := newUnpacker(root, maxBytes, false)
	if err := u.layer(ctx, r); err != nil {
		return err
	}
	return u.finish()
}

// modeBits converts the special bits of a tar mode to fs.FileMode bits.
func modeBits(m int64) fs.FileMode {
	var out fs.FileMode
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}
