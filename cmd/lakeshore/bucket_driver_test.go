package main

import (
	"context"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
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

// TestDefaultBuildDependencies keeps the default build's import graph free of the optional
// bucket drivers and the SDKs they link (Google Cloud, Azure): they are most of a cold
// build's time (docs/benchmarks-cli.md, "Cold start"), and a build gets them with the tags
// lakeshore_gcs / lakeshore_azure (persist/lakestore/blob.go).
func TestDefaultBuildDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output() // no -tags: the default build
	require.NoError(t, err, "go list -deps")
	for dep := range strings.SplitSeq(string(out), "\n") {
		for _, banned := range []string{"gocloud.dev/blob/gcsblob", "gocloud.dev/blob/azureblob", "cloud.google.com/", "google.golang.org/api/storage/", "github.com/Azure/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the default build of lakeshore depends on %s; keep it behind its build tag", dep)
			}
		}
	}
}

// TestServeDataCatalogRefused: `lakeshore serve --data` whose catalog refuses the URL's
// password, or lacks its database, exits non-zero at start with a message naming the
// catalog's fault and not the password, as a bad plane target or bucket does. Before, it
// logged "serving" and answered every data request 401 (then 502) until stopped; this
// test fails on that code (it ran until the test's deadline, exit 0).
func TestServeDataCatalogRefused(t *testing.T) {
	t.Parallel()
	const secret = "wrong-password-s3cr3t"
	refused, missing := pgtest.Refused(t, secret)
	for _, c := range []struct{ catalog, says string }{
		{refused, "refused user"},
		{missing, "no_such_catalog"},
	} {
		target, err := url.Parse(c.catalog)
		require.NoError(t, err)
		target.RawQuery = url.Values{"blob": {"file://" + t.TempDir()}}.Encode()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		_, errs, code := newCLI(t).runCtx(ctx, "", "serve", "--addr", "127.0.0.1:0", "--data", target.String())
		cancel()
		require.NotZero(t, code, errs)
		require.NotContains(t, errs, "msg=serving")
		require.Contains(t, errs, "--data's catalog")
		require.Contains(t, errs, c.says)
		require.NotContains(t, errs, secret)
	}
}
