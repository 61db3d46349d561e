package main

import (
	"strings"
	"testing"
)

// TestPasswordInArgumentsIsWarnedOf: an argument of a long-running command (serve, worker,
// provider run, daemon) holding a URL's password (--target postgres://u:pw@…, --target=…,
// a handler's NAME=URL argument, a secret query parameter) gets a warning on stderr, the URL
// shown redacted, naming PGPASSWORD: a command line is read by every user of the machine
// (ps), and `lakeshore serve` (which never reads $LAKESHORE_URL) was documented with its
// password on the command line. Before, nothing was said. A URL without a password, other
// arguments and one-shot verbs (their command line lasts milliseconds) get nothing.
func TestPasswordInArgumentsIsWarnedOf(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--target", "postgres://u:pw-secret-1@127.0.0.1:1/db", "--help"},
		{"provider", "run", "--target=postgres://u:pw-secret-1@127.0.0.1:1/db", "--help"},
		{"worker", "q", "--help", "--", "./handle", "DB=postgres://u:pw-secret-1@db/x"},
		{"daemon", "--target", "postgres://u@127.0.0.1:1/db?password=pw-secret-1", "--help"},
	} {
		var out, errb strings.Builder
		run(t.Context(), args, strings.NewReader(""), &out, &errb)
		e := errb.String()
		if !strings.Contains(e, "lakeshore: warning: the argument") || !strings.Contains(e, "PGPASSWORD") {
			t.Errorf("lakeshore %q: no warning of the password on the command line; stderr:\n%s", args, e)
		}
		if strings.Contains(e+out.String(), "pw-secret-1") {
			t.Errorf("lakeshore %q: the output quotes the password:\n%s", args, e)
		}
	}
	for _, args := range [][]string{
		{"serve", "--target", "postgres://u@127.0.0.1:1/db?sslmode=disable", "--help"},
		{"worker", "q", "--help", "--", "./handle", "x=y"},
		{"queues", "--target", "postgres://u:pw-secret-1@127.0.0.1:1/db", "--help"},
	} {
		var out, errb strings.Builder
		run(t.Context(), args, strings.NewReader(""), &out, &errb)
		if strings.Contains(errb.String(), "warning") {
			t.Errorf("lakeshore %q warns without a password:\n%s", args, errb.String())
		}
	}
}
