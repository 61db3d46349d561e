package server

import (
	"context"
	"net/http"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server/compat"
)

// mountCompat serves the routes of the dreamlake-lakeshore package's HttpDispatch
// (server/compat) with the same bearer tokens as ours. They are not in api.Routes: they are
// that package's contract, not ours (docs/http-api.md, "Compatibility routes").
func (s *Server) mountCompat() {
	routes := compat.Routes(&compat.Config{
		Driver: s.drv,
		Authenticate: func(r *http.Request) (compat.Principal, error) {
			p, err := s.authenticate(r)
			if err != nil {
				return nil, err
			}
			return compatPrincipal{p}, nil
		},
		WriteError: s.writeError,
		ReadBody:   s.readRaw,
		Done:       s.stopCtx.Done(),
		Now:        s.cfg.Now, // the plane's clock: remembered leases end on it
		LongPoll: func(r *http.Request, p compat.Principal, wait time.Duration) (context.Context, time.Duration, func(), error) {
			return s.longPoll(r, p.(compatPrincipal).p, wait)
		},
		Recheck: func(r *http.Request, p compat.Principal) error { return s.recheckToken(r, p.(compatPrincipal).p) },
		Submit: func(r *http.Request, p compat.Principal, params *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
			return s.submitBounded(r, p.(compatPrincipal).p, params, 0)
		},
	})
	for pattern, h := range routes {
		s.mux.HandleFunc(pattern, h)
	}
}

// compatPrincipal is a principal as server/compat sees it.
type compatPrincipal struct{ p *principal }

func (c compatPrincipal) Allows(namespace, queue string, perms ...plane.Permission) bool {
	return c.p.allows(namespace, queue, perms...)
}

func (c compatPrincipal) Namespace() string {
	if c.p.all {
		return ""
	}
	return c.p.tok.Namespace
}
