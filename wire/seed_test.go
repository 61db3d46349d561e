package wire

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// seedDir holds the vectors written by the real dreamlake-lakeshore codec
// (scripts/seed_vectors.sh; docs/wire.md, "Seed vectors").
const seedDir = "testdata/seed"

// seedIndex is testdata/seed/index.json.
type seedIndex struct {
	Package string `json:"package"`
	Vectors []struct {
		File  string `json:"file"`
		About string `json:"about"`
		Hex   string `json:"hex"`
		Value any    `json:"value"`
	} `json:"vectors"`
}

// plainJSON turns a description into the form json.Unmarshal gives, and drops the
// "value" of floats, whose text differs between languages ("inf" / "+Inf"): their "bits"
// say the same exactly.
func plainJSON(t *testing.T, desc any) any {
	t.Helper()
	b, err := json.Marshal(desc)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["type"] == "float64" || x["type"] == "float32" {
				delete(x, "value")
			}
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(out)
	return out
}

// TestSeedVectors decodes every vector the real dreamlake-lakeshore codec wrote to the value
// its index describes (arrays normalised to plain dtype names and little-endian data), and
// checks that the Verbatim decoding re-encodes to exactly the file's bytes, and that the
// normalised value re-encodes to bytes that decode to it again.
func TestSeedVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(seedDir, "index.json"))
	require.NoError(t, err)
	var index seedIndex
	require.NoError(t, json.Unmarshal(raw, &index))
	require.Equal(t, "dreamlake-lakeshore 0.5.0", index.Package)
	require.GreaterOrEqual(t, len(index.Vectors), 90)

	var listed []string
	for _, v := range index.Vectors {
		listed = append(listed, v.File)
		t.Run(v.File, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join(seedDir, v.File))
			require.NoError(t, err)
			require.Equal(t, v.Hex, hex.EncodeToString(data))

			got, err := Decode(data)
			require.NoError(t, err, v.About)
			require.Equal(t, plainJSON(t, v.Value), plainJSON(t, describe(got)), v.About)

			verbatim, err := DecodeWith(data, DecodeOptions{Verbatim: true})
			require.NoError(t, err)
			require.Equal(t, v.Hex, hex.EncodeToString(mustMarshal(t, verbatim)), "verbatim re-encode is exact")

			again, err := Decode(mustMarshal(t, got))
			require.NoError(t, err)
			requireSameValue(t, got, again)
		})
	}
	files, err := filepath.Glob(filepath.Join(seedDir, "*.msgpack"))
	require.NoError(t, err)
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	slices.Sort(listed)
	require.Equal(t, listed, files, "every file is in the index")
}

// TestSeedEnvelopeAndFrames checks the layouts docs/wire.md gives for the Envelope and the
// Frame against the package's bytes: the Envelope's keys in the package's order, args and
// kwargs as bin holding a wire value each, and frames as [kind, seq, body, meta].
func TestSeedEnvelopeAndFrames(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(seedDir, name+".msgpack"))
		require.NoError(t, err)
		return data
	}
	env, err := DecodeWith(read("envelope"), DecodeOptions{Verbatim: true})
	require.NoError(t, err)
	var keys []string
	for _, e := range env.(Map) {
		keys = append(keys, e.Key)
	}
	require.Equal(t, []string{"v", "id", "fn", "args", "kwargs", "prefix", "key", "cfg", "parent"}, keys)
	version, _ := env.(Map).Get("v")
	require.Equal(t, int64(1), version)
	args, _ := env.(Map).Get("args")
	inner, err := Decode(args.([]byte))
	require.NoError(t, err)
	require.Equal(t, []any{int64(1), "two", Tuple{int64(3), 4.5}, mustArray(t, []int{3}, []int32{0, 1, 2})}, inner)
	require.Equal(t, read("envelope-args"), args.([]byte))

	for name, kind := range map[string]int64{"frame-value": 0, "frame-chunk": 1, "frame-begin": 2, "frame-end": 3, "frame-error": 4} {
		f, err := Decode(read(name))
		require.NoError(t, err)
		frame, ok := f.([]any)
		require.True(t, ok, name)
		require.Len(t, frame, 4, name)
		require.Equal(t, kind, frame[0], name)
	}
}
