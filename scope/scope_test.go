package scope_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/scope"
)

func TestScope(t *testing.T) {
	t.Run("Mem", func(t *testing.T) {
		t.Parallel()
		s, err := scope.Open(t.Context(), "mem://", "jobs/run-1")
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		exerciseScope(t, s)
	})

	t.Run("FileDefaultUnderHome", func(t *testing.T) {
		home := t.TempDir()
		t.Setenv(lakeshore.EnvHome, home)
		s, err := scope.Open(t.Context(), "", "runs")
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		exerciseScope(t, s)
		key, err := s.Write(t.Context(), "x/y.txt", []byte("on disk"))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(home, scope.BlobsDir, "runs", "x", "y.txt"))
		require.NoError(t, err)
		require.Equal(t, "on disk", string(b))

		// Another scope on the same prefix (another process, later) reads the key.
		s2, err := scope.Open(t.Context(), "", "runs/")
		require.NoError(t, err)
		defer s2.Close()
		b, err = s2.Read(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, "on disk", string(b))
	})

	t.Run("KeysCannotEscape", func(t *testing.T) {
		t.Parallel()
		s, err := scope.Open(t.Context(), "mem://", "inner")
		require.NoError(t, err)
		defer s.Close()
		_, err = s.Write(t.Context(), "ok", []byte("secret of inner"))
		require.NoError(t, err)
		for _, key := range []string{
			"", "../x", "a/../../x", "..", "/etc/passwd", "a//b", "a/./b", "a/", `a\..\b`, "a\x00b", "\xff",
		} {
			_, err := s.Write(t.Context(), key, []byte("x"))
			var kerr *scope.KeyError
			require.ErrorAs(t, err, &kerr, "write %q", key)
			require.ErrorIs(t, err, lakeshore.ErrInvalid)
			_, err = s.Read(t.Context(), key)
			require.ErrorIs(t, err, lakeshore.ErrInvalid, "read %q", key)
			require.ErrorIs(t, s.Delete(t.Context(), key), lakeshore.ErrInvalid, "delete %q", key)
		}
		_, err = scope.Open(t.Context(), "mem://", "../up")
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		_, err = s.Sub("../inner2")
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		keys, err := s.List(t.Context())
		require.NoError(t, err)
		require.Equal(t, []string{"ok"}, keys, "nothing was written by a bad key")
	})
}

func exerciseScope(t *testing.T, s *scope.Scope) {
	t.Helper()
	ctx := t.Context()
	k1, err := s.Write(ctx, "out/part-0.bin", []byte{0, 1, 2})
	require.NoError(t, err)
	require.Equal(t, "out/part-0.bin", k1)
	_, err = s.Write(ctx, "out/part-1.bin", []byte("b"))
	require.NoError(t, err)
	_, err = s.Write(ctx, "meta.json", []byte("{}"))
	require.NoError(t, err)

	b, err := s.Read(ctx, k1)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 1, 2}, b)

	keys, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"meta.json", "out/part-0.bin", "out/part-1.bin"}, keys)

	sub, err := s.Sub("out")
	require.NoError(t, err)
	keys, err = sub.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"part-0.bin", "part-1.bin"}, keys)

	require.NoError(t, s.Delete(ctx, k1))
	_, err = s.Read(ctx, k1)
	require.ErrorIs(t, err, lakeshore.ErrNotFound)
	require.ErrorIs(t, s.Delete(ctx, k1), lakeshore.ErrNotFound)
}

// TestOpenErrorNamesNoSecret: a bucket URL the driver refuses is named in the error with
// its secrets redacted, though the driver's own message repeats the URL.
func TestOpenErrorNamesNoSecret(t *testing.T) {
	_, err := scope.Open(t.Context(), "s3://bucket?region=x&token=SECRET-123&nonsense=1", "p")
	if err == nil {
		t.Fatal("an unknown parameter was accepted")
	}
	if strings.Contains(err.Error(), "SECRET-123") {
		t.Fatalf("the error shows the secret: %v", err)
	}
}
