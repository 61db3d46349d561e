package main

import (
	"io"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/wire"
)

// TestDocsErrorFormat: the error lines and the --json failed-result object docs/cli.md
// shows are the ones the command prints (ids aside).
func TestDocsErrorFormat(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	text := string(doc)
	ids := regexp.MustCompile(`01[0-9A-Z]{24}|01JB…`)
	norm := func(s string) string { return ids.ReplaceAllString(strings.TrimSpace(s), "ID") }
	shows := func(line, why string) {
		t.Helper()
		if !strings.Contains(norm(text), line) {
			t.Errorf("docs/cli.md does not show %s: %s", why, line)
		}
	}

	c := newCLI(t)
	_, errs, code := c.run("", "cancel", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
	require.Equal(t, exitNotFound, code)
	shows(norm(errs), "the not-found line")

	_, errs, _ = c.run("", "submit", "bad/q", "1")
	shows(norm(errs), "the invalid-argument line")

	id := c.ok("submit", "q", "1", "--max-attempts", "1")
	c.ok("worker", "q", "--once", "--", "sh", "-c", "echo … >&2; exit 1")
	_, errs, _ = c.run("", "result", id)
	shows(norm(errs), "a failed job's line")
	out, _, _ := c.run("", "--json", "result", id)
	shows("`"+norm(out)+"`", "the --json object of a failed result")

	_, errs, _ = c.run("", "submit", "q", "not json")
	require.Contains(t, errs, "\nRun 'lakeshore submit --help' for usage.\n")
	shows("`Run 'lakeshore submit --help' for usage.`", "the usage hint")
}

// TestDocsEveryVerbAndFlag: docs/cli.md names every verb and every flag of the command.
func TestDocsEveryVerbAndFlag(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	text := string(doc)
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(c.CommandPath(), "lakeshore")
		path = strings.TrimSpace(path)
		if path != "" && !strings.Contains(text, "`"+path) {
			t.Errorf("docs/cli.md does not name the verb %q", path)
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !strings.Contains(text, "--"+f.Name) {
				t.Errorf("docs/cli.md does not name the flag --%s of %q", f.Name, c.CommandPath())
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(a.rootCmd())
}

// TestDocsWireJSON: the CLI prints bytes, ndarrays and NaN as docs/cli.md says.
func TestDocsWireJSON(t *testing.T) {
	t.Parallel()
	v := map[string]any{"b": []byte{1, 2}, "a": wire.NDArray{DType: "uint8", Shape: []int{2}, Data: []byte{1, 2}},
		"n": math.NaN(), "i": math.Inf(1)}
	require.JSONEq(t, `{"a":{"DType":"uint8","Shape":[2],"Data":"AQI="},"b":"AQI=","n":"NaN","i":"+Inf"}`, compactJSON(v))
}
