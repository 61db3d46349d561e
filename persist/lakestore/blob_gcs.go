//go:build lakeshore_gcs

package lakestore

// gs:// buckets (Google Cloud Storage), in a build with the tag lakeshore_gcs (TagGCS):
// the driver links gRPC, OpenTelemetry and the Google Cloud SDK, so the default build
// leaves it out (blob.go). Credentials: Application Default Credentials.
import _ "gocloud.dev/blob/gcsblob"
