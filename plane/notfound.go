package plane

import (
	"errors"
	"fmt"
	"strings"
)

// InvocationNotFound returns err, when it is ErrNotFound about an invocation, as an error
// that names the likely causes and (when id is not "") the id; it still matches
// ErrNotFound (code not_found). Any other err is returned as it is. Every "not found" for
// result, cancel, stream, ack and get goes through it: the server adds the causes without
// the id (an answer about another tenant's id must be the same bytes as one about an
// unknown id: no existence oracle), and each client (the Go SDK, the Python client) names
// the id it asked about.
func InvocationNotFound(err error, id string) error {
	if err == nil || !errors.Is(err, ErrNotFound) {
		return err
	}
	msg := err.Error()
	if !strings.Contains(msg, NotFoundCauses) {
		err = fmt.Errorf("%w: %s", err, NotFoundCauses)
	}
	if id != "" && !strings.Contains(msg, id) {
		err = fmt.Errorf("invocation %s: %w", Truncate(id), err)
	}
	return err
}

// NotFoundCauses is what an unknown invocation id most likely means.
const NotFoundCauses = "no such id on this plane (was it submitted to another plane, or under another namespace's token? " +
	"or was it trimmed by retention after it finished?)"
