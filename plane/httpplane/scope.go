package httpplane

import (
	"context"
	"errors"
	"slices"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The HTTP API carries no plane.Scope: the server behind this plane applies the scope of
// this plane's own token. A caller's scope (a server in front of this plane, serving a
// namespace- or queue-scoped token) is therefore checked here, the one plane that cannot
// check it on the row it writes: each scoped invocation is read first, and one outside its
// scope (or unknown) answers plane.ErrNotFound, exactly like an unknown id, and is not sent.

// outOfScope returns, for n items whose id and scope item(i) gives, ErrNotFound for each
// outside its scope and nil for the rest.
func (d *Driver) outOfScope(ctx context.Context, n int, item func(int) (string, plane.Scope)) ([]error, error) {
	denied := make([]error, n)
	for i := range n {
		id, scope := item(i)
		if scope == (plane.Scope{}) {
			continue
		}
		inv, err := d.InvocationGet(ctx, id)
		switch {
		case errors.Is(err, plane.ErrNotFound):
			denied[i] = plane.ErrNotFound
		case err != nil:
			return nil, err
		case !scope.Covers(inv.Namespace, inv.Queue):
			denied[i] = plane.ErrNotFound
		}
	}
	return denied, nil
}

// inScope returns the items not denied (items itself when none is), and the index of each
// in items.
func inScope[P any](items []P, denied []error) (send []P, at []int) {
	if !slices.ContainsFunc(denied, func(e error) bool { return e != nil }) {
		return items, nil
	}
	send = []P{}
	for i := range items {
		if denied[i] == nil {
			send, at = append(send, items[i]), append(at, i)
		}
	}
	return send, at
}
