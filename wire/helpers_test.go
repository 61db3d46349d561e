package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireSameValue fails unless want and got are the same generic value: same dynamic types
// all the way down, NaN equal to NaN (same bits), times equal as instants.
func requireSameValue(t *testing.T, want, got any) {
	t.Helper()
	if why := sameValue(want, got); why != "" {
		require.Failf(t, "values differ", "%s\nwant: %#v\ngot:  %#v", why, want, got)
	}
}

// sameValue returns "" if a and b are the same generic value, else where they differ.
func sameValue(a, b any) string {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return fmt.Sprintf("type %T vs %T", a, b)
	}
	switch x := a.(type) {
	case float64:
		if math.Float64bits(x) != math.Float64bits(b.(float64)) {
			return fmt.Sprintf("%v vs %v", x, b)
		}
		return ""
	case float32:
		if math.Float32bits(x) != math.Float32bits(b.(float32)) {
			return fmt.Sprintf("%v vs %v", x, b)
		}
		return ""
	case time.Time:
		if !x.Equal(b.(time.Time)) {
			return fmt.Sprintf("%v vs %v", x, b)
		}
		return ""
	case []byte:
		if !bytes.Equal(x, b.([]byte)) {
			return "bytes differ"
		}
		return ""
	case []any:
		return sameList(x, b.([]any))
	case Tuple:
		return sameList(x, b.(Tuple))
	case map[string]any:
		y := b.(map[string]any)
		if len(x) != len(y) {
			return fmt.Sprintf("map sizes %d vs %d", len(x), len(y))
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok {
				return fmt.Sprintf("key %q missing", k)
			}
			if why := sameValue(v, w); why != "" {
				return fmt.Sprintf("[%q]: %s", k, why)
			}
		}
		return ""
	case Map:
		y := b.(Map)
		if len(x) != len(y) {
			return fmt.Sprintf("map sizes %d vs %d", len(x), len(y))
		}
		for i := range x {
			if x[i].Key != y[i].Key {
				return fmt.Sprintf("entry %d: key %q vs %q", i, x[i].Key, y[i].Key)
			}
			if why := sameValue(x[i].Value, y[i].Value); why != "" {
				return fmt.Sprintf("[%q]: %s", x[i].Key, why)
			}
		}
		return ""
	case NDArray:
		return sameArray(x.DType, x.Shape, x.Data, b.(NDArray).DType, b.(NDArray).Shape, b.(NDArray).Data)
	case Tensor:
		return sameArray(x.DType, x.Shape, x.Data, b.(Tensor).DType, b.(Tensor).Shape, b.(Tensor).Data)
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("%#v vs %#v", a, b)
	}
	return ""
}

func sameList(x, y []any) string {
	if len(x) != len(y) {
		return fmt.Sprintf("lengths %d vs %d", len(x), len(y))
	}
	for i := range x {
		if why := sameValue(x[i], y[i]); why != "" {
			return fmt.Sprintf("[%d]: %s", i, why)
		}
	}
	return ""
}

// sameArray compares arrays treating a nil and an empty shape (0-d) as equal.
func sameArray(dt1 string, s1 []int, d1 []byte, dt2 string, s2 []int, d2 []byte) string {
	if dt1 != dt2 || len(s1) != len(s2) || !bytes.Equal(d1, d2) {
		return fmt.Sprintf("array %s%v vs %s%v", dt1, s1, dt2, s2)
	}
	for i := range s1 {
		if s1[i] != s2[i] {
			return fmt.Sprintf("shape %v vs %v", s1, s2)
		}
	}
	return ""
}

// mustMarshal is Marshal failing the test on error.
func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := Marshal(v)
	require.NoError(t, err)
	return b
}

// mustArray is NewNDArray failing the test on error.
func mustArray[T Element](t testing.TB, shape []int, values []T) NDArray {
	t.Helper()
	a, err := NewNDArray(shape, values)
	require.NoError(t, err)
	return a
}

// mustTime parses an RFC 3339 time as UTC, failing the test on error.
func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return tm.UTC()
}

func errorIs(err, target error) bool { return errors.Is(err, target) }
