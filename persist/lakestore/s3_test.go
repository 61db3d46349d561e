package lakestore

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// fakeS3 is an S3-compatible server in the test process (gofakes3, on loopback) that
// can be made unavailable: while down, it answers every request 503.
type fakeS3 struct {
	srv  *httptest.Server
	down atomic.Bool
}

// startS3 starts a fake S3 server with one bucket and sets the environment the real
// s3blob driver reads its credentials from.
func startS3(t testing.TB, bucket string) *fakeS3 {
	t.Helper()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket(bucket))
	h := gofakes3.New(backend).Server()
	f := &fakeS3{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.down.Load() {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	if s, ok := t.(interface{ Setenv(k, v string) }); ok {
		s.Setenv("AWS_ACCESS_KEY_ID", "lakeshore")
		s.Setenv("AWS_SECRET_ACCESS_KEY", "lakeshore-test")
		s.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	}
	return f
}

// url returns the s3:// URL of bucket on the fake server, for the real s3blob driver.
func (f *fakeS3) url(bucket string) string {
	q := url.Values{}
	q.Set("endpoint", f.srv.URL)
	q.Set("region", "us-east-1")
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	return "s3://" + bucket + "?" + q.Encode()
}

func TestConformanceS3(t *testing.T) {
	f := startS3(t, "lake")
	persisttest.Run(t, func(t *testing.T) persist.Store {
		return openTest(t, pgtest.Database(t), f.url("lake")+"&prefix="+url.QueryEscape(t.Name()+"/"), "q", &Config{FlushRows: 1})
	})
}
