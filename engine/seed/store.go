package seed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	contentstore "github.com/foundry-build/foundry/store"
)

// store is the on-disk state under Builder.Root (see Builder for the layout).
//
// Invariants: a file under layout/blobs/sha256/ always holds exactly the bytes its name is
// the digest of (written to tmp/, verified, fsynced, renamed). index.json is replaced
// atomically under the flock, and lists a manifest only after all its blobs exist.
type store struct {
	root, layout, blobs, rootfs, keys, tmp string
}

// storeAt names the store's paths under root, creating nothing.
func storeAt(root string) (*store, error) {
	if root == "" {
		return nil, errors.New("builder has no Root")
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("builder root: %w", err)
	}
	return &store{
		root:   root,
		layout: filepath.Join(root, "layout"),
		blobs:  filepath.Join(root, "layout", "blobs", "sha256"),
		rootfs: filepath.Join(root, "rootfs"),
		keys:   filepath.Join(root, "keys"),
		tmp:    filepath.Join(root, "tmp"),
	}, nil
}

func openStore(root string) (*store, error) {
	st, err := storeAt(root)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{st.blobs, st.rootfs, st.keys, st.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	st.sweepTemp()
	if _, err := os.Stat(filepath.Join(st.layout, "index.json")); err == nil {
		return st, nil
	}
	unlock, err := st.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := st.writeFileIfMissing("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return nil, err
	}
	emptyIndex := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)
	if err := st.writeFileIfMissing("index.json", emptyIndex); err != nil {
		return nil, err
	}
	return st, nil
}

// staleTemp is the age after which an entry of Root/tmp is taken to be a leftover of a
// crashed build. Nothing under tmp is ever part of a complete image or rootfs.
const staleTemp = 24 * time.Hour

// sweepTemp removes leftovers of crashed builds from Root/tmp, best effort.
func (st *store) sweepTemp() {
	ents, err := os.ReadDir(st.tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
			removeTemp(filepath.Join(st.tmp, e.Name()))
		}
	}
}

// lock takes the store-wide flock. flock locks belong to an open file description, so two
// goroutines of one process exclude each other as two processes do.
func (st *store) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(st.root, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

func (st *store) writeFileIfMissing(name string, data []byte) error {
	p := filepath.Join(st.layout, name)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	return st.replaceFile(p, data)
}

// replaceFile atomically replaces p with data (temp file, fsync, rename, fsync dir).
func (st *store) replaceFile(p string, data []byte) error {
	f, err := os.CreateTemp(st.tmp, "file-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	tmp := f.Name()
	defer removeTemp(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return syncDir(filepath.Dir(p))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func (st *store) blobPath(h v1.Hash) string { return filepath.Join(st.blobs, h.Hex) }

func (st *store) hasBlob(h v1.Hash) bool {
	fi, err := os.Stat(st.blobPath(h))
	return err == nil && fi.Mode().IsRegular()
}

// writeBlob streams r into the store and returns its digest and size. If want is non-nil the
// content must have that digest. The bytes pass through a temp file, never through memory.
func (st *store) writeBlob(ctx context.Context, r io.Reader, want *v1.Hash) (v1.Hash, int64, error) {
	return st.writeBlobFunc(func(w io.Writer) error {
		_, err := io.Copy(w, contentstore.ContextReader(ctx, r))
		return err
	}, want)
}

// writeBlobFunc is writeBlob for a producer that writes the content itself.
func (st *store) writeBlobFunc(produce func(io.Writer) error, want *v1.Hash) (v1.Hash, int64, error) {
	f, err := os.CreateTemp(st.tmp, "blob-*")
	if err != nil {
		return v1.Hash{}, 0, fmt.Errorf("create blob: %w", err)
	}
	tmp := f.Name()
	defer removeTemp(tmp)
	defer f.Close()
	hasher := sha256.New()
	cw := &countWriter{}
	if err := produce(io.MultiWriter(f, hasher, cw)); err != nil {
		return v1.Hash{}, 0, err
	}
	h := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(hasher.Sum(nil))}
	if want != nil && h != *want {
		return v1.Hash{}, 0, fmt.Errorf("blob digest mismatch: want %s, content is %s", want, h)
	}
	if st.hasBlob(h) {
		return h, cw.n, nil
	}
	if err := f.Chmod(0o644); err != nil {
		return v1.Hash{}, 0, fmt.Errorf("write blob %s: %w", h, err)
	}
	if err := f.Sync(); err != nil {
		return v1.Hash{}, 0, fmt.Errorf("write blob %s: %w", h, err)
	}
	if err := f.Close(); err != nil {
		return v1.Hash{}, 0, fmt.Errorf("write blob %s: %w", h, err)
	}
	// A concurrent writer may rename the same content first; rename replaces it with
	// identical bytes, which is harmless.
	if err := os.Rename(tmp, st.blobPath(h)); err != nil {
		return v1.Hash{}, 0, fmt.Errorf("write blob %s: %w", h, err)
	}
	return h, cw.n, syncDir(st.blobs)
}

func (st *store) writeBlobBytes(data []byte) (v1.Hash, int64, error) {
	return st.writeBlob(context.Background(), bytes.NewReader(data), nil)
}

func (st *store) readBlob(h v1.Hash, max int64) ([]byte, error) {
	f, err := os.Open(st.blobPath(h))
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("blob %s is larger than %d bytes", h, max)
	}
	return data, nil
}

// maxJSONBlob bounds manifests and configs read into memory.
const maxJSONBlob = 8 << 20

func (st *store) readManifest(h v1.Hash) (*manifest, error) {
	raw, err := st.readBlob(h, maxJSONBlob)
	if err != nil {
		return nil, err
	}
	return parseManifest(raw)
}

func (st *store) readConfig(m *manifest) (*imageConfig, error) {
	h, err := v1.NewHash(m.Config.Digest)
	if err != nil {
		return nil, fmt.Errorf("config digest: %w", err)
	}
	raw, err := st.readBlob(h, maxJSONBlob)
	if err != nil {
		return nil, err
	}
	return parseConfig(raw, len(m.Layers))
}

func (st *store) readIndex() (*v1.IndexManifest, error) {
	raw, err := os.ReadFile(filepath.Join(st.layout, "index.json"))
	if err != nil {
		return nil, fmt.Errorf("read index.json: %w", err)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(st.layout, "index.json"), err)
	}
	return &idx, nil
}

// inIndex reports whether index.json lists manifest h, i.e. the image is complete.
func (st *store) inIndex(h v1.Hash) (bool, error) {
	idx, err := st.readIndex()
	if err != nil {
		return false, err
	}
	for _, d := range idx.Manifests {
		if d.Digest == h {
			return true, nil
		}
	}
	return false, nil
}

// addToIndex lists manifest h in index.json (once). All blobs of h must already exist.
func (st *store) addToIndex(h v1.Hash, name string) error {
	raw, err := st.readBlob(h, maxJSONBlob)
	if err != nil {
		return err
	}
	m, err := parseManifest(raw)
	if err != nil {
		return err
	}
	need := []string{m.Config.Digest}
	for _, l := range m.Layers {
		need = append(need, l.Digest)
	}
	for _, d := range need {
		bh, _ := v1.NewHash(d)
		if !st.hasBlob(bh) {
			return fmt.Errorf("image %s: blob %s missing from layout", h, d)
		}
	}
	mt := types.MediaType(m.MediaType)
	if mt == "" {
		mt = types.OCIManifestSchema1
	}
	unlock, err := st.lock()
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := st.readIndex()
	if err != nil {
		return err
	}
	for _, d := range idx.Manifests {
		if d.Digest == h {
			return nil
		}
	}
	desc := v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: h}
	if name != "" {
		desc.Annotations = map[string]string{AnnotationSeedName: name}
	}
	idx.Manifests = append(idx.Manifests, desc)
	if idx.MediaType == "" {
		idx.MediaType = types.OCIImageIndex
	}
	out, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return fmt.Errorf("encode index.json: %w", err)
	}
	return st.replaceFile(filepath.Join(st.layout, "index.json"), out)
}

// keyFormat versions what a Build produces for a Key: bump it whenever the same Spec would
// now build a different image (a new mount-point layer, say), so that keys recorded by an
// older build stop matching instead of returning a stale image.
const keyFormat = "foundry-seed-key/v2\x00"

func keyFile(st *store, key string) string {
	sum := sha256.Sum256([]byte(keyFormat + key))
	return filepath.Join(st.keys, hex.EncodeToString(sum[:]))
}

// lookupKey returns the manifest recorded for key if that image is complete in the layout.
func (st *store) lookupKey(key string) (v1.Hash, bool) {
	raw, err := os.ReadFile(keyFile(st, key))
	if err != nil {
		return v1.Hash{}, false
	}
	h, err := v1.NewHash(strings.TrimSpace(string(raw)))
	if err != nil {
		return v1.Hash{}, false
	}
	if ok, err := st.inIndex(h); err != nil || !ok {
		return v1.Hash{}, false
	}
	return h, true
}

func (st *store) recordKey(key string, h v1.Hash) error {
	return st.replaceFile(keyFile(st, key), []byte(h.String()+"\n"))
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// isExist reports whether err says a rename target already exists (a concurrent winner).
func isExist(err error) bool {
	return errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}
