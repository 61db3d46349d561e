package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMalformedToken: a LAKESHORE_TOKEN no HTTP header can carry (a newline in it, as a
// pasted or `echo`ed token has) is refused as a malformed token, exit 2, saying what a token
// may hold and never echoing it: not "plane unavailable (… invalid header field value …)",
// exit 5. For the dispatch plane (httpplane) and the data queue (persist/httpstore).
// Not parallel: it sets the environment.
func TestMalformedToken(t *testing.T) {
	const secret = "s3cr3t-token-part"
	for _, token := range []string{secret + "\nmore", secret + "\r", secret + "\tx"} {
		t.Setenv("LAKESHORE_TOKEN", token)
		c := newHTTPCLI(t)
		for _, args := range [][]string{{"count", "q"}, {"data", "stats", "d"}} {
			_, errs, code := c.run("", args...)
			require.Equal(t, exitUsage, code, "%v %q: %s", args, token, errs)
			require.Contains(t, errs, "token", "%v: %s", args, errs)
			require.Contains(t, errs, "control character", "%v: says what is allowed: %s", args, errs)
			require.NotContains(t, errs, secret, "%v: the token is never echoed", args)
			require.NotContains(t, errs, "unavailable", "%v: %s", args, errs)
		}
	}
}
