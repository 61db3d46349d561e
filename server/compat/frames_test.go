package compat

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestFramesBothWays: our frames re-framed as the real package's and parsed back keep their
// kind, seq and value bytes; an ERROR frame carries its type and message in meta.
func TestFramesBothWays(t *testing.T) {
	value := []byte{0x92, 0x01, 0xc7, 0x02, 0x05, 0x01, 0x02} // [1, ext 5 (a tuple's bytes)]
	b := appendFrame(nil, &plane.Frame{Seq: 7, Kind: plane.FrameValue, Value: value})
	f, err := parseFrame(b)
	require.NoError(t, err)
	require.Equal(t, frame{kind: kindValue, seq: 7, body: value}, f)

	b = appendFrame(nil, &plane.Frame{Seq: 8, Kind: plane.FrameEnd, Value: []byte{0x01}})
	f, err = parseFrame(b)
	require.NoError(t, err)
	require.Equal(t, frame{kind: kindEnd, seq: 8, body: []byte{0xc0}}, f)

	info := plane.ErrorInfo{Type: "ValueError", Message: "nope", Attempt: 2}
	b = appendFrame(nil, &plane.Frame{Seq: 9, Kind: plane.FrameError, Value: info.Encode()})
	require.Equal(t, "\x94\x04\x09\xc0\x82\xa4type\xaaValueError\xa7message\xa4nope", string(b))

	// The real package's own bytes: Frame(VALUE, seq=None … ) and a negative seq.
	f, err = parseFrame([]byte{0x94, 0x00, 0xc0, 0xa1, 'x', 0xc0})
	require.NoError(t, err)
	require.Equal(t, frame{kind: kindValue, seq: -1, body: []byte{0xa1, 'x'}}, f)
}

// TestParseFrameRefusesWhatIsNotOneFrame: anything but one 4-element Frame with a known kind
// is an *InvalidError, never a panic, whatever the bytes.
func TestParseFrameRefusesWhatIsNotOneFrame(t *testing.T) {
	for _, b := range [][]byte{
		nil, {0xc0}, {0x93, 0x00, 0x00, 0x00}, {0x94, 0x05, 0x00, 0xc0, 0xc0},
		{0x94, 0x00, 0xa1, 'x', 0xc0, 0xc0}, {0x94, 0x00, 0x00, 0xc0}, {0x94, 0x00, 0x00, 0xc0, 0xc0, 0xc0},
	} {
		_, err := parseFrame(b)
		require.ErrorIs(t, err, plane.ErrInvalid, "%x", b)
	}
	r := rand.New(rand.NewPCG(1, 2))
	good := appendFrame(nil, &plane.Frame{Seq: 3, Kind: plane.FrameValue, Value: []byte{0x93, 0x01, 0xa1, 'a', 0xcb, 0, 0, 0, 0, 0, 0, 0, 0}})
	for range 20000 {
		b := append([]byte(nil), good...)
		for range 1 + r.IntN(3) {
			b[r.IntN(len(b))] = byte(r.IntN(256))
		}
		b = b[:r.IntN(len(b)+1)]
		_, _ = parseFrame(b) // must not panic
	}
}
