package fabric

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json's expected answers")

// vectors is fabric/testdata/vectors.json: the answers both SDKs must give
// (python/tests/test_fabric.py reads the same file).
type vectors struct {
	Comment  string `json:"comment"`
	HostKeys []struct {
		Name    string `json:"name"`
		YAML    string `json:"yaml"`
		Mode    string `json:"mode"`
		HostKey string `json:"host_key"`
	} `json:"host_keys"`
	CPUs   [][2]any `json:"cpus"`
	Memory [][2]any `json:"memory"`
	Code   []struct {
		Name  string `json:"name"`
		Files []struct {
			Path       string `json:"path"`
			Content    string `json:"content"`
			Executable bool   `json:"executable"`
		} `json:"files"`
		Digest string `json:"digest"`
	} `json:"code"`
	Errors []struct {
		YAML     string `json:"yaml"`
		Line     int    `json:"line"`
		Field    string `json:"field"`
		Contains string `json:"contains"`
	} `json:"errors"`
	// BadArchives are code archives both readers refuse with a CodeError (invalid_code)
	// whose message contains Contains, under Limits when given (else the defaults).
	BadArchives []struct {
		Name     string `json:"name"`
		Archive  []byte `json:"archive"` // base64
		Contains string `json:"contains"`
		Limits   *struct {
			MaxFiles     int   `json:"max_files,omitempty"`
			MaxPathBytes int64 `json:"max_path_bytes,omitempty"`
		} `json:"limits,omitempty"`
	} `json:"bad_archives"`
}

func loadVectors(t *testing.T) (*vectors, string) {
	p := filepath.Join("testdata", "vectors.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return &v, p
}

func TestVectors(t *testing.T) {
	v, p := loadVectors(t)
	for i, hk := range v.HostKeys {
		c, err := Parse("vectors.yaml", []byte(hk.YAML))
		if err != nil {
			t.Fatalf("%s: %v", hk.Name, err)
		}
		m, err := c.Mode(hk.Mode)
		if err != nil {
			t.Fatal(err)
		}
		got := HostKey(m)
		if *update {
			v.HostKeys[i].HostKey = got
		} else if got != hk.HostKey {
			t.Errorf("%s: host key %s, want %s", hk.Name, got, hk.HostKey)
		}
	}
	for _, c := range v.CPUs {
		got, err := ParseCPUs(c[0].(string))
		if want, ok := c[1].(float64); ok {
			if err != nil || got != int64(want) {
				t.Errorf("cpus %q: %d, %v; want %v", c[0], got, err, want)
			}
		} else if err == nil {
			t.Errorf("cpus %q: %d, want an error", c[0], got)
		}
	}
	for _, c := range v.Memory {
		got, err := ParseMemory(c[0].(string))
		if want, ok := c[1].(float64); ok {
			if err != nil || got != int64(want) {
				t.Errorf("memory %q: %d, %v; want %v", c[0], got, err, want)
			}
		} else if err == nil {
			t.Errorf("memory %q: %d, want an error", c[0], got)
		}
	}
	for i, c := range v.Code {
		root := t.TempDir()
		var paths []string
		for _, f := range c.Files {
			full := filepath.Join(root, filepath.FromSlash(f.Path))
			os.MkdirAll(filepath.Dir(full), 0o755)
			mode := os.FileMode(0o644)
			if f.Executable {
				mode = 0o755
			}
			if err := os.WriteFile(full, []byte(f.Content), mode); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, f.Path)
		}
		files, err := HashFiles(root, paths)
		if err != nil {
			t.Fatal(err)
		}
		got := Digest(files)
		if *update {
			v.Code[i].Digest = got
		} else if got != c.Digest {
			t.Errorf("%s: digest %s, want %s", c.Name, got, c.Digest)
		}
		// The archive unpacks to the same digest.
		var buf bytes.Buffer
		if err := WriteArchive(&buf, root, files); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if _, d, err := ReadArchive(bytes.NewReader(buf.Bytes()), dir, Limits{}); err != nil || d != got {
			t.Errorf("%s: unpacked digest %s, %v; want %s", c.Name, d, err, got)
		}
	}
	for _, e := range v.Errors {
		_, err := Parse("vectors.yaml", []byte(e.YAML))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%q: %v, want a *ConfigError", e.YAML, err)
			continue
		}
		if ce.Line != e.Line || ce.Field != e.Field || !strings.Contains(ce.Error(), e.Contains) {
			t.Errorf("%q: line %d field %q %q; want line %d field %q containing %q", e.YAML, ce.Line, ce.Field, ce.Error(), e.Line, e.Field, e.Contains)
		}
	}
	for _, a := range v.BadArchives {
		var limits Limits
		if a.Limits != nil {
			limits.MaxFiles, limits.MaxPathBytes = a.Limits.MaxFiles, a.Limits.MaxPathBytes
		}
		for _, dir := range []string{"", t.TempDir()} {
			_, _, err := ReadArchive(bytes.NewReader(a.Archive), dir, limits)
			var ce *CodeError
			if !errors.As(err, &ce) || ce.Code() != "invalid_code" || !strings.Contains(err.Error(), a.Contains) {
				t.Errorf("%s (directory %q): %v; want a *CodeError containing %q", a.Name, dir, err, a.Contains)
			}
		}
	}
	if *update {
		data, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(p, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const sample = `
providers:
  slurm-gpu:
    type: slurm
    partition: gpu
modes:
  a100:
    resources: {cpus: 8, memory: 64GiB, gpus: 1, gpu_type: a100, labels: {zone: us-east}}
    setup:
      - pip install -r requirements.txt
    run_setup: [mkdir -p /tmp/scratch]
    env: {HF_HOME: /cache/hf}
    provider: slurm-gpu
    time_limit: 2h
  cpu:
    resources: {cpus: 0.5}
    code: false
code:
  max_size: 50MB
  mounts:
    - path: src
      exclude: ["*.pyc", __pycache__]
`

func TestParse(t *testing.T) {
	c, err := Parse("/p/lakeshore.yaml", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Mode("a100")
	if err != nil {
		t.Fatal(err)
	}
	r := m.Resources
	if r.MilliCPUs != 8000 || r.MemoryBytes != 64<<30 || r.GPUs != 1 || r.GPUType != "a100" || r.Labels["zone"] != "us-east" {
		t.Errorf("resources %+v", r)
	}
	if m.Provider != "slurm-gpu" || m.TimeLimit != 2*time.Hour || !m.Code || m.Env["HF_HOME"] != "/cache/hf" || len(m.Setup) != 1 || len(m.RunSetup) != 1 {
		t.Errorf("mode %+v", m)
	}
	if c.Modes["cpu"].Code || c.Modes["cpu"].Resources.MilliCPUs != 500 {
		t.Errorf("cpu mode %+v", c.Modes["cpu"])
	}
	if c.Code.MaxBytes != 50e6 || c.Code.Mounts[0].Path != "src" || len(c.Code.Mounts[0].Exclude) != 2 {
		t.Errorf("code %+v", c.Code)
	}
	if c.Providers["slurm-gpu"].Options["partition"] != "gpu" {
		t.Errorf("providers %+v", c.Providers)
	}
	_, err = c.Mode("h100")
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `no mode "h100" (allowed: a100, cpu)`) {
		t.Errorf("unknown mode: %v", err)
	}
	md := m.Metadata("ab")
	var decl RunDeclaration
	if err := json.Unmarshal([]byte(md[MetaRun]), &decl); err != nil || decl.GPUs != 1 || decl.HostKey != md[MetaHostKey] || md[MetaCode] != "ab" {
		t.Errorf("metadata %v (%v)", md, err)
	}
	// Env, run_setup and the time limit do not change the host key; setup does.
	m2 := *m
	m2.Env, m2.RunSetup, m2.TimeLimit = nil, nil, 0
	if HostKey(&m2) != HostKey(m) {
		t.Error("per-run fields changed the host key")
	}
	m2.Setup = []string{"pip install torch"}
	if HostKey(&m2) == HostKey(m) {
		t.Error("setup did not change the host key")
	}
}

func TestFind(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	os.MkdirAll(deep, 0o755)
	os.WriteFile(filepath.Join(root, ConfigFileName), []byte("modes: {x: {}}\n"), 0o644)
	noenv := func(string) string { return "" }
	p, err := Find(deep, noenv)
	if err != nil || p != filepath.Join(root, ConfigFileName) {
		t.Fatalf("Find: %q, %v", p, err)
	}
	other := filepath.Join(t.TempDir(), "other.yaml")
	os.WriteFile(other, []byte("modes: {y: {}}\n"), 0o644)
	c, err := Load(deep, func(k string) string {
		if k == EnvConfig {
			return other
		}
		return ""
	})
	if err != nil || c.Modes["y"] == nil {
		t.Fatalf("Load with %s: %v, %v", EnvConfig, c, err)
	}
	if _, err := Find(t.TempDir(), noenv); !errors.Is(err, ErrNoConfig) && err != nil {
		t.Fatalf("Find in an empty tree: %v", err)
	}
}

func TestGitFiles(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*.log\n"), 0o644)
	os.WriteFile(filepath.Join(root, "tracked.py"), []byte("x = 1\n"), 0o644)
	git("add", ".")
	git("commit", "-q", "-m", "one")
	os.WriteFile(filepath.Join(root, "untracked.py"), []byte("y = 2\n"), 0o644)
	os.WriteFile(filepath.Join(root, "ignored.log"), []byte("z\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	files, err := GitFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(files, ",") != ".gitignore,tracked.py,untracked.py" {
		t.Errorf("GitFiles: %v", files)
	}
	s, err := Take(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Take(root, &Code{MaxBytes: 10}); err == nil || !strings.Contains(err.Error(), "over the ceiling of 10") {
		t.Errorf("ceiling: %v", err)
	}
	// The archive is deterministic.
	s2, _ := Take(root, nil)
	if !bytes.Equal(s.Archive, s2.Archive) || s.Digest != s2.Digest {
		t.Error("two snapshots of one tree differ")
	}
}

func TestMountFiles(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"src/a.py", "src/b.pyc", "src/__pycache__/c.py", "src/data/big.bin", "other/x.py"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(p), 0o644)
	}
	files, err := MountFiles(root, []Mount{{Path: "src", Exclude: []string{"*.pyc", "__pycache__", "data"}}})
	if err != nil || strings.Join(files, ",") != "src/a.py" {
		t.Errorf("exclude: %v %v", files, err)
	}
	files, _ = MountFiles(root, []Mount{{Path: "src", Include: []string{"*.py"}}})
	if strings.Join(files, ",") != "src/__pycache__/c.py,src/a.py" {
		t.Errorf("include: %v", files)
	}
	// A mount that is (or passes through) a symbolic link, or is missing, is refused: it
	// would ship files from outside the project, or silently nothing.
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.py"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(root, "linked"))
	os.Symlink(filepath.Join(root, "src"), filepath.Join(root, "alias"))
	for path, want := range map[string]string{"linked": "is a symbolic link", "alias/__pycache__": "is a symbolic link",
		"nope": "does not exist"} {
		var ce *CodeError
		files, err := MountFiles(root, []Mount{{Path: path}})
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("mount %s: %v %v, want a CodeError saying %q", path, files, err, want)
		}
	}
}

// TestGitFilesOutsideGit: outside a git work tree the error says the way out, as Python's.
func TestGitFilesOutsideGit(t *testing.T) {
	_, err := GitFiles(t.TempDir())
	var ce *CodeError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "ship code from a git work tree or declare code.mounts in lakeshore.yaml") {
		t.Errorf("GitFiles outside git: %v", err)
	}
}

// archive builds a tar.gz with the given headers (content: the header's name).
func archive(t *testing.T, hdrs ...*tar.Header) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range hdrs {
		body := []byte(h.Name)
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func gzipped(t *testing.T, data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

func TestReadArchiveRefuses(t *testing.T) {
	cases := map[string][]*tar.Header{
		"bad path":          {{Typeflag: tar.TypeReg, Name: "../escape", Mode: 0o644}},
		"bad path ":         {{Typeflag: tar.TypeReg, Name: "/etc/x", Mode: 0o644}},
		"regular files":     {{Typeflag: tar.TypeSymlink, Name: "link", Linkname: "/etc/passwd"}},
		"regular files ":    {{Typeflag: tar.TypeLink, Name: "hard", Linkname: "/etc/passwd"}},
		"twice":             {{Typeflag: tar.TypeReg, Name: "a", Mode: 0o644}, {Typeflag: tar.TypeReg, Name: "a", Mode: 0o644}},
		"both as a file":    {{Typeflag: tar.TypeReg, Name: "a", Mode: 0o644}, {Typeflag: tar.TypeReg, Name: "a/b", Mode: 0o644}},
		"both as a file ":   {{Typeflag: tar.TypeReg, Name: "a/b/c", Mode: 0o644}, {Typeflag: tar.TypeReg, Name: "a/b", Mode: 0o644}},
		"per name":          {{Typeflag: tar.TypeReg, Name: "d/" + strings.Repeat("n", 256), Mode: 0o644}},
		"bytes are allowed": {{Typeflag: tar.TypeReg, Name: strings.Repeat("d/", 2100) + "f", Mode: 0o644}},
	}
	for want, hdrs := range cases {
		// Unpacking on a worker, and checking on the server (no directory): the same refusals,
		// so the server never stores an archive no worker can unpack.
		for _, dir := range []string{t.TempDir(), ""} {
			_, _, err := ReadArchive(bytes.NewReader(archive(t, hdrs...)), dir, Limits{})
			var ce *CodeError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), strings.TrimSpace(want)) {
				t.Errorf("%s (directory %q): %v", want, dir, err)
			}
		}
	}
	// A damaged archive is said so without the Go package of the reader that found it.
	for name, data := range map[string][]byte{"not gzip": []byte(strings.Repeat("plain text ", 10)), "not tar": gzipped(t, []byte(strings.Repeat("hello ", 200)))} {
		_, _, err := ReadArchive(bytes.NewReader(data), "", Limits{})
		if err == nil || strings.Contains(err.Error(), "archive/tar") || strings.Contains(err.Error(), "gzip: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A size bomb: the limit counts uncompressed bytes.
	big := archive(t, &tar.Header{Typeflag: tar.TypeReg, Name: strings.Repeat("x", 200), Mode: 0o644})
	if _, _, err := ReadArchive(bytes.NewReader(big), "", Limits{MaxBytes: 100}); err == nil || !strings.Contains(err.Error(), "more than 100 bytes") {
		t.Errorf("size bomb: %v", err)
	}
}

// TestReadArchiveOneMember: an archive is one gzip member holding one tar archive, read
// alike by every worker (Python's tarfile reads neither a second member nor a name that
// is not UTF-8): a tar split over two members, a member or a byte after the first, data
// after the tar's end blocks, a name not UTF-8 and an empty stream are refused, saying
// what is allowed; the archives our writers make (the tar end blocks, Python's record
// padding) are read as before.
func TestReadArchiveOneMember(t *testing.T) {
	one := archive(t, &tar.Header{Typeflag: tar.TypeReg, Name: "a.py", Mode: 0o644}, &tar.Header{Typeflag: tar.TypeReg, Name: "pkg/b.py", Mode: 0o755})
	files, digest, err := ReadArchive(bytes.NewReader(one), "", Limits{})
	if err != nil || len(files) != 2 {
		t.Fatalf("one member: %d files, %v", len(files), err)
	}
	plain := gunzip(t, one) // the entries, then Go's two end blocks
	if !bytes.Equal(plain[len(plain)-1024:], make([]byte, 1024)) {
		t.Fatal("the tar does not end with two zero blocks")
	}
	entries := plain[:len(plain)-1024]
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for name, data := range map[string][]byte{
		"record padding (Python's tarfile)": gzipped(t, cat(plain, make([]byte, 10240-len(plain)))),
		"one end block":                     gzipped(t, cat(entries, make([]byte, 512))),
		"no end blocks":                     gzipped(t, entries),
	} {
		if _, d, err := ReadArchive(bytes.NewReader(data), t.TempDir(), Limits{}); err != nil || d != digest {
			t.Errorf("%s: %v, digest %s want %s", name, err, d, digest)
		}
	}
	// A reader without ReadByte: what follows the member is still found.
	if _, _, err := ReadArchive(iotest.OneByteReader(bytes.NewReader(cat(one, one))), "", Limits{}); err == nil || !strings.Contains(err.Error(), "after its gzip stream") {
		t.Errorf("two members through a plain reader: %v", err)
	}

	badCRC := slices.Clone(one)
	badCRC[len(badCRC)-8] ^= 0xff // the member's CRC-32, checked once its end is read
	var nonUTF8 bytes.Buffer
	zw := gzip.NewWriter(&nonUTF8)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "a\xff.py", Mode: 0o644, Format: tar.FormatGNU}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	zw.Close()
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"split inside an entry":       {cat(gzipped(t, plain[:512]), gzipped(t, plain[512:])), "data after its gzip stream: one gzip member holding one tar archive is allowed"},
		"split between entries":       {cat(gzipped(t, plain[:1024]), gzipped(t, plain[1024:])), "data after its gzip stream"},
		"a second member":             {cat(one, one), "data after its gzip stream"},
		"an empty second member":      {cat(one, gzipped(t, nil)), "data after its gzip stream"},
		"a byte after the member":     {cat(one, []byte{0}), "data after its gzip stream"},
		"data after the end blocks":   {gzipped(t, cat(plain, []byte("hidden"))), "data after its tar end-of-archive blocks: only zero padding may follow"},
		"a name not UTF-8":            {nonUTF8.Bytes(), `bad path "a\xff.py" in the code tree: paths must be valid UTF-8`},
		"an empty stream":             {gzipped(t, nil), "the code archive is empty"},
		"a bad CRC":                   {badCRC, "the code archive is damaged: invalid checksum"},
		"padding past the size bound": {gzipped(t, cat(plain, make([]byte, 1<<20))), "unpacks to more than 4096 bytes"},
		"a cut-short member":          {one[:len(one)-4], "the code archive is damaged"},
	} {
		for _, dir := range []string{"", t.TempDir()} {
			_, _, err := ReadArchive(bytes.NewReader(c.data), dir, Limits{MaxBytes: 4096})
			var ce *CodeError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s (directory %q): %v; want a *CodeError containing %q", name, dir, err, c.want)
			} else if msg := err.Error(); strings.Contains(msg, "gzip:") || strings.Contains(msg, "archive/tar") || strings.Contains(msg, "fabric.") {
				t.Errorf("%s: %q names Go's packages", name, msg)
			}
		}
	}
	if err := checkPath("d\xc3/x.py"); err == nil || !strings.Contains(err.Error(), "valid UTF-8") {
		t.Errorf("checkPath of a cut UTF-8 sequence: %v", err)
	}
	if err := checkPath("dönüş/x.py"); err != nil {
		t.Errorf("checkPath of UTF-8: %v", err)
	}
}

func gunzip(t *testing.T, data []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadArchiveDeepPaths: files on deep paths, each in directories of its own, are
// bounded by their directories' count and cost one visit per directory (a 25 KB upload of
// 1,000 files 2,040 directories deep once took the server 50 s and 80 MB to refuse).
func TestReadArchiveDeepPaths(t *testing.T) {
	deep := func(n, depth int) []*tar.Header {
		var hdrs []*tar.Header
		for i := range n {
			hdrs = append(hdrs, &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("d%d/", i) + strings.Repeat("a/", depth) + "f", Mode: 0o644})
		}
		return hdrs
	}
	for _, dir := range []string{"", t.TempDir()} {
		_, _, err := ReadArchive(bytes.NewReader(archive(t, deep(3, 100)...)), dir, Limits{MaxFiles: 250})
		if err == nil || !strings.Contains(err.Error(), "more than 250 directories") {
			t.Errorf("directory %q: %v", dir, err)
		}
	}
	if _, _, err := ReadArchive(bytes.NewReader(archive(t, deep(1000, 2040)...)), "", Limits{}); err == nil || !strings.Contains(err.Error(), "more than 200000 directories") {
		t.Errorf("1,000 deep files: %v", err)
	}
	// Long paths in one directory: their bytes are bounded (a 3 MB archive of 199,000 files
	// with 4 KB paths held 1.6 GB of the server's memory while it was checked).
	var long []*tar.Header
	for i := range 100 {
		long = append(long, &tar.Header{Typeflag: tar.TypeReg, Name: strings.Repeat("a/", 2000) + fmt.Sprint(i), Mode: 0o644})
	}
	if _, _, err := ReadArchive(bytes.NewReader(archive(t, long...)), "", Limits{MaxPathBytes: 100_000}); err == nil || !strings.Contains(err.Error(), "paths take more than 100000 bytes") {
		t.Errorf("100 long paths: %v", err)
	}
	// Files sharing their directories count them once.
	files, _, err := ReadArchive(bytes.NewReader(archive(t, deep(1, 2040)[0], &tar.Header{Typeflag: tar.TypeReg, Name: "d0/" + strings.Repeat("a/", 2040) + "g", Mode: 0o644})), "", Limits{MaxFiles: 2042})
	if err != nil || len(files) != 2 {
		t.Errorf("two files in one deep directory: %d files, %v", len(files), err)
	}
}

// TestGitContextString: the line `lakeshore get` shows for the git context the Python SDK
// stores under MetaGit.
func TestGitContextString(t *testing.T) {
	var g GitContext
	if err := json.Unmarshal([]byte(`{"branch":"main","commit":"0123456789abcdef0123456789abcdef01234567","diff_sha256":"","dirty":false}`), &g); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		g    GitContext
		want string
	}{
		{g, "0123456789abcdef0123456789abcdef01234567 (main)"},
		{GitContext{Commit: "abc", Dirty: true, DiffSHA256: "ffeeddccbbaa99887766"}, "abc (detached, dirty, diff ffeeddccbbaa)"},
		{GitContext{Branch: "main", Dirty: true}, "(no commit) (main, dirty)"},
	} {
		if got := c.g.String(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.g, got, c.want)
		}
	}
}

// TestReadGitContext: the git context of a work tree (what Take records for a git tree), as
// the Python SDK's test_git_context checks it.
func TestReadGitContext(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	if _, err := ReadGitContext(dir); err == nil {
		t.Fatal("a directory outside git has no git context")
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "a.py"), []byte("a = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := ReadGitContext(dir)
	if err != nil || !reflect.DeepEqual(*g, GitContext{Branch: "main", Dirty: true}) {
		t.Fatalf("before the first commit: %+v, %v", g, err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "one")
	head := git("rev-parse", "HEAD")
	snap, err := Take(dir, nil)
	if err != nil || snap.Git == nil || !reflect.DeepEqual(*snap.Git, GitContext{Commit: head, Branch: "main"}) {
		t.Fatalf("a clean tree: %+v, %v", snap, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.py"), []byte("a = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("checkout", "-q", "--detach")
	g, err = ReadGitContext(dir)
	if err != nil || g.Commit != head || g.Branch != "" || !g.Dirty || len(g.DiffSHA256) != 64 {
		t.Fatalf("a dirty detached tree: %+v, %v", g, err)
	}

	// A project in a subdirectory: an edit elsewhere in the repository is not its diff, and
	// GIT_DIR in the environment does not point git at another repository.
	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "s.py"), []byte("s = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "two")
	if err := os.WriteFile(filepath.Join(dir, "a.py"), []byte("a = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head = git("rev-parse", "HEAD")
	t.Setenv("GIT_DIR", t.TempDir())
	g, err = ReadGitContext(sub)
	if err != nil || g.Commit != head || g.Dirty || g.DiffSHA256 != "" {
		t.Fatalf("a clean project directory in a dirty repository, GIT_DIR set: %+v, %v", g, err)
	}
}

// TestArchiveOverTheCeilingCostsTheCeiling: a tree holding a large incompressible file (a
// checkpoint left in the project) is refused at the ceiling without its whole archive in
// memory. Before, BuildArchive compressed the whole tree into memory and compared after:
// 648 MB resident for a 200 MB file and a 1 MB ceiling (`lakeshore submit --mode`).
func TestArchiveOverTheCeilingCostsTheCeiling(t *testing.T) {
	root := t.TempDir()
	big := make([]byte, 32<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "checkpoint.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	big = nil
	snap, err := Scan(root, &Code{Mounts: []Mount{{Path: "."}}, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err = snap.BuildArchive()
	runtime.ReadMemStats(&after)
	var ce *CodeError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "over the ceiling of 1048576") {
		t.Fatalf("BuildArchive: %v; want a *CodeError over the ceiling", err)
	}
	if snap.Archive != nil {
		t.Error("an archive over the ceiling was kept")
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 8<<20 {
		t.Errorf("BuildArchive allocated %d MiB for a 1 MiB ceiling and a 32 MiB file: want the ceiling's order, not the tree's", allocated>>20)
	}
}

// TestFindRefusesAParentsFileOfAnotherUser: the walk up from the working directory never
// takes a lakeshore.yaml another user left in a parent directory (a /tmp/lakeshore.yaml on
// a shared machine); one in the working directory itself, root's, the user's own, or one
// named by $LAKESHORE_CONFIG is taken. Before, the first one found was used, whoever wrote it.
func TestFindRefusesAParentsFileOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a file to another user (chown)")
	}
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(root, ConfigFileName)
	if err := os.WriteFile(planted, []byte("modes:\n  m: {setup: [touch /tmp/pwned]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	none := func(string) string { return "" }
	if err := os.Chown(planted, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err := Find(deep, none)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Code() != "invalid_config" || !strings.Contains(err.Error(), "belongs to another user (uid 4242)") ||
		!strings.Contains(err.Error(), EnvConfig+"="+planted) {
		t.Fatalf("Find below another user's file: %v; want a *ConfigError naming the owner and %s", err, EnvConfig)
	}
	if _, err := Load(deep, none); !errors.As(err, &ce) {
		t.Errorf("Load below another user's file: %v; want the *ConfigError", err)
	}
	// In the working directory itself, or named by $LAKESHORE_CONFIG: taken.
	if p, err := Find(root, none); err != nil || p != planted {
		t.Errorf("Find in the file's own directory: %q, %v", p, err)
	}
	if p, err := Find(deep, func(k string) string { return map[string]string{EnvConfig: planted}[k] }); err != nil || p != planted {
		t.Errorf("Find with %s: %q, %v", EnvConfig, p, err)
	}
	// Root's or the user's own: taken from a parent.
	if err := os.Chown(planted, 0, 0); err != nil {
		t.Fatal(err)
	}
	if p, err := Find(deep, none); err != nil || p != planted {
		t.Errorf("Find below root's file: %q, %v", p, err)
	}
}

// TestReadArchiveBoundsTheWholeStream: what the limits do not count as a file's bytes —
// directory entries (never written, so not counted as files either) and PAX records of up
// to 1 MiB per entry — is bounded too. Before, a 345 KiB upload of 131,072 directory
// entries (64 MiB of tar headers), or of a few files each carrying a 1 MiB PAX comment,
// was read to its end and accepted under a 1 MiB limit: the server's 100 MiB uploads
// unpacked to ~100 GiB of headers the server decompressed and parsed, minutes of CPU per
// request.
func TestReadArchiveBoundsTheWholeStream(t *testing.T) {
	var dirs []*tar.Header
	for range 131_072 {
		dirs = append(dirs, &tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755})
	}
	comment := strings.Repeat("c", 900<<10)
	var pax []*tar.Header
	for i := range 8 {
		pax = append(pax, &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprint(i), Mode: 0o644, Format: tar.FormatPAX, PAXRecords: map[string]string{"comment": comment}})
	}
	for name, hdrs := range map[string][]*tar.Header{"directory entries": dirs, "PAX records": pax} {
		data := archive(t, hdrs...)
		for _, dir := range []string{"", t.TempDir()} {
			_, _, err := ReadArchive(bytes.NewReader(data), dir, Limits{MaxBytes: 1 << 20, MaxFiles: 1000})
			var ce *CodeError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "more than") {
				t.Errorf("%s (%d bytes compressed, directory %q): %v; want a *CodeError over the limit", name, len(data), dir, err)
			}
		}
	}
	// An archive within the limits, its headers included, is read as before.
	var ok []*tar.Header
	for i := range 500 {
		ok = append(ok, &tar.Header{Typeflag: tar.TypeDir, Name: fmt.Sprintf("d%d/", i), Mode: 0o755}, &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("d%d/f", i), Mode: 0o644})
	}
	if files, _, err := ReadArchive(bytes.NewReader(archive(t, ok...)), t.TempDir(), Limits{MaxBytes: 1 << 20, MaxFiles: 1000}); err != nil || len(files) != 500 {
		t.Errorf("500 files in 500 directories: %d files, %v", len(files), err)
	}
}
