package filestore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// TestFileStoreConformance runs the Store conformance suite on the file store.
func TestFileStoreConformance(t *testing.T) {
	t.Parallel()
	persisttest.Run(t, func(t *testing.T) persist.Store {
		s, err := filestore.Open(context.Background(), "q", &persist.Config{Dir: t.TempDir()})
		require.NoError(t, err)
		return s
	})
}
