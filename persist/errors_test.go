package persist

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestErrorCodesSurviveTheWire: every persist error has a stable code, and the error
// rebuilt from (code, message), as a client decodes it from HTTP, matches the same
// sentinel; invalid arguments are plane's *InvalidError.
func TestErrorCodesSurviveTheWire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	_, err := q.PutPartition(ctx, "-bad", []Record{{"x": 1}}, nil)
	var ie *plane.InvalidError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "partition", ie.Field)
	require.ErrorIs(t, err, plane.ErrInvalid)
	require.Equal(t, `invalid partition "-bad": 1–128 bytes of [A-Za-z0-9._-], not starting with . _ or -`, err.Error())
	_, err = New(q).Put(ctx, Record{"x": 1})
	require.NoError(t, err)
	_, err = New(q).Put(ctx, Record{"x": "s"})
	schemaErr := err
	errs := map[string]error{
		"invalid":           &InvalidError{Field: "f", Rule: "r"},
		"incompatible_type": schemaErr,
		"unsupported_value": &UnsupportedValueError{Field: "f", GoType: "chan int"},
		"not_found":         &NotFoundError{Indexes: []int64{1}},
		"timeout":           ErrTimeout,
		"closed":            ErrClosed,
		"corrupt":           ErrCorrupt,
	}
	sentinelOf := map[string]error{"invalid": ErrInvalid, "incompatible_type": ErrSchema, "unsupported_value": ErrUnsupportedValue,
		"not_found": ErrNotFound, "timeout": ErrTimeout, "closed": ErrClosed, "corrupt": ErrCorrupt}
	for code, e := range errs {
		require.Equal(t, code, Code(e))
		back := ErrorFromCode(Code(e), e.Error())
		require.ErrorIs(t, back, sentinelOf[code], code)
		require.Equal(t, e.Error(), back.Error())
	}
	require.ErrorIs(t, ErrClosed, plane.ErrClosed, "the same code as the plane's")
	require.ErrorIs(t, &NotFoundError{}, plane.ErrNotFound)
	require.Equal(t, "internal", Code(errors.New("x")))
}
