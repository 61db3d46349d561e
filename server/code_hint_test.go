package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/fabric"
)

// TestCodeArchiveHintFollowsTheTypedError: the hint on how an upload's unpack bound
// follows its size is added when fabric's error says the archive is too large
// (CodeError.TooLarge), whatever its message's wording; another CodeError gets none.
// Before, the hint was added only when the message held "unpacks to more than", so a
// reworded fabric message lost it.
func TestCodeArchiveHintFollowsTheTypedError(t *testing.T) {
	const hint = "may unpack to 64 times its size"
	err := codeArchiveInvalid(&fabric.CodeError{Message: "the code archive is over its size bound", TooLarge: true}, 1000, 64<<20, 8<<20)
	require.Contains(t, err.Error(), hint)
	require.Contains(t, err.Error(), "over its size bound")
	err = codeArchiveInvalid(&fabric.CodeError{Message: "bad path \"../x\" in the code tree"}, 1000, 64<<20, 8<<20)
	require.NotContains(t, err.Error(), hint)
	err = codeArchiveInvalid(&fabric.CodeError{Message: "too large", TooLarge: true}, 1000, 128<<20, 8<<20)
	require.NotContains(t, err.Error(), hint, "the server's own bound (16 × MaxCodeBytes) needs no hint")
}
