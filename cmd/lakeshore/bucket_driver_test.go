package main

import (
	"net/url"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist/lakestore"
)

// TestBucketDriverNotBuilt: `lakeshore serve --data` and `lakeshore data --target` with a
// bucket URL whose driver this build does not link (gs:// without the build tag
// lakeshore_gcs) exit non-zero with a message naming the tag and the build command —
// no panic. s3:// is in every build (persist/lakestore's TestConformanceS3 runs the
// distributed store on it).
func TestBucketDriverNotBuilt(t *testing.T) {
	t.Parallel()
	require.Contains(t, lakestore.BucketSchemes(), "s3")
	if slices.Contains(lakestore.BucketSchemes(), "gs") {
		t.Skip("built with the tag " + lakestore.TagGCS + ": gs:// is linked")
	}
	target := "postgres://127.0.0.1:1/db?blob=" + url.QueryEscape("gs://training-data")
	c := newCLI(t)
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--data", target},
		{"data", "--target", target, "stats", "q"},
	} {
		out, errs, code := c.run("", args...)
		require.NotZero(t, code, "%v: %s", args, out)
		require.Contains(t, errs, "go build -tags lakeshore_gcs ./cmd/lakeshore", args)
		require.NotContains(t, errs, "panic", args)
		require.NotContains(t, errs, "goroutine", args)
	}
}
