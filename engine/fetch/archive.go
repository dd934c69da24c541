package fetch

import (
	"archive/tar"
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/foundry-build/foundry/lang"
)

// unpack adds what the archive in f (size bytes, of format archive) holds to t, each name
// with strip leading elements removed (what is left of nothing is dropped).
func unpack(t *tree, f *os.File, size int64, archive string, stripN int) error {
	if archive == lang.ArchiveZip {
		return unpackZip(t, f, size, stripN)
	}
	r, err := decompress(f, archive)
	if err != nil {
		return err
	}
	defer r.Close()
	return unpackTar(t, r, stripN, false)
}

// decompress opens the tar stream of a tar, tar.gz or tar.xz archive, bounded: a stream
// that decompresses to more than twice the unpacked limit, and 64 MiB for headers, is a
// bomb (the files' own bytes are bounded again, exactly, as they are stored).
func decompress(r io.Reader, archive string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	switch archive {
	case lang.ArchiveTar:
		rc = io.NopCloser(r)
	case lang.ArchiveTarGz:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, refuse("not a gzip stream: %v", err)
		}
		rc = z
	case lang.ArchiveTarXz:
		z, err := xz.NewReader(r)
		if err != nil {
			return nil, refuse("not an xz stream: %v", err)
		}
		rc = io.NopCloser(z)
	default:
		return nil, fmt.Errorf("%q is not an archive format", archive)
	}
	return rc, nil
}

// unpackTar adds a tar stream's entries to t. With layer set it is an OCI image layer:
// ".wh." entries are whiteouts of what lower layers made.
func unpackTar(t *tree, r io.Reader, stripN int, layer bool) error {
	// Headers, padding and PAX records are bounded by the number of entries; a stream far
	// larger than the files it may hold is refused before it is read to its end.
	bound := &io.LimitedReader{R: r, N: 2*t.lim.Unpacked + 64<<20}
	tr := tar.NewReader(bound)
	for {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			if bound.N <= 0 {
				return refuse("the archive decompresses to more than its limits allow")
			}
			return refuse("not a tar archive, or a damaged one: %v", err)
		}
		// An insecure name (absolute, "..") is refused below, naming the entry.
		if err := tarEntry(t, tr, hdr, stripN, layer); err != nil {
			return err
		}
	}
}

func tarEntry(t *tree, tr *tar.Reader, hdr *tar.Header, stripN int, layer bool) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // PAX global attributes: nothing of the tree
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	name, ok := strip(name, stripN)
	if !ok {
		return nil
	}
	if layer {
		dir, base := path.Split(name)
		dir = strings.TrimSuffix(dir, "/")
		if base == ".wh..wh..opq" {
			return t.opaque(dir)
		}
		if w, ok := strings.CutPrefix(base, ".wh."); ok {
			return t.whiteout(path.Join(dir, w))
		}
	}
	return tarAdd(t, tr, hdr, name, stripN)
}

func tarAdd(t *tree, tr *tar.Reader, hdr *tar.Header, name string, stripN int) error {
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse: // the reader reports the old TypeRegA as TypeReg
		return t.file(name, hdr.Mode, tr)
	case tar.TypeDir:
		return t.dir(name)
	case tar.TypeSymlink:
		return t.symlink(name, hdr.Linkname)
	case tar.TypeLink:
		target, err := cleanName(hdr.Linkname)
		if err != nil {
			return refuse("hard link %q: %v", name, err)
		}
		target, ok := strip(target, stripN)
		if !ok {
			return refuse("hard link %q names %q, which strip removes", name, hdr.Linkname)
		}
		return t.hardlink(name, target)
	case tar.TypeChar, tar.TypeBlock:
		return refuse("entry %q is a device", name)
	case tar.TypeFifo:
		return refuse("entry %q is a FIFO", name)
	}
	return refuse("entry %q is of a type Foundry does not unpack (%q)", name, hdr.Typeflag)
}

// unpackZip adds a zip archive's entries to t.
func unpackZip(t *tree, f io.ReaderAt, size int64, stripN int) error {
	zr, err := zip.NewReader(f, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return refuse("not a zip archive, or a damaged one: %v", err)
	}
	for _, zf := range zr.File {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		name, err := cleanName(zf.Name)
		if err != nil {
			return err
		}
		name, ok := strip(name, stripN)
		if !ok {
			continue
		}
		if err := zipEntry(t, zf, name); err != nil {
			return err
		}
	}
	return nil
}

func zipEntry(t *tree, zf *zip.File, name string) error {
	mode := zf.Mode()
	switch {
	case mode.IsDir():
		return t.dir(name)
	case mode&fs.ModeSymlink != 0:
		rc, err := zf.Open()
		if err != nil {
			return refuse("entry %q: %v", name, err)
		}
		defer rc.Close()
		target, err := io.ReadAll(io.LimitReader(rc, maxTargetBytes+1))
		if err != nil {
			return refuse("entry %q: %v", name, err)
		}
		return t.symlink(name, string(target))
	case mode.IsRegular():
		rc, err := zf.Open()
		if err != nil {
			return refuse("entry %q: %v", name, err)
		}
		defer rc.Close()
		return t.file(name, int64(mode.Perm()), rc)
	}
	return refuse("entry %q is not a file, a directory or a symlink (%s)", name, mode.Type())
}

// layerReader opens an OCI layer of media type mt for unpacking, and reports false for a
// layer that is not a filesystem changeset (an artifact's file).
func layerReader(r io.Reader, mt string) (io.ReadCloser, bool, error) {
	switch {
	case strings.HasSuffix(mt, ".tar+gzip"), strings.HasSuffix(mt, ".tar.gzip"), mt == "application/vnd.docker.image.rootfs.diff.tar.gzip":
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, true, refuse("layer is not a gzip stream: %v", err)
		}
		return z, true, nil
	case strings.HasSuffix(mt, ".tar+zstd"):
		z, err := zstd.NewReader(r, zstd.WithDecoderMaxMemory(256<<20))
		if err != nil {
			return nil, true, refuse("layer is not a zstd stream: %v", err)
		}
		return z.IOReadCloser(), true, nil
	case strings.HasSuffix(mt, ".layer.v1.tar"), mt == "application/vnd.docker.image.rootfs.diff.tar":
		return io.NopCloser(r), true, nil
	}
	return nil, false, nil
}
