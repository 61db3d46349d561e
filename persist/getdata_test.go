package persist

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGetDataNilMeta: a nil BatchMeta is an *InvalidError, not a panic.
func TestGetDataNilMeta(t *testing.T) {
	t.Parallel()
	q := openTemp(t, nil)
	_, err := q.Reader().GetData(context.Background(), nil)
	require.ErrorIs(t, err, ErrInvalid)
}
