package lakestore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// buckets
	_ "gocloud.dev/blob/memblob"  // mem:// buckets
	_ "gocloud.dev/blob/s3blob"   // s3:// buckets: AWS S3 and every store speaking its API

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// The bucket drivers. Every build links file://, mem:// and s3:// (AWS S3, and MinIO,
// Cloudflare R2, Ceph, Google Cloud Storage's interoperability endpoint and the other
// stores that speak its API). The Google Cloud Storage and Azure Blob Storage drivers
// link gRPC, OpenTelemetry and each cloud's SDK — several hundred packages, most of a
// cold build's time — so each is in a build only with its tag (blob_gcs.go,
// blob_azure.go):
//
//	go build -tags lakeshore_gcs ./cmd/lakeshore                  # gs://
//	go build -tags lakeshore_azure ./cmd/lakeshore                # azblob://
//	go build -tags lakeshore_gcs,lakeshore_azure ./cmd/lakeshore  # both
//
// A bucket URL whose driver this build does not link is refused by Open and NewStores
// with a *persist.InvalidError naming the tag (BucketDriverTag).

// Build tags of the optional bucket drivers.
const (
	// TagGCS links the gs:// driver (gocloud.dev/blob/gcsblob, Google Cloud Storage).
	TagGCS = "lakeshore_gcs"
	// TagAzure links the azblob:// driver (gocloud.dev/blob/azureblob, Azure Blob
	// Storage).
	TagAzure = "lakeshore_azure"
)

// optionalDrivers maps the scheme of each optional bucket driver to its build tag.
var optionalDrivers = map[string]string{"gs": TagGCS, "azblob": TagAzure}

// BucketDriverTag returns the build tag that links the bucket driver of scheme (as in
// "gs" for gs://bucket), or "" when no tag does: every build links file, mem and s3, and
// no build links a scheme this package does not know.
func BucketDriverTag(scheme string) string { return optionalDrivers[strings.ToLower(scheme)] }

// BucketSchemes returns the bucket URL schemes this build opens, sorted: file, mem and
// s3, and gs and azblob when built with their tags.
func BucketSchemes() []string {
	var out []string
	for _, s := range []string{"azblob", "file", "gs", "mem", "s3"} {
		if blob.DefaultURLMux().ValidBucketScheme(s) {
			out = append(out, s)
		}
	}
	return out
}

// OpenBucket opens the bucket at bucketURL with the drivers this build links (the
// server's code store uses it: `lakeshore serve --code-store`), refusing first a scheme
// this build does not link, with the build tag that links it. field names the setting the
// URL came from in errors. The caller closes the bucket. Errors: *persist.InvalidError;
// the driver's, after the URL (passwords redacted).
func OpenBucket(ctx context.Context, field, bucketURL string) (*blob.Bucket, error) {
	if err := checkBucketURL(field, bucketURL); err != nil {
		return nil, err
	}
	b, err := blob.OpenBucket(ctx, bucketURL)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", plane.RedactURL(bucketURL), err)
	}
	return b, nil
}

// checkBucketURL refuses a bucket URL whose scheme this build has no driver for, before
// anything is opened: the error names the build tag that links it, or the schemes this
// build opens. field names the setting the URL came from.
func checkBucketURL(field, bucketURL string) error {
	scheme, _, _ := strings.Cut(bucketURL, "://")
	scheme = strings.ToLower(scheme)
	if blob.DefaultURLMux().ValidBucketScheme(scheme) {
		return nil
	}
	if tag := BucketDriverTag(scheme); tag != "" {
		return &persist.InvalidError{Field: field, Value: plane.RedactURL(bucketURL),
			Rule: "a bucket URL whose driver this lakeshore build links; " + scheme + ":// buckets need the build tag " + tag +
				" (go build -tags " + tag + " ./cmd/lakeshore); this build opens " + strings.Join(schemeExamples(), ", ")}
	}
	rule := "a bucket URL of a scheme this build opens: " + strings.Join(schemeExamples(), ", ")
	for _, s := range []string{"gs", "azblob"} {
		if !slices.Contains(BucketSchemes(), s) {
			rule += "; " + s + ":// with the build tag " + optionalDrivers[s]
		}
	}
	return &persist.InvalidError{Field: field, Value: plane.RedactURL(bucketURL), Rule: rule}
}

// schemeExamples are the bucket URLs this build opens, one example each.
func schemeExamples() []string {
	examples := map[string]string{"file": "file:///dir", "mem": "mem://", "s3": "s3://bucket", "gs": "gs://bucket", "azblob": "azblob://container"}
	var out []string
	for _, s := range BucketSchemes() {
		out = append(out, examples[s])
	}
	return out
}
