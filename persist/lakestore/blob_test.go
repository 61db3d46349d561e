package lakestore

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestBucketDriverNotBuilt: a bucket URL whose driver this build does not link (gs://
// without the tag lakeshore_gcs, azblob:// without lakeshore_azure) is refused by Open,
// NewStores and persist.Open before anything is opened, with a *persist.InvalidError
// that names the build tag and the command that links it — never a panic or the
// driver mux's untyped error. Built with the tag, the same URL passes the check. Every
// build opens file://, mem:// and s3://. CI runs this test with and without the tags.
func TestBucketDriverNotBuilt(t *testing.T) {
	ctx := context.Background()
	for _, s := range []string{"file", "mem", "s3"} {
		require.Contains(t, BucketSchemes(), s, "every build opens %s://", s)
		require.Empty(t, BucketDriverTag(s))
	}
	require.NoError(t, checkBucketURL("Config.Blob", "s3://bucket?region=us-east-1&endpoint=http%3A%2F%2F127.0.0.1%3A9000"))
	require.Equal(t, TagGCS, BucketDriverTag("gs"))
	require.Equal(t, TagAzure, BucketDriverTag("AZBLOB"))

	for _, tc := range []struct{ scheme, bucketURL, tag string }{
		{"gs", "gs://training-data?prefix=runs/", TagGCS},
		{"azblob", "azblob://container", TagAzure},
	} {
		if slices.Contains(BucketSchemes(), tc.scheme) {
			t.Logf("%s:// is built in (tag %s)", tc.scheme, tc.tag)
			require.NoError(t, checkBucketURL("Config.Blob", tc.bucketURL))
			continue
		}
		// Open: refused before the catalog is dialled (nothing listens on port 1).
		_, err := Open(ctx, "q", &Config{Catalog: "postgres://127.0.0.1:1/db", Blob: tc.bucketURL})
		requireTagError(t, err, tc.tag)
		// NewStores, as `lakeshore serve --data` calls it.
		target := "postgres://127.0.0.1:1/db?blob=" + url.QueryEscape(tc.bucketURL)
		_, err = NewStores(target, nil)
		requireTagError(t, err, tc.tag)
		// persist.Open with the driver, as `lakeshore data --target` does.
		_, err = persist.Open(ctx, "q", &persist.Config{Dir: target}, Driver())
		requireTagError(t, err, tc.tag)
	}

	// A scheme no build knows: the schemes this build opens, and the tags of the others.
	_, err := NewStores("postgres://127.0.0.1:1/db?blob=ftp%3A%2F%2Fhost%2Fdir", nil)
	require.ErrorIs(t, err, persist.ErrInvalid)
	require.Contains(t, err.Error(), "s3://bucket")
	require.Contains(t, err.Error(), "file:///dir")
	require.NotContains(t, err.Error(), "ftp://host/dir\" is not", "not the driver mux's message")
}

func requireTagError(t *testing.T, err error, tag string) {
	t.Helper()
	require.ErrorIs(t, err, persist.ErrInvalid)
	var ie *persist.InvalidError
	require.True(t, errors.As(err, &ie), "a *persist.InvalidError, got %T", err)
	require.Equal(t, "Config.Blob", ie.Field)
	require.Contains(t, err.Error(), "go build -tags "+tag+" ./cmd/lakeshore")
	require.Contains(t, err.Error(), "s3://bucket", "says what this build opens")
}
