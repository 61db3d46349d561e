package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/fileblob"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// codeArchive snapshots a small tree and returns its digest and archive.
func codeArchive(t *testing.T, files map[string]string) (string, []byte) {
	t.Helper()
	root := t.TempDir()
	var paths []string
	for p, content := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(content), 0o644))
		paths = append(paths, p)
	}
	hashed, err := fabric.HashFiles(root, paths)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, fabric.WriteArchive(&buf, root, hashed))
	return fabric.Digest(hashed), buf.Bytes()
}

// TestCodeRoutes: an archive is stored once per digest, checked against its digest and
// for unsafe entries, downloadable by workers, and only a token that may submit to the
// queue may upload (docs/fabric.md) — in a directory and in a bucket (gocloud's file://
// driver), where a second server given the same bucket serves what the first stored.
func TestCodeRoutes(t *testing.T) {
	t.Parallel()
	t.Run("directory", func(t *testing.T) {
		t.Parallel()
		testCodeRoutes(t, &server.Config{AdminToken: adminSecret, CodeDir: t.TempDir(), MaxCodeBytes: 64 << 10}, nil)
	})
	t.Run("bucket", func(t *testing.T) {
		t.Parallel()
		bucket, err := fileblob.OpenBucket(t.TempDir(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { bucket.Close() })
		cfg := &server.Config{AdminToken: adminSecret, CodeBucket: bucket, MaxCodeBytes: 64 << 10}
		testCodeRoutes(t, cfg, func(t *testing.T, path string, data []byte) {
			// Another server given the same bucket serves the stored archive.
			second := setup(t, cfg)
			r := second.do(t, "GET", path, "", nil, adminSecret)
			require.Equal(t, 200, r.status)
			require.Equal(t, data, r.body)
			keys := 0
			iter := bucket.List(nil)
			for {
				obj, err := iter.Next(t.Context())
				if err != nil {
					break
				}
				require.True(t, strings.HasPrefix(obj.Key, "code/default/jobs/"), "key %q", obj.Key)
				keys++
			}
			require.Equal(t, 1, keys, "one object per digest, nothing spooled into the bucket")
		})
	})
}

func testCodeRoutes(t *testing.T, cfg *server.Config, shared func(t *testing.T, path string, data []byte)) {
	b := setup(t, cfg)
	producer, _ := b.mint(t, "default", "jobs", 0, plane.PermissionSubmit)
	worker, _ := b.mint(t, "default", "jobs", 0, plane.PermissionConsume)
	reader, _ := b.mint(t, "default", "jobs", 0, plane.PermissionRead)
	other, _ := b.mint(t, "default", "other", 0, plane.PermissionSubmit)

	digest, data := codeArchive(t, map[string]string{"pkg/mod.py": "def f():\n    return 1\n", "main.py": "import pkg\n"})
	path := "/v1/namespaces/default/queues/jobs/code/" + digest

	b.do(t, "GET", path, "", nil, worker).requireError(t, 404, "not_found")
	b.do(t, "PUT", path, api.ContentTypeGzip, data, worker).requireError(t, 403, "forbidden")
	b.do(t, "PUT", path, api.ContentTypeGzip, data, reader).requireError(t, 403, "forbidden")
	b.do(t, "PUT", "/v1/namespaces/default/queues/jobs/code/"+digest, api.ContentTypeGzip, data, other).requireError(t, 403, "forbidden")

	r := b.do(t, "PUT", path, api.ContentTypeGzip, data, producer)
	require.Equal(t, 200, r.status, "%s", r.body)
	var out api.CodeResponse
	require.NoError(t, json.Unmarshal(r.body, &out))
	require.Equal(t, api.CodeResponse{Digest: digest, Size: int64(len(data))}, out)
	r = b.do(t, "PUT", path, api.ContentTypeGzip, data, producer)
	require.NoError(t, json.Unmarshal(r.body, &out))
	require.True(t, out.Existing, "a second upload of one digest writes nothing")

	r = b.do(t, "GET", path, "", nil, worker)
	require.Equal(t, 200, r.status)
	require.Equal(t, data, r.body)
	r = b.do(t, "HEAD", path, "", nil, worker)
	require.Equal(t, 200, r.status)
	b.do(t, "GET", path, "", nil, other).requireError(t, 403, "forbidden")
	if shared != nil {
		shared(t, path, data)
	}

	// The digest of the path must be the archive's.
	d2, _ := codeArchive(t, map[string]string{"x.py": "x = 2\n"})
	eb := b.do(t, "PUT", "/v1/namespaces/default/queues/jobs/code/"+d2, api.ContentTypeGzip, data, producer).requireError(t, 400, "invalid")
	require.Contains(t, eb.Message, "the archive's files have digest "+digest)
	b.do(t, "PUT", "/v1/namespaces/default/queues/jobs/code/not-a-digest", api.ContentTypeGzip, data, producer).requireError(t, 400, "invalid")

	// Unsafe entries are refused.
	var evil bytes.Buffer
	zw := gzip.NewWriter(&evil)
	tw := tar.NewWriter(zw)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "link", Linkname: "/etc/passwd"}))
	tw.Close()
	zw.Close()
	eb = b.do(t, "PUT", path[:len(path)-64]+strings.Repeat("0", 64), api.ContentTypeGzip, evil.Bytes(), producer).requireError(t, 400, "invalid")
	require.Contains(t, eb.Message, "only regular files")

	// An archive only Go's reader reads (a tar split over two gzip members) cannot take a
	// digest first: it is refused, and the tree's own archive is then stored, not answered
	// existing (a worker's Python reader never saw the planted one).
	d3, data3 := codeArchive(t, map[string]string{"planted.py": "x = 3\n"})
	zr, err := gzip.NewReader(bytes.NewReader(data3))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	var split bytes.Buffer
	for _, part := range [][]byte{plain[:512], plain[512:]} {
		zw := gzip.NewWriter(&split)
		zw.Write(part)
		zw.Close()
	}
	path3 := "/v1/namespaces/default/queues/jobs/code/" + d3
	eb = b.do(t, "PUT", path3, api.ContentTypeGzip, split.Bytes(), producer).requireError(t, 400, "invalid")
	require.Contains(t, eb.Message, "one gzip member holding one tar archive is allowed")
	require.Equal(t, 404, b.do(t, "HEAD", path3, "", nil, worker).status, "the refused upload stored nothing")
	r = b.do(t, "PUT", path3, api.ContentTypeGzip, data3, producer)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &out))
	require.False(t, out.Existing)

	// Over the size bound: 413.
	big := bytes.Repeat([]byte("x"), 65<<10)
	b.do(t, "PUT", path, api.ContentTypeGzip, big, producer)
	r = b.do(t, "PUT", "/v1/namespaces/default/queues/jobs/code/"+strings.Repeat("1", 64), api.ContentTypeGzip, big, producer)
	require.Equal(t, 413, r.status, "%s", r.body)
	require.Contains(t, r.errBody(t).Message, "ship less code")
}

// TestCodeRoutesOff: without a code directory the routes answer 501.
func TestCodeRoutesOff(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.do(t, "GET", "/v1/namespaces/default/queues/jobs/code/"+strings.Repeat("a", 64), "", nil, "").requireError(t, 501, "not_implemented")
}

// zerosArchive returns the digest and archive of one file of size zero bytes (a size
// bomb's shape: it compresses about a thousand times).
func zerosArchive(t *testing.T, size int64) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "zeros.bin", Mode: 0o644, Size: size}))
	h := sha256.New()
	_, err := io.CopyN(io.MultiWriter(tw, h), zeroReader{}, size)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	f := fabric.File{Path: "zeros.bin", Size: size}
	copy(f.SHA256[:], h.Sum(nil))
	return fabric.Digest([]fabric.File{f}), buf.Bytes()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestCodeUnpackBoundFollowsTheArchive: an upload may unpack to 64 times its own size (at
// least 64 MiB), not to 16 times the server's bound whatever its size: the check inflates
// and hashes all of it, so a 1.6 MB archive of zeros cost the server 1.6 GB of work an
// upload (8.8 s of CPU), for any token that may submit. Fails on the old code, which
// stored the 100 MiB of zeros below (under 16 × 8 MiB).
func TestCodeUnpackBoundFollowsTheArchive(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret, CodeDir: t.TempDir(), MaxCodeBytes: 8 << 20})
	producer, _ := b.mint(t, "default", "jobs", 0, plane.PermissionSubmit)

	digest, data := zerosArchive(t, 100<<20)
	require.Less(t, len(data), 1<<20, "the bomb is small")
	path := "/v1/namespaces/default/queues/jobs/code/" + digest
	eb := b.do(t, "PUT", path, api.ContentTypeGzip, data, producer).requireError(t, 400, "invalid")
	require.Contains(t, eb.Message, "unpacks to more than 67108864 bytes")
	require.Contains(t, eb.Message, "may unpack to 64 times its size, at least 67108864 bytes")
	require.Equal(t, 404, b.do(t, "HEAD", path, "", nil, producer).status, "nothing stored")

	// Under the floor any ratio is taken: 32 MiB of zeros compress a thousand times.
	digest, data = zerosArchive(t, 32<<20)
	r := b.do(t, "PUT", "/v1/namespaces/default/queues/jobs/code/"+digest, api.ContentTypeGzip, data, producer)
	require.Equal(t, 200, r.status, "%s", r.body)
}
