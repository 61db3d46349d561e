package filestore

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestErrorCodesSurviveTheWire: every persist error has a stable code, and the error
// rebuilt from (code, message), as a client decodes it from HTTP, matches the same
// sentinel; invalid arguments are plane's *InvalidError.
func TestErrorCodesSurviveTheWire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	_, err := q.PutPartition(ctx, "-bad", []persist.Record{{"x": 1}}, nil)
	var ie *plane.InvalidError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "partition", ie.Field)
	require.ErrorIs(t, err, plane.ErrInvalid)
	require.Equal(t, `invalid partition "-bad": 1–128 bytes of [A-Za-z0-9._-], not starting with . _ or -`, err.Error())
	_, err = persist.New(q).Put(ctx, persist.Record{"x": 1})
	require.NoError(t, err)
	_, err = persist.New(q).Put(ctx, persist.Record{"x": "s"})
	schemaErr := err
	errs := map[string]error{
		"invalid":           &persist.InvalidError{Field: "f", Rule: "r"},
		"incompatible_type": schemaErr,
		"unsupported_value": &persist.UnsupportedValueError{Field: "f", GoType: "chan int"},
		"not_found":         &persist.NotFoundError{Indexes: []int64{1}},
		"timeout":           persist.ErrTimeout,
		"closed":            persist.ErrClosed,
		"corrupt":           persist.ErrCorrupt,
	}
	sentinelOf := map[string]error{"invalid": persist.ErrInvalid, "incompatible_type": persist.ErrSchema, "unsupported_value": persist.ErrUnsupportedValue,
		"not_found": persist.ErrNotFound, "timeout": persist.ErrTimeout, "closed": persist.ErrClosed, "corrupt": persist.ErrCorrupt}
	for code, e := range errs {
		require.Equal(t, code, persist.Code(e))
		back := persist.ErrorFromCode(persist.Code(e), e.Error())
		require.ErrorIs(t, back, sentinelOf[code], code)
		require.Equal(t, e.Error(), back.Error())
	}
	require.ErrorIs(t, persist.ErrClosed, plane.ErrClosed, "the same code as the plane's")
	require.ErrorIs(t, &persist.NotFoundError{}, plane.ErrNotFound)
	require.Equal(t, "internal", persist.Code(errors.New("x")))
}
