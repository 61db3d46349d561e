package fabric

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// File is one file of a code tree: its slash-separated path below the root, whether it
// is executable (archived as mode 0755, else 0644), its size and its SHA-256.
type File struct {
	Path       string
	Executable bool
	Size       int64
	SHA256     [32]byte
}

// digestRe is the form of a code digest: 64 lowercase hex digits.
var digestRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidDigest reports whether s has the form of a code digest (64 lowercase hex digits).
func ValidDigest(s string) bool { return digestRe.MatchString(s) }

// Digest returns the digest of a code tree: the SHA-256, in lowercase hex, of the text
// "lakeshore code 1\n" followed, for each file in byte order of its path, by
// "<path>\x00<644 or 755>\x00<size>\x00<sha256 hex>\n". It depends on the files'
// paths, contents and executable bits only — not on the archive's bytes, times or
// owners — so the Go and Python SDKs agree on it (fabric/testdata/vectors.json).
func Digest(files []File) string {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	io.WriteString(h, "lakeshore code 1\n")
	for _, f := range sorted {
		mode := "644"
		if f.Executable {
			mode = "755"
		}
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\n", f.Path, mode, f.Size, hex.EncodeToString(f.SHA256[:]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CodeError is code that cannot be shipped or unpacked: a tree over the size ceiling, a
// bad archive entry, a digest that does not match. Its Code is "invalid_code".
type CodeError struct {
	Message string
	// TooLarge is true when the archive unpacks to more than its Limits.MaxBytes (what a
	// caller may explain further, whatever the message's wording).
	TooLarge bool
}

// Code is the error's stable code, "invalid_code".
func (e *CodeError) Code() string  { return "invalid_code" }
func (e *CodeError) Error() string { return e.Message }

func codeErr(format string, args ...any) error {
	return &CodeError{Message: fmt.Sprintf(format, args...)}
}

// tooLargeErr is a CodeError with TooLarge set.
func tooLargeErr(format string, args ...any) error {
	return &CodeError{Message: fmt.Sprintf(format, args...), TooLarge: true}
}

// checkPath checks an archive or tree path: valid UTF-8 (the digest's text and the Python
// worker's file names are UTF-8), relative, slash-separated, clean, no "..", no NUL,
// newline or backslash, at most MaxPathBytes in all and MaxNameBytes per name (what every
// worker's file system can create).
func checkPath(p string) error {
	if !utf8.ValidString(p) {
		return codeErr("bad path %q in the code tree: paths must be valid UTF-8", p)
	}
	if p == "" || strings.ContainsAny(p, "\x00\n\\") || path.IsAbs(p) || path.Clean(p) != p || p == "." ||
		p == ".." || strings.HasPrefix(p, "../") {
		return codeErr("bad path %q in the code tree: want a clean relative path with no \"..\", backslash, NUL or newline", p)
	}
	if len(p) > MaxPathBytes {
		return codeErr("a path of %d bytes in the code tree (%.40q…): at most %d bytes are allowed", len(p), p, MaxPathBytes)
	}
	for rest := p; rest != ""; {
		name, next, _ := strings.Cut(rest, "/")
		if len(name) > MaxNameBytes {
			return codeErr("a name of %d bytes in the code tree path %.40q…: at most %d bytes per name are allowed", len(name), p, MaxNameBytes)
		}
		rest = next
	}
	return nil
}

// The longest path of a code tree, and the longest name in it, in bytes (Linux's PATH_MAX
// and NAME_MAX): an archive past them could be stored but not unpacked.
const (
	MaxPathBytes = 4096
	MaxNameBytes = 255
)

// GitFiles lists the files git would ship from the work tree at root: tracked files and
// untracked ones not ignored (git ls-files --cached --others --exclude-standard), minus
// deleted ones, symbolic links and anything not a regular file. Paths are relative to
// root. Errors: a *CodeError with git's message and the way out (a git work tree, or
// code.mounts), as the Python SDK's lakeshore.code.git_files says.
func GitFiles(root string) ([]string, error) {
	cmd := gitCommand(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, codeErr("cannot list the git tree at %s: %s; ship code from a git work tree or declare code.mounts in lakeshore.yaml",
			root, cmp.Or(strings.TrimSpace(stderr.String()), err.Error()))
	}
	var files []string
	for p := range strings.SplitSeq(string(out), "\x00") {
		if p == "" {
			continue
		}
		st, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		files = append(files, p)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// MountFiles lists the regular files of the mounts below root (no symbolic links, no
// .git directories), filtered by each mount's Include and Exclude, as paths relative to
// root. Errors: a *CodeError for a mount whose path (or a directory on the way to it) is a
// symbolic link or does not exist (the Python SDK's lakeshore.code.mount_files gives the
// same), or the error of reading a directory.
func MountFiles(root string, mounts []Mount) ([]string, error) {
	var files []string
	for _, m := range mounts {
		if err := checkMountPath(root, m.Path); err != nil {
			return nil, err
		}
		base := filepath.Join(root, filepath.FromSlash(m.Path))
		err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == ".git" {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, err := filepath.Rel(base, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if len(m.Include) > 0 && !matchAny(m.Include, rel) || matchAny(m.Exclude, rel) {
				return nil
			}
			files = append(files, path.Join(m.Path, rel))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list mount %s: %w", m.Path, err)
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// checkMountPath refuses a mount path (relative, slash-separated, clean) that does not
// exist below root or passes through a symbolic link: a link would ship files from outside
// the project, or (followed nowhere) nothing at all.
func checkMountPath(root, mountPath string) error {
	if mountPath == "." {
		return nil
	}
	p := root
	for part := range strings.SplitSeq(mountPath, "/") {
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return codeErr("code mount %s: %s does not exist below the project root %s", mountPath, p, root)
		case err != nil:
			return fmt.Errorf("code mount %s: %w", mountPath, err)
		case st.Mode()&fs.ModeSymlink != 0:
			return codeErr("code mount %s: %s is a symbolic link; a mount ships only files inside the project: "+
				"name a directory of the project under code.mounts (or copy the linked files into it)", mountPath, p)
		}
	}
	return nil
}

func checkPattern(p string) error {
	_, err := path.Match(p, "")
	return err
}

// matchAny reports whether a pattern matches rel: the whole path, a leading directory of
// it, or (for a pattern without "/") any one component.
func matchAny(patterns []string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		slash := strings.Contains(p, "/")
		for i := range parts {
			if ok, _ := path.Match(p, strings.Join(parts[:i+1], "/")); ok {
				return true
			}
			if !slash {
				if ok, _ := path.Match(p, parts[i]); ok {
					return true
				}
			}
		}
	}
	return false
}

// HashFiles reads the named files below root and returns them as Files.
func HashFiles(root string, paths []string) ([]File, error) {
	out := make([]File, 0, len(paths))
	for _, p := range paths {
		if err := checkPath(p); err != nil {
			return nil, err
		}
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		file := File{Path: p, Executable: st.Mode()&0o111 != 0, Size: n}
		copy(file.SHA256[:], h.Sum(nil))
		out = append(out, file)
	}
	return out, nil
}

// Snapshot is a code tree ready to ship: its files, digest and archive, and for a git tree
// its git context (nil for declared mounts).
type Snapshot struct {
	// Files are the tree's files in path order, with their hashes.
	Files []File
	// Digest is the code digest of Files (Digest, docs/fabric.md).
	Digest string
	// Archive is the gzip-compressed tar of Files (WriteArchive); nil after Scan until
	// BuildArchive.
	Archive []byte
	// Git is the git context of the tree; nil for declared mounts.
	Git *GitContext

	root  string // where Files are read from
	limit int64  // the compressed-size ceiling of Archive, in bytes
}

// gitCommand is a git command on the work tree at root: without the environment's GIT_*
// variables (which could point git at another repository, index or work tree than the
// project's), and without running the repository's own fsmonitor hook (core.fsmonitor):
// snapshotting code runs no program the tree names. The Python SDK's lakeshore.code runs
// git the same way.
func gitCommand(root string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", append([]string{"-c", "core.fsmonitor=false", "-C", root}, args...)...)
	env := os.Environ()
	cmd.Env = env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// ReadGitContext reads the GitContext of the work tree at root with git (four or five
// commands; the Python SDK's lakeshore.code.git_context runs the same ones). Errors: root
// is not a git work tree, or git failed, with git's message.
func ReadGitContext(root string) (*GitContext, error) {
	run := func(args ...string) ([]byte, error) {
		cmd := gitCommand(root, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git %s at %s: %v: %s", args[0], root, err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	if _, err := run("rev-parse", "--is-inside-work-tree"); err != nil {
		return nil, err
	}
	g := &GitContext{}
	if out, err := run("rev-parse", "--verify", "-q", "HEAD"); err == nil {
		g.Commit = strings.TrimSpace(string(out))
	} // else no commit yet
	if out, err := run("symbolic-ref", "--short", "-q", "HEAD"); err == nil {
		g.Branch = strings.TrimSpace(string(out))
	} // else detached
	// Dirty and the diff cover the project's directory (what ships), not the whole repository.
	status, err := run("status", "--porcelain=v1", "-z", "--ignore-submodules=none", "--", ".")
	if err != nil {
		return nil, err
	}
	g.Dirty = len(status) > 0
	if g.Commit != "" {
		diff, err := run("diff", "--binary", "--no-ext-diff", "--no-color", "HEAD", "--", ".")
		if err != nil {
			return nil, err
		}
		if len(diff) > 0 {
			sum := sha256.Sum256(diff)
			g.DiffSHA256 = hex.EncodeToString(sum[:])
		}
	}
	if out, err := run("submodule", "status", "--recursive", "--", "."); err == nil {
		// " <sha> <path> (<describe>)", the first column a status mark or a space.
		for line := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
			if len(line) < 2 {
				continue
			}
			if f := strings.Split(line[1:], " "); len(f) >= 2 {
				g.Submodules = append(g.Submodules, GitSubmodule{Path: f[1], Commit: f[0]})
			}
		}
	}
	return g, nil
}

// Files lists what a submit ships from the project at root: the mounts of code when it
// has some, else the git tree.
func Files(root string, code *Code) ([]string, error) {
	if code != nil && len(code.Mounts) > 0 {
		return MountFiles(root, code.Mounts)
	}
	return GitFiles(root)
}

// Take snapshots the code of the project at root: lists (Files), hashes and archives it
// (Scan, then BuildArchive). Errors: *CodeError when the compressed archive exceeds the
// ceiling (code.MaxBytes, else DefaultMaxCodeBytes).
func Take(root string, code *Code) (*Snapshot, error) {
	snap, err := Scan(root, code)
	if err != nil {
		return nil, err
	}
	if err := snap.BuildArchive(); err != nil {
		return nil, err
	}
	return snap, nil
}

// Scan lists and hashes the code of the project at root (Files, HashFiles) and reads its
// git context (for the git tree, not for declared mounts), without archiving it: enough
// for the digest, so that a submit of code the server already holds builds no archive.
// BuildArchive makes the archive when it must be uploaded. Errors: Files', HashFiles',
// ReadGitContext's.
func Scan(root string, code *Code) (*Snapshot, error) {
	paths, err := Files(root, code)
	if err != nil {
		return nil, err
	}
	files, err := HashFiles(root, paths)
	if err != nil {
		return nil, err
	}
	limit := int64(DefaultMaxCodeBytes)
	if code != nil && code.MaxBytes > 0 {
		limit = code.MaxBytes
	}
	snap := &Snapshot{Files: files, Digest: Digest(files), root: root, limit: limit}
	if code == nil || len(code.Mounts) == 0 {
		if snap.Git, err = ReadGitContext(root); err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// BuildArchive sets s.Archive (once) to the deterministic archive of s.Files (WriteArchive,
// reading the files again and checking their hashes). Errors: *CodeError when the
// compressed archive exceeds the ceiling Scan was given (checked before any upload), or a
// file changed since Scan; WriteArchive's.
func (s *Snapshot) BuildArchive() error {
	if s.Archive != nil {
		return nil
	}
	// The archive stops at the ceiling: a tree with a large file in it (a checkpoint left
	// in the project) costs the ceiling in memory, not the file's size.
	buf := &ceilingBuffer{limit: s.limit}
	if err := WriteArchive(buf, s.root, s.Files); err != nil {
		if errors.Is(err, errOverCeiling) {
			return codeErr("the code archive of %s is over the ceiling of %d bytes compressed (code.max_size in %s; exclude large files with code.mounts' exclude)", s.root, s.limit, ConfigFileName)
		}
		return err
	}
	s.Archive = buf.Bytes()
	return nil
}

// errOverCeiling is a ceilingBuffer's write past its limit.
var errOverCeiling = errors.New("over the code archive's ceiling")

// ceilingBuffer is a bytes.Buffer that refuses (errOverCeiling) a write that would take it
// past limit bytes.
type ceilingBuffer struct {
	bytes.Buffer
	limit int64
}

func (b *ceilingBuffer) Write(p []byte) (int, error) {
	if int64(b.Len())+int64(len(p)) > b.limit {
		return 0, errOverCeiling
	}
	return b.Buffer.Write(p)
}

// WriteArchive writes the deterministic archive of files (read again from root, and
// checked against their hashes) to w: a gzip-compressed tar of regular-file entries in
// path order, mode 0644 or 0755, modification time 0, owner 0.
func WriteArchive(w io.Writer, root string, files []File) error {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for _, f := range sorted {
		mode := int64(0o644)
		if f.Executable {
			mode = 0o755
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: mode, Size: f.Size, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		in, err := os.Open(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(io.MultiWriter(tw, h), io.LimitReader(in, f.Size))
		in.Close()
		if err != nil {
			return err
		}
		if !bytes.Equal(h.Sum(nil), f.SHA256[:]) {
			return codeErr("%s changed while the code was archived: submit again", f.Path)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// Limits bound what ReadArchive accepts.
type Limits struct {
	// MaxBytes bounds the files' total uncompressed size (default 4 GiB).
	MaxBytes int64
	// MaxFiles bounds the number of files, and apart from them the number of
	// directories they are in (default 200,000 each).
	MaxFiles int
	// MaxPathBytes bounds the sum of the files' path lengths, in bytes, which a reader
	// keeps in memory (default 32 MiB: 200,000 paths of 167 bytes).
	MaxPathBytes int64
}

// ReadArchive reads a code archive, checking every entry (regular files and directories
// only; clean relative paths; no duplicates; the limits), and returns its files and
// digest. With dir not "", it also writes the files below dir (which must exist; the
// caller unpacks into a fresh directory and renames it into place once the digest is
// checked, so that a crash never leaves a half-unpacked entry under its final name).
// The archive is one gzip member holding one tar archive: an empty stream, a second member
// or any byte after the first, and anything but zero padding after the tar's end are
// refused, as every worker's reader must take whatever the server stored.
// Errors: *CodeError for a bad archive.
func ReadArchive(r io.Reader, dir string, limits Limits) ([]File, string, error) {
	if limits.MaxBytes <= 0 {
		limits.MaxBytes = 4 << 30
	}
	if limits.MaxFiles <= 0 {
		limits.MaxFiles = 200_000
	}
	if limits.MaxPathBytes <= 0 {
		limits.MaxPathBytes = 32 << 20
	}
	// gzip reads a flate.Reader (an io.ByteReader) directly, byte by byte, so after the
	// first member br holds exactly what follows it.
	br := bufio.NewReader(r)
	// Go's gzip ignores the reserved header flag bits; zlib (the Python worker's reader)
	// refuses them, so the server refuses them too.
	if h, _ := br.Peek(4); len(h) == 4 && h[0] == 0x1f && h[1] == 0x8b && h[3]&0xe0 != 0 {
		return nil, "", codeErr("the code archive's gzip header sets reserved flag bits (%#x): they must be zero", h[3]&0xe0)
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, "", codeErr("the code archive is not gzip-compressed: %s", readerMessage(err))
	}
	zr.Multistream(false) // a second member is refused below, not read as more of the tar
	// The whole tar stream is bounded, not only the files' bytes: directory entries, the
	// headers and PAX records (up to 1 MiB each) would otherwise be read without limit.
	stream := &boundedReader{r: zr, limit: limits.MaxBytes + streamOverhead}
	body := bufio.NewReader(stream)
	if _, err := body.Peek(1); err == io.EOF {
		return nil, "", codeErr("the code archive is empty: want a tar archive in it (the archive of no files is the tar end-of-archive blocks)")
	}
	tr := tar.NewReader(body)
	var files []File
	seen := map[string]bool{}    // the files
	parents := map[string]bool{} // the directories the files are in
	var total, pathBytes int64
	dirEntries := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", cmp.Or(stream.over(), secondMember(br, err), codeErr("the code archive is damaged: %s", readerMessage(err)))
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if err := checkPath(name); err != nil {
			return nil, "", err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			// Nothing is written for a directory entry, but each costs a header: counted.
			if dirEntries++; dirEntries > limits.MaxFiles {
				return nil, "", codeErr("the code archive holds more than %d directory entries", limits.MaxFiles)
			}
			continue
		case tar.TypeReg:
		default:
			return nil, "", codeErr("the code archive holds %q of tar type %q: only regular files are allowed (no links or devices)", name, string(hdr.Typeflag))
		}
		if pathBytes += int64(len(name)); pathBytes > limits.MaxPathBytes {
			return nil, "", codeErr("the code archive's paths take more than %d bytes together", limits.MaxPathBytes)
		}
		if seen[name] {
			return nil, "", codeErr("the code archive holds %q twice", name)
		}
		if parents[name] {
			return nil, "", codeErr("the code archive holds %q both as a file and as a directory", name)
		}
		// The directories of name, deepest first, up to the first one already known (its own
		// were recorded with it): each directory is visited once over the whole archive, so
		// deep paths cost no more than their directories, which count against MaxFiles.
		for d := name; ; {
			i := strings.LastIndexByte(d, '/')
			if i < 0 {
				break
			}
			d = d[:i]
			if parents[d] {
				break
			}
			if seen[d] {
				return nil, "", codeErr("the code archive holds %q both as a file and as a directory", d)
			}
			if len(parents) >= limits.MaxFiles {
				return nil, "", codeErr("the code archive holds more than %d directories", limits.MaxFiles)
			}
			parents[d] = true
		}
		seen[name] = true
		if len(files) >= limits.MaxFiles {
			return nil, "", codeErr("the code archive holds more than %d files", limits.MaxFiles)
		}
		total += hdr.Size
		if hdr.Size < 0 || total > limits.MaxBytes {
			return nil, "", tooLargeErr("the code archive unpacks to more than %d bytes", limits.MaxBytes)
		}
		h := sha256.New()
		var dst io.Writer = h
		var out *os.File
		if dir != "" {
			target := filepath.Join(dir, filepath.FromSlash(name))
			if err := mkdirInside(dir, filepath.Dir(target)); err != nil {
				return nil, "", err
			}
			mode := os.FileMode(0o644)
			if hdr.Mode&0o111 != 0 {
				mode = 0o755
			}
			if out, err = os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode); err != nil {
				return nil, "", err
			}
			dst = io.MultiWriter(h, out)
		}
		n, err := io.Copy(dst, io.LimitReader(tr, hdr.Size))
		if out != nil {
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return nil, "", cmp.Or(stream.over(), secondMember(br, err), codeErr("the code archive is damaged at %q: %s", name, readerMessage(err)))
		}
		if n != hdr.Size {
			return nil, "", codeErr("the code archive is cut short at %q", name)
		}
		f := File{Path: name, Executable: hdr.Mode&0o111 != 0, Size: n}
		copy(f.SHA256[:], h.Sum(nil))
		files = append(files, f)
	}
	if err := checkArchiveEnd(br, body, total, limits.MaxBytes); err != nil {
		return nil, "", cmp.Or(stream.over(), err)
	}
	return files, Digest(files), nil
}

// streamOverhead is what a code archive's tar stream may hold beyond its files' bytes
// (Limits.MaxBytes): headers, PAX records and padding. The Python worker's reader allows
// the same (lakeshore.code.read_archive).
const streamOverhead = 1 << 20

// boundedReader reads r, failing with a *CodeError once more than limit bytes were read.
type boundedReader struct {
	r        io.Reader
	n, limit int64
	err      error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	if b.n += int64(n); b.n > b.limit {
		b.err = tooLargeErr("the code archive unpacks to more than %d bytes (its files' %d bytes and %d of tar headers and padding)",
			b.limit, b.limit-streamOverhead, streamOverhead)
		return n, b.err
	}
	return n, err
}

// over is the error of a read past the limit, or nil: the reader that got it (tar's, or
// checkArchiveEnd) may have reported it as another error.
func (b *boundedReader) over() error { return b.err }

// checkArchiveEnd reads what follows the tar's end-of-archive blocks: the rest of the gzip
// member (zero padding only, as a tar record's, counted with the files' total bytes
// against maxBytes; reading it to its end also checks the member's CRC and size), then
// the stream after the member, which must end there. Another reader (Python's tarfile)
// does not read a second gzip member as more of the tar, nor stops at the same place past
// the end blocks, so the server keeps only archives that every reader reads alike.
func checkArchiveEnd(br *bufio.Reader, zr io.Reader, total, maxBytes int64) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := zr.Read(buf)
		if total += int64(n); total > maxBytes {
			return tooLargeErr("the code archive unpacks to more than %d bytes", maxBytes)
		}
		if slices.ContainsFunc(buf[:n], func(b byte) bool { return b != 0 }) {
			return codeErr("the code archive has data after its tar end-of-archive blocks: only zero padding may follow the last entry")
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return codeErr("the code archive is damaged: %s", readerMessage(err))
		}
	}
	switch _, err := br.ReadByte(); {
	case err == nil:
		return errAfterMember()
	case err != io.EOF:
		return codeErr("the code archive is damaged: %s", readerMessage(err))
	}
	return nil
}

func errAfterMember() error {
	return codeErr("the code archive has data after its gzip stream: one gzip member holding one tar archive is allowed (no second member, no trailing bytes)")
}

// secondMember is errAfterMember when err is the tar ending mid-block because the first gzip
// member ended with more bytes after it (a tar split over members), else nil.
func secondMember(br *bufio.Reader, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		if _, perr := br.Peek(1); perr == nil {
			return errAfterMember()
		}
	}
	return nil
}

// readerMessage is the message of a gzip or tar reader's error without the Go package
// name it starts with ("archive/tar: invalid tar header" is "invalid tar header").
func readerMessage(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"archive/tar: ", "gzip: ", "flate: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return msg
}

// mkdirInside creates dir (inside root) with its parents, refusing a path that leaves
// root through an existing symbolic link.
func mkdirInside(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return codeErr("bad directory %q in the code archive", dir)
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." {
			continue
		}
		cur = filepath.Join(cur, part)
		st, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil {
				return err
			}
		case err != nil:
			return err
		case !st.IsDir():
			return codeErr("the code archive uses %q both as a file and as a directory", filepath.ToSlash(strings.TrimPrefix(cur, root+string(filepath.Separator))))
		}
	}
	return nil
}
