package wire

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestErrorIdentity(t *testing.T) {
	t.Parallel()
	sentinels := []error{ErrMalformed, ErrUnsupported, ErrMismatch}
	for i, err := range []error{&DecodeError{}, &EncodeError{}, &MismatchError{}} {
		for j, s := range sentinels {
			require.Equal(t, i == j, errors.Is(err, s), "%T vs %v", err, s)
		}
	}
}

func TestDecodeErrorUnwrapsRuntimeError(t *testing.T) {
	t.Parallel()
	_, err := Decode([]byte{0xcd, 0x01}) // uint 16 with one byte
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	require.Error(t, de.Err, "the msgp runtime error is kept")
	require.Equal(t, "int is truncated", de.Reason)
}

func TestKeySeg(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"seed": ".seed", "_a1": "._a1", "a b": `["a b"]`, "1a": `["1a"]`, "": `[""]`, "é": `["é"]`,
	} {
		require.Equal(t, want, keySeg(key), key)
	}
}

func TestLongPathIsShortened(t *testing.T) {
	t.Parallel()
	err := &DecodeError{Path: strings.Repeat("[0]", 100), Reason: "r"}
	require.Less(t, len(err.Error()), 200)
	require.Contains(t, err.Error(), "…")
}
