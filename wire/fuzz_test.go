package wire

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// addGoldenSeeds adds every golden vector, valid and invalid, to the fuzz corpus.
func addGoldenSeeds(f *testing.F) {
	f.Helper()
	for _, pattern := range []string{"*.msgpack", "invalid/*.msgpack"} {
		files, err := filepath.Glob(filepath.Join(goldenDir, pattern))
		require.NoError(f, err)
		for _, file := range files {
			data, err := os.ReadFile(file)
			require.NoError(f, err)
			f.Add(data)
		}
	}
}

// FuzzDecode checks that Decode never panics, fails only with ErrMalformed, and that what
// it accepts re-encodes to canonical bytes no longer than the input, which decode to the
// same value and re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		canonical, err := Marshal(v)
		require.NoError(t, err)
		require.LessOrEqual(t, len(canonical), len(data), "canonical form is never longer")
		again, err := Decode(canonical)
		require.NoError(t, err)
		requireSameValue(t, v, again)
		require.Equal(t, canonical, mustMarshal(t, again))

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
