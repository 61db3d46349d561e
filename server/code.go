package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// The code routes: archives of the submitter's code, shipped with runs (docs/fabric.md).
// Stored once per (namespace, queue, digest) in the server's code store — a directory
// (Config.CodeDir) or a bucket (Config.CodeBucket, shared by every server of a PostgreSQL
// plane) —: an upload is spooled to a temporary file, checked entry by entry
// (fabric.ReadArchive: regular files only, clean relative paths, the size bound) and
// against the digest of the path, and only then stored, in one step (a rename, or a
// bucket write that becomes visible when complete): a crash leaves at most a temporary
// file, never a wrong or partial archive under a digest.

func (s *Server) codeRoutes() map[string]handlerFunc {
	return map[string]handlerFunc{
		"PUT " + api.CodePath: s.handleCodePut,
		"GET " + api.CodePath: s.handleCodeGet,
	}
}

func codeTooLarge(limit int64) error {
	return &tooLargeError{limit: limit, advice: "ship less code: exclude data and build output (code.mounts' exclude in lakeshore.yaml)"}
}

// codeStore keeps code archives by key ({ns}/{queue}/{digest}.tar.gz).
type codeStore interface {
	// size returns the size of the archive under key; fs.ErrNotExist when absent.
	size(ctx context.Context, key string) (int64, error)
	// spool creates the temporary file an upload of key is written to before its check.
	spool(key string) (*os.File, error)
	// put stores f, a checked spool of key synced to disk and rewound, under key.
	put(ctx context.Context, key string, f *os.File) error
	// open reads the archive under key and returns its size; fs.ErrNotExist when absent.
	open(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// usage returns the number of archives stored under namespace's keys ({ns}/…) and
	// their bytes (uploads being spooled not counted).
	usage(ctx context.Context, namespace string) (archives int, bytes int64, err error)
}

// dirCodeStore keeps archives as files under a directory; an upload is spooled in the
// directory's root and renamed into its place.
type dirCodeStore string

func (d dirCodeStore) path(key string) string {
	return filepath.Join(string(d), filepath.FromSlash(key))
}

func (d dirCodeStore) size(_ context.Context, key string) (int64, error) {
	st, err := os.Stat(d.path(key))
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// spool creates the upload's file in the store's root (no namespace or queue name starts
// with '.', so it is never counted as one): an upload refused (invalid, too large, past
// the namespace's cap) leaves no directory of its namespace or queue behind.
func (d dirCodeStore) spool(string) (*os.File, error) {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return nil, err
	}
	return os.CreateTemp(string(d), ".upload-*")
}

// put makes the key's directories, once the upload is admitted, and renames the spool
// into its place.
func (d dirCodeStore) put(_ context.Context, key string, f *os.File) error {
	path := d.path(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func (d dirCodeStore) open(_ context.Context, key string) (io.ReadCloser, int64, error) {
	f, err := os.Open(d.path(key))
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func (d dirCodeStore) usage(_ context.Context, namespace string) (archives int, bytes int64, err error) {
	root := d.path(namespace)
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist) && path != root: // removed meanwhile
			return nil
		case err != nil || e.IsDir() || !strings.HasSuffix(e.Name(), codeSuffix) || strings.HasPrefix(e.Name(), "."): // spools start with '.'
			return err
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) { // removed meanwhile
			return nil
		} else if err != nil {
			return err
		}
		archives, bytes = archives+1, bytes+info.Size()
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) { // nothing stored for namespace yet
		return 0, 0, nil
	}
	return archives, bytes, err
}

// bucketCodeStore keeps archives as objects code/{key} of a bucket; an upload is spooled
// to a temporary file, then written to the bucket, where it appears only once complete.
type bucketCodeStore struct{ b *blob.Bucket }

// bucketCodePrefix is the key prefix of code archives in a bucket (the data queue's
// fragments, in the same bucket, live under other prefixes).
const bucketCodePrefix = "code/"

func (c bucketCodeStore) size(ctx context.Context, key string) (int64, error) {
	a, err := c.b.Attributes(ctx, bucketCodePrefix+key)
	if err != nil {
		return 0, bucketErr(err)
	}
	return a.Size, nil
}

func (c bucketCodeStore) spool(string) (*os.File, error) {
	return os.CreateTemp("", "lakeshore-code-upload-*")
}

func (c bucketCodeStore) put(ctx context.Context, key string, f *os.File) error {
	return bucketErr(c.b.Upload(ctx, bucketCodePrefix+key, f, &blob.WriterOptions{ContentType: api.ContentTypeGzip}))
}

func (c bucketCodeStore) usage(ctx context.Context, namespace string) (archives int, bytes int64, err error) {
	iter := c.b.List(&blob.ListOptions{Prefix: bucketCodePrefix + namespace + "/"})
	for {
		obj, err := iter.Next(ctx)
		if errors.Is(err, io.EOF) {
			return archives, bytes, nil
		} else if err != nil {
			return 0, 0, bucketErr(err)
		}
		if !obj.IsDir && strings.HasSuffix(obj.Key, codeSuffix) {
			archives, bytes = archives+1, bytes+obj.Size
		}
	}
}

func (c bucketCodeStore) open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	r, err := c.b.NewReader(ctx, bucketCodePrefix+key, nil)
	if err != nil {
		return nil, 0, bucketErr(err)
	}
	return r, r.Size(), nil
}

// bucketErr maps a bucket's "not found" to fs.ErrNotExist and hides the rest of a
// driver's message (it may name the bucket's endpoint or credentials' source) behind a
// generic error, logged by the server as an internal error.
func bucketErr(err error) error {
	switch {
	case err == nil:
		return nil
	case gcerrors.Code(err) == gcerrors.NotFound:
		return fs.ErrNotExist
	}
	return fmt.Errorf("code store: bucket %s", gcerrors.Code(err))
}

// codeSuffix ends the key of every archive.
const codeSuffix = ".tar.gz"

// codeKey returns the store key of the route's archive, checking its digest. Errors: 501
// without a code store, *plane.InvalidError for a bad digest.
func (s *Server) codeKey(r *http.Request, ns, q string) (string, error) {
	if s.code == nil {
		return "", &plane.Error{Code: plane.ErrNotImplemented.Code, Message: "this server keeps no code archives (it was started without a code store)"}
	}
	digest := r.PathValue("digest")
	if !fabric.ValidDigest(digest) {
		return "", plane.Invalid("digest", digest, "64 lowercase hex digits (the SHA-256 code digest of docs/fabric.md)")
	}
	return ns + "/" + q + "/" + digest + codeSuffix, nil
}

// What an uploaded archive may unpack to: codeUnpackRatio times its own compressed size,
// at least codeUnpackFloor, never more than 16 × Config.MaxCodeBytes (codeUnpackLimit).
const (
	codeUnpackRatio = 64
	codeUnpackFloor = 64 << 20
)

// codeUnpackLimit returns the bytes an archive of n compressed bytes may unpack to on a
// server whose archives are bounded by maxCode. The check of an upload reads (inflates
// and hashes) everything it unpacks to, so a bound of 16 × maxCode alone let a 1.6 MB
// archive of zeros cost the server 1.6 GB of inflating and hashing, 8.8 s of CPU an
// upload, for any token that may submit. Code compresses 3 to 10 times; gzip's most is
// about 1,000.
func codeUnpackLimit(n, maxCode int64) int64 {
	return min(16*maxCode, max(codeUnpackFloor, codeUnpackRatio*n))
}

// codeArchiveInvalid is the error of an archive of n bytes that fabric refused (ce): when
// it unpacks past its bound (ce.TooLarge) and that bound is the archive's own (under 16
// times maxCode), how the bound follows the archive's size is said too.
func codeArchiveInvalid(ce *fabric.CodeError, n, unpack, maxCode int64) error {
	msg := "invalid code archive: " + ce.Message
	if ce.TooLarge && unpack < 16*maxCode {
		msg += fmt.Sprintf(" (an archive of %d bytes may unpack to %d times its size, at least %d bytes: a code tree compresses far less)",
			n, codeUnpackRatio, min(codeUnpackFloor, 16*maxCode))
	}
	return &plane.InvalidError{Field: "code archive", Message: msg}
}

func (s *Server) handleCodePut(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, ns, q, plane.PermissionSubmit); err != nil {
		return err
	}
	key, err := s.codeKey(r, ns, q)
	if err != nil {
		return err
	}
	if size, err := s.code.size(r.Context(), key); err == nil {
		s.write(w, r, http.StatusOK, &api.CodeResponse{Digest: r.PathValue("digest"), Size: size, Existing: true})
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// A namespace at its cap is refused before a body of declared length is read, its
	// room held until it is stored (one listing of the namespace's archives an upload); a
	// body of undeclared length is checked once read (storeCode).
	var room *codeReservation
	if r.ContentLength >= 0 {
		if room, err = s.reserveCode(r.Context(), ns, max(r.ContentLength, 1)); err != nil {
			return err
		}
		defer room.release()
	}
	tmp, err := s.code.spool(key)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, http.MaxBytesReader(w, r.Body, s.cfg.MaxCodeBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return codeTooLarge(mbe.Limit)
		}
		return bodyCut("code archive", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	unpack := codeUnpackLimit(n, s.cfg.MaxCodeBytes)
	_, digest, err := fabric.ReadArchive(tmp, "", fabric.Limits{MaxBytes: unpack})
	var ce *fabric.CodeError
	if errors.As(err, &ce) {
		return codeArchiveInvalid(ce, n, unpack, s.cfg.MaxCodeBytes)
	} else if err != nil {
		return err
	}
	if want := r.PathValue("digest"); digest != want {
		return &plane.InvalidError{Field: "digest", Message: fmt.Sprintf("invalid digest: the archive's files have digest %s, not %s", digest, want)}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := s.storeCode(r.Context(), ns, key, tmp, n, room); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.CodeResponse{Digest: digest, Size: n})
	return nil
}

func (s *Server) handleCodeGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, ns, q, plane.PermissionConsume, plane.PermissionSubmit); err != nil {
		return err
	}
	key, err := s.codeKey(r, ns, q)
	if err != nil {
		return err
	}
	var (
		rd   io.ReadCloser
		size int64
	)
	if r.Method == http.MethodHead {
		size, err = s.code.size(r.Context(), key)
	} else {
		rd, size, err = s.code.open(r.Context(), key)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return &plane.Error{Code: plane.ErrNotFound.Code, Message: "no code archive " + r.PathValue("digest") + " for this queue: upload it first (PUT)"}
	} else if err != nil {
		return err
	}
	w.Header().Set("Content-Type", api.ContentTypeGzip)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	if rd != nil {
		defer rd.Close()
		_, _ = io.Copy(w, rd)
	}
	return nil
}
