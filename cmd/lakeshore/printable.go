package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// table writes the aligned columns of the human-readable (non --json) output. It is the one
// place such output meets the terminal: every cell passes through printable, because cells
// carry strings a submit-only client chose (keys, metadata, error messages, worker names), and
// raw they could recolour, move the cursor or forge lines on an operator's terminal.
type table struct{ tw *tabwriter.Writer }

// newTable returns a table writing to w; Flush writes the aligned rows.
func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

// row writes one line: each cell formatted as by fmt.Sprint, made printable, and the cells
// separated by tabs (so a cell cannot add a column or a line).
func (t *table) row(cells ...any) {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(printable(fmt.Sprint(c)))
	}
	b.WriteByte('\n')
	t.tw.Write([]byte(b.String())) //nolint:errcheck // the error comes back from Flush
}

// Flush writes the buffered rows aligned, returning the first write error.
func (t *table) Flush() error { return t.tw.Flush() }

// printable returns s with every rune that is not printable (control characters such as
// ESC, newline and tab, format characters such as bidirectional overrides, invalid UTF-8)
// replaced by its escape as Go's %q writes it inside the quotes: "\x1b", "\n", "\u202e",
// "\xff". Printable text, spaces, quotes and backslashes are left as they are, so ordinary
// values read unchanged.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}
