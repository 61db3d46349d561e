package httpplane_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

// TestUntrustedCertificateSaysHowToTrustIt: a server whose certificate this machine does
// not trust (self-signed, as an operator makes one with openssl) fails the call with
// ErrUnavailable naming the server and SSL_CERT_FILE, the way to trust it; before, the
// message was Go's alone ("tls: failed to verify certificate: x509: certificate signed by
// unknown authority"), which says what failed but not what to do, and a read was retried
// until its deadline (30 s here, a Result's whole timeout) though no retry can pass.
func TestUntrustedCertificateSaysHowToTrustIt(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	retries := 0
	d, err := httpplane.New(srv.URL, &httpplane.Config{OnRetry: func(int, time.Duration, error) { retries++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = d.QueueStatsList(ctx, "default")
	if !errors.Is(err, plane.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrUnavailable at once", err)
	}
	if retries != 0 {
		t.Fatalf("retried %d times: no retry makes the certificate trusted", retries)
	}
	for _, want := range []string{"SSL_CERT_FILE", "certificate", strings.TrimPrefix(srv.URL, "https://")} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error %q does not name %q", err, want)
		}
	}
}
