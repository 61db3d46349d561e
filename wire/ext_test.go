package wire

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExtHeaderForms checks that each payload size gets the smallest extension header and
// that every form decodes (a thunk is ext 64, 0x40). A Thunk's payload is 2 + len(language) + bin header + data bytes.
func TestExtHeaderForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		payloadLen int
		header     string // hex of the header bytes: lead, [length], type
	}{
		{name: "Fixext16", payloadLen: 16, header: "d840"},
		{name: "Ext8", payloadLen: 17, header: "c71140"},
		{name: "Ext8Max", payloadLen: 255, header: "c7ff40"},
		{name: "Ext16", payloadLen: 256, header: "c8010040"},
		{name: "Ext16Max", payloadLen: 65535, header: "c8ffff40"},
		{name: "Ext32", payloadLen: 65536, header: "c90001000040"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			th := thunkWithPayload(t, tc.payloadLen)
			b := mustMarshal(t, th)
			h := len(tc.header) / 2
			require.Equal(t, tc.header, hex.EncodeToString(b[:h]))
			require.Len(t, b, h+tc.payloadLen)
			got, err := Decode(b)
			require.NoError(t, err)
			requireSameValue(t, th, got)
		})
	}
}

// thunkWithPayload returns a Thunk whose extension payload is exactly n bytes (n >= 16).
func thunkWithPayload(t *testing.T, n int) Thunk {
	t.Helper()
	for lang := 1; lang < 32; lang++ {
		for data := 0; data <= n; data++ {
			if 1+strSize(lang)+binSize(data) == n {
				return Thunk{Language: string(bytes.Repeat([]byte{'x'}, lang)), Data: make([]byte, data)}
			}
		}
	}
	require.FailNow(t, "no thunk of that payload size")
	return Thunk{}
}

// TestTupleHeaderForms checks the tuple encoder, which writes the payload before the
// header, at each header size.
func TestTupleHeaderForms(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 3, 15, 16, 200, 300, 70000} {
		tup := make(Tuple, n)
		for i := range tup {
			tup[i] = int64(i % 100)
		}
		b := mustMarshal(t, map[string]any{"t": tup, "after": true})
		got, err := Decode(b)
		require.NoError(t, err)
		requireSameValue(t, map[string]any{"t": tup, "after": true}, got)
	}
}
