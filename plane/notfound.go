package plane

import (
	"errors"
	"fmt"
	"strings"
)

// InvocationNotFound returns err, when it is ErrNotFound about invocation id, as an error
// that names the id and the likely causes (it still matches ErrNotFound, code not_found);
// any other err is returned as it is. Every client's "not found" for result, cancel,
// stream, ack and get goes through it: the server for HTTP callers, the Go SDK for its
// own.
func InvocationNotFound(err error, id string) error {
	if err == nil || !errors.Is(err, ErrNotFound) || id == "" || strings.Contains(err.Error(), id) {
		return err
	}
	return fmt.Errorf("%w: invocation %s: %s", ErrNotFound, Truncate(id), NotFoundCauses)
}

// NotFoundCauses is what an unknown invocation id most likely means.
const NotFoundCauses = "no such id on this plane (was it submitted to another plane, or under another namespace's token? " +
	"or was it trimmed by retention after it finished?)"
