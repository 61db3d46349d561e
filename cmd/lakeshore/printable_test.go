package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrintableOutput: strings a submit-only client chose (the key, metadata such as
// lakeshore.git and lakeshore.code) reach an operator's terminal escaped, never as escape
// sequences or forged lines; --json keeps them exact.
func TestPrintableOutput(t *testing.T) {
	t.Parallel()
	c := newHTTPCLI(t)
	body := `{"payload": 1, "key": "k\u001b[1mBOLD",
		"metadata": {"lakeshore.git": "{\"commit\":\"\\u001b[31mEVIL\\u001b[0m\\nstate     succeeded\",\"branch\":\"b\"}",
		"lakeshore.code": "c\u001b[5m"}}`
	resp, err := http.Post(c.target+"/v1/namespaces/default/queues/q1/invocations", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Less(t, resp.StatusCode, 300)
	var sub struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&sub))
	require.NotEmpty(t, sub.ID)

	for _, args := range [][]string{{"get", sub.ID}, {"jobs", "q1"}} {
		out := c.ok(args...)
		require.NotContains(t, out, "\x1b", "%v prints an escape character", args)
		require.Contains(t, out, `k\x1b[1mBOLD`, "%v shows the key escaped", args)
		for _, line := range strings.Split(out, "\n") {
			require.False(t, strings.HasPrefix(line, "state") && strings.Contains(line, "succeeded"),
				"%v prints a forged line: %q", args, line)
		}
	}
	out := c.ok("get", sub.ID)
	require.Contains(t, out, `EVIL\x1b[0m\nstate     succeeded`)
	require.Contains(t, out, `c\x1b[5m`)

	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "get", sub.ID)), &got))
	require.Equal(t, "k\x1b[1mBOLD", got["key"], "--json stays exact")

	// The error line on stderr is escaped too (it may quote what a client or job chose).
	_, errs, code := c.run("", "get", "x\x1b[2Jy")
	require.NotZero(t, code)
	require.NotContains(t, errs, "\x1b")
	require.Contains(t, errs, `x\x1b[2Jy`)
}

func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, \"quoted\" \\ é 日本": "plain text, \"quoted\" \\ é 日本",
		"a\x1b[31mb":                     `a\x1b[31mb`,
		"line\nforged\tcell\r":           `line\nforged\tcell\r`,
		"bidi\u202eevil":                 `bidi\u202eevil`,
		"bad\xffutf8\x7f":                `bad\xffutf8\x7f`,
	} {
		require.Equal(t, want, printable(in), "%q", in)
	}
}
