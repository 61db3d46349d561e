package httpplane_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

// TestAnswerNotLakeshore: a URL where another web service answers 200 with an HTML page (a
// captive portal, a proxy, a wrong port) is said as such, naming the content type and
// LAKESHORE_URL. Before: "decode answer: invalid request body: the answer is not a msgpack
// map of the route's fields" (found by pointing the CLI at another web server).
func TestAnswerNotLakeshore(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<html><body>Welcome</body></html>"))
	}))
	defer ts.Close()
	drv, err := httpplane.New(ts.URL, nil)
	require.NoError(t, err)
	defer drv.Close()
	_, err = drv.InvocationGet(t.Context(), "01M95BKZD9HKWFTH7HQ6JYJXC5")
	require.Error(t, err)
	require.Contains(t, err.Error(), "not a Lakeshore answer (Content-Type text/html")
	require.Contains(t, err.Error(), "LAKESHORE_URL")
	require.NotContains(t, err.Error(), "request body")
}
