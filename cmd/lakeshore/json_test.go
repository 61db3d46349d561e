package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseJSON: numbers keep their exact value or are refused; none silently becomes a
// float or an infinity.
func TestParseJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want any
		err  string
	}{
		{`1`, int64(1), ""},
		{`-9223372036854775808`, int64(math.MinInt64), ""},
		{`18446744073709551615`, uint64(math.MaxUint64), ""},
		{`1.5`, 1.5, ""},
		{`1e3`, 1e3, ""},
		{`1e-400`, 0.0, ""},
		{`{"a": [1, 2.5]}`, map[string]any{"a": []any{int64(1), 2.5}}, ""},
		{`123456789012345678901234567890`, nil, "does not fit in 64 bits"},
		{`-9223372036854775809`, nil, "does not fit in 64 bits"},
		{`18446744073709551616`, nil, "does not fit in 64 bits"},
		{`1e400`, nil, "beyond the range of a float64"},
		{`-1e400`, nil, "beyond the range of a float64"},
		{`{"deep": [1, 1e999]}`, nil, "1e999"},
		{`1 2`, nil, "more than one"},
	}
	for _, tc := range cases {
		got, err := parseJSON([]byte(tc.in))
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestSubmitNumbers(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, payload := range []string{"1e400", "123456789012345678901234567890", `{"x": -1e400}`} {
		_, errs, code := c.run("", "submit", "q", payload)
		require.Equal(t, exitUsage, code, payload)
		require.Contains(t, errs, "lakeshore: payload: the ", payload)
		require.Contains(t, errs, "pass it as a string")
		_, errs, code = c.run("", "topic", "post", "q", "t", payload)
		require.Equal(t, exitUsage, code, payload)
		require.Contains(t, errs, "lakeshore: value: the ", payload)
	}
	n, _, _ := c.run("", "count", "q", "queued")
	require.Equal(t, "0\n", n, "nothing submitted")
	id := c.ok("submit", "q", "9007199254740993")
	require.Contains(t, c.ok("get", id), "9007199254740993", "an int64 stays exact")
}
