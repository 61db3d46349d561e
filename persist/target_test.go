package persist

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenNamesTheDriverToPass: persist links no store, so a target whose store the
// call was not given — a directory without filestore.Driver(), an http:// URL without
// httpstore.Driver() — is *InvalidError naming the driver to pass, and nothing opens.
func TestOpenNamesTheDriverToPass(t *testing.T) {
	t.Setenv(EnvURL, "")
	ctx := context.Background()
	dir := t.TempDir()
	_, err := Open(ctx, "q", &Config{Dir: dir})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "filestore.Driver() (package "+FileStorePackage+")")

	_, err = Open(ctx, "q", &Config{URL: "http://127.0.0.1:1"})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "httpstore.Driver() (package "+HTTPStorePackage+")")

	opened := ""
	paths := StoreDriver{Paths: true, Open: func(_ context.Context, name, target string, _ *Config) (Store, error) {
		opened = target
		return nil, ErrClosed
	}}
	_, err = Open(ctx, "q", &Config{Dir: dir}, paths)
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, dir, opened, "a path goes to the driver that serves paths")
}
