package persist

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenRefusesUnknownTargets: a target URL whose scheme no linked store serves — a
// postgres:// target in a program without persist/lakestore, an s3:// or file:// URL —
// is refused with *InvalidError naming the fix, and never taken for a directory
// (nothing is created in the working directory).
func TestOpenRefusesUnknownTargets(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv(EnvURL, "")
	ctx := context.Background()
	for _, target := range []string{"postgres://lake:secret@db:5432/lake?blob=s3%3A%2F%2Fb", "postgresql://db/lake", "s3://bucket/q", "file:///tmp/q"} {
		_, err := Open(ctx, "q", &Config{Dir: target})
		require.ErrorIs(t, err, ErrInvalid, target)
		var ie *InvalidError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "queue option Dir", ie.Field)
		require.Contains(t, err.Error(), LakestorePackage, "the error names the package whose driver serves postgres:// targets")
		require.NotContains(t, err.Error(), "secret", "the password is redacted")
		_, err = OpenFileStore(ctx, "q", &Config{Dir: target})
		require.ErrorIs(t, err, ErrInvalid, "the file store refuses a URL too: %s", target)
		_, err = Open(ctx, "q", &Config{URL: target})
		require.ErrorIs(t, err, ErrInvalid, target)
	}
	_, err := Open(ctx, "q", &Config{Dir: "postgres://db/lake"})
	require.Contains(t, err.Error(), "pass lakestore.Driver() (package "+LakestorePackage+") to persist.Open")

	t.Setenv(EnvURL, "postgres://db/lake?blob=mem%3A%2F%2F")
	_, err = Open(ctx, "q", nil)
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "$"+EnvURL)
	t.Setenv(EnvURL, "not-a-url")
	_, err = Open(ctx, "q", &Config{})
	require.ErrorIs(t, err, ErrInvalid, "$LAKESHORE_URL names a server or a registered target, never a directory")

	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "no directory was created for a URL")

	// A path, even one holding "://" past its first segment, is still a directory.
	t.Setenv(EnvURL, "")
	q, err := Open(ctx, "q", &Config{Dir: "data/x://y"})
	require.NoError(t, err)
	require.NoError(t, q.Close(ctx))
}
