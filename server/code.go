package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// The code routes: archives of the submitter's code, shipped with runs (docs/fabric.md).
// Stored once per (namespace, queue, digest) under Config.CodeDir, written to a temporary
// file, checked entry by entry (fabric.ReadArchive: regular files only, clean relative
// paths, the size bound) and against the digest of the path, then renamed into place: a
// crash leaves at most a temporary file, never a wrong archive under a digest.

func (s *Server) codeRoutes() map[string]handlerFunc {
	return map[string]handlerFunc{
		"PUT " + api.CodePath: s.handleCodePut,
		"GET " + api.CodePath: s.handleCodeGet,
	}
}

func codeTooLarge(limit int64) error {
	return &tooLargeError{limit: limit, advice: "ship less code: exclude data and build output (code.mounts' exclude in lakeshore.yaml)"}
}

// codeFile returns the archive's path, checking the route's digest; Errors: 501 without
// Config.CodeDir, *plane.InvalidError for a bad digest.
func (s *Server) codeFile(r *http.Request, ns, q string) (string, error) {
	if s.cfg.CodeDir == "" {
		return "", &plane.Error{Code: plane.ErrNotImplemented.Code, Message: "this server keeps no code archives (it was started without a code directory)"}
	}
	digest := r.PathValue("digest")
	if !fabric.ValidDigest(digest) {
		return "", plane.Invalid("digest", digest, "64 lowercase hex digits (the SHA-256 code digest of docs/fabric.md)")
	}
	return filepath.Join(s.cfg.CodeDir, ns, q, digest+".tar.gz"), nil
}

func (s *Server) handleCodePut(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, ns, q, plane.PermissionSubmit); err != nil {
		return err
	}
	target, err := s.codeFile(r, ns, q)
	if err != nil {
		return err
	}
	if st, err := os.Stat(target); err == nil {
		s.write(w, r, http.StatusOK, &api.CodeResponse{Digest: r.PathValue("digest"), Size: st.Size(), Existing: true})
		return nil
	}
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".upload-*")
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
		return &plane.InvalidError{Field: "request body", Rule: "send a complete code archive: " + err.Error()}
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, digest, err := fabric.ReadArchive(tmp, "", fabric.Limits{MaxBytes: 16 * s.cfg.MaxCodeBytes})
	var ce *fabric.CodeError
	if errors.As(err, &ce) {
		return &plane.InvalidError{Field: "code archive", Message: "invalid code archive: " + ce.Message}
	} else if err != nil {
		return err
	}
	if want := r.PathValue("digest"); digest != want {
		return &plane.InvalidError{Field: "digest", Message: fmt.Sprintf("invalid digest: the archive's files have digest %s, not %s", digest, want)}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
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
	target, err := s.codeFile(r, ns, q)
	if err != nil {
		return err
	}
	f, err := os.Open(target)
	if errors.Is(err, fs.ErrNotExist) {
		return &plane.Error{Code: plane.ErrNotFound.Code, Message: "no code archive " + r.PathValue("digest") + " for this queue: upload it first (PUT)"}
	} else if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", api.ContentTypeGzip)
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.Copy(w, f)
	}
	return nil
}
