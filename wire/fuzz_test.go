package wire

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// addGoldenSeeds adds every golden vector, valid and invalid, and every vector written by
// dreamlake-lakeshore (testdata/seed) to the fuzz corpus.
func addGoldenSeeds(f *testing.F) {
	f.Helper()
	for _, pattern := range []string{goldenDir + "/*.msgpack", goldenDir + "/invalid/*.msgpack", seedDir + "/*.msgpack"} {
		files, err := filepath.Glob(pattern)
		require.NoError(f, err)
		for _, file := range files {
			data, err := os.ReadFile(file)
			require.NoError(f, err)
			f.Add(data)
		}
	}
}

// FuzzDecode checks that Decode never panics, fails only with ErrMalformed, and that what
// it accepts re-encodes to canonical bytes, which decode to the same value and re-encode to
// the same bytes. The Verbatim form (wire order, byte-order names kept) is never longer
// than the input and round-trips the same way; the normalised form may be longer, as
// ">i4" becomes "int32". Decoding as version 1 never panics either.
func FuzzDecode(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, v1err := DecodeWith(data, DecodeOptions{Version: 1}); v1err != nil {
			require.ErrorIs(t, v1err, ErrMalformed)
		}
		v, err := Decode(data)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		canonical, err := Marshal(v)
		require.NoError(t, err)
		again, err := Decode(canonical)
		require.NoError(t, err)
		requireSameValue(t, v, again)
		require.Equal(t, canonical, mustMarshal(t, again))

		verbatim, err := DecodeWith(data, DecodeOptions{Verbatim: true})
		require.NoError(t, err)
		exact, err := Marshal(verbatim)
		require.NoError(t, err)
		require.LessOrEqual(t, len(exact), len(data), "the verbatim form is never longer")
		verbatimAgain, err := DecodeWith(exact, DecodeOptions{Verbatim: true})
		require.NoError(t, err)
		requireSameValue(t, verbatim, verbatimAgain)
		require.Equal(t, exact, mustMarshal(t, verbatimAgain))
		normalised, err := Decode(exact)
		require.NoError(t, err)
		requireSameValue(t, v, normalised)

		var viaUnmarshal any
		require.NoError(t, Unmarshal(data, &viaUnmarshal))
		requireSameValue(t, v, viaUnmarshal)
	})
}

// fuzzTarget has a field of every kind Unmarshal fills.
type fuzzTarget struct {
	B   bool              `msgpack:"b"`
	I8  int8              `msgpack:"i8"`
	U16 uint16            `msgpack:"u16"`
	I   int               `msgpack:"i"`
	F32 float32           `msgpack:"f32"`
	S   string            `msgpack:"s"`
	Bin []byte            `msgpack:"bin"`
	Arr [2]int            `msgpack:"arr"`
	L   []fuzzTarget      `msgpack:"l"`
	M   map[string]*int   `msgpack:"m"`
	P   *fuzzTarget       `msgpack:"p"`
	Any any               `msgpack:"any"`
	T   time.Time         `msgpack:"t"`
	N   *NDArray          `msgpack:"n"` // a pointer: the zero NDArray does not encode
	Tup Tuple             `msgpack:"tup"`
	Str map[string]string `msgpack:"str"`
}

// FuzzUnmarshal checks that Unmarshal into a struct never panics, fails only with
// ErrMalformed or ErrMismatch, and that a filled struct encodes again.
func FuzzUnmarshal(f *testing.F) {
	addGoldenSeeds(f)
	seven := 7
	f.Add(mustMarshal(f, fuzzTarget{B: true, I8: -3, S: "s", L: []fuzzTarget{{I: 1}}, M: map[string]*int{"a": &seven},
		P: &fuzzTarget{F32: 1.5}, Any: Tuple{1, "x"}, Tup: Tuple{}, Str: map[string]string{"k": "v"}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got fuzzTarget
		err := Unmarshal(data, &got)
		if err != nil {
			if !errorIsAny(err, ErrMalformed, ErrMismatch) {
				require.Failf(t, "unexpected error", "%v", err)
			}
			return
		}
		_, err = Marshal(got)
		require.NoError(t, err)
	})
}

func errorIsAny(err error, targets ...error) bool {
	for _, target := range targets {
		if errorIs(err, target) {
			return true
		}
	}
	return false
}
