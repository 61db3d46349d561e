package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server/ui"
)

// The dashboard (package server/ui) at /ui/: its static files, public (they hold no data),
// and two JSON routes of its own under /ui/api/, authenticated like the API. They are not
// part of the /v1 API (nor of its OpenAPI document): the pages read everything else from
// /v1 with the user's token.

// registerUI mounts the dashboard unless Config.DisableUI.
func (s *Server) registerUI() {
	if s.cfg.DisableUI {
		return
	}
	s.history = ui.NewHistory(func(ctx context.Context) ([]plane.QueueStats, error) { return s.drv.QueueStatsList(ctx, "") },
		s.cfg.UIHistoryInterval)
	assets := ui.Assets()
	s.mux.Handle("GET "+ui.Prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.history.Start() // the rate history starts with the first page served
		assets.ServeHTTP(w, r)
	}))
	// Browsers ask every server for /favicon.ico: answer with the dashboard's icon rather
	// than a 404 in the console of every page.
	s.mux.Handle("GET /favicon.ico", http.StripPrefix("/favicon.ico", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = ui.Prefix + "favicon.svg"
		assets.ServeHTTP(w, r)
	})))
	s.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ui.Prefix, http.StatusMovedPermanently)
	})
	// The address `lakeshore serve` prints is the server's root, which a browser opens first:
	// it leads to the dashboard (302, not permanent: the root is no route of the API) rather
	// than to a JSON 404.
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ui.Prefix, http.StatusFound)
	})
	// A path under /ui/api/ that is no route below is an unknown API path, answered with
	// the typed JSON error of every other one (route_not_found), not by the static files'
	// plain-text 404.
	s.mux.HandleFunc("GET /ui/api/", func(w http.ResponseWriter, r *http.Request) {
		ui.SetSecurityHeaders(w.Header())
		s.unmatched(w, r)
	})
	for pattern, h := range map[string]handlerFunc{
		"GET /ui/api/session": s.handleUISession,
		"GET /ui/api/history": s.handleUIHistory,
		"GET /ui/api/queue":   s.handleUIQueue,
		"GET /ui/api/search":  s.handleUISearch,
	} {
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			ui.SetSecurityHeaders(w.Header())
			w.Header().Set("Cache-Control", "no-store")
			if pattern == "GET /ui/api/session" && s.authOn && r.Header.Get("Authorization") == "" {
				// Not signed in yet: say so without an error (the page shows its sign-in
				// form; a 401 here would be a failed load in the browser's console).
				writeUIJSON(w, &uiSession{Auth: true, Permissions: []string{}}) //nolint:errcheck // plain struct
				return
			}
			p, err := s.authenticate(r)
			if err == nil {
				err = h(w, r, p)
			}
			if err != nil {
				s.writeError(w, r, err)
			}
		})
	}
}

// StartUIHistory starts the dashboard's rate history now, so the charts cover the time
// since the server started rather than since the first /ui/ request (`lakeshore serve` calls
// it). Stop ends it. It does nothing with Config.DisableUI, or when already started.
func (s *Server) StartUIHistory() {
	if s.history != nil {
		s.history.Start()
	}
}

// uiSession answers GET /ui/api/session: who the token is, and with ?namespace=&queue= its
// permissions on that queue, so the pages show only the actions the token may take.
type uiSession struct {
	// Auth is false when the server runs without authentication.
	Auth bool `json:"auth"`
	// SignedIn is false when authentication is on and the request carried no token.
	SignedIn bool `json:"signed_in"`
	// Admin: the admin token, auth off, or an admin token for every namespace and queue.
	Admin bool `json:"admin"`
	// TokenID, Namespace, Queue, Permissions and ExpiresAt describe a stored token.
	TokenID     string    `json:"token_id,omitzero"`
	Namespace   string    `json:"namespace,omitzero"`
	Queue       string    `json:"queue,omitzero"`
	Permissions []string  `json:"permissions"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	// QueuePermissions are the permissions on the queue of the query (absent without one).
	QueuePermissions []string `json:"queue_permissions,omitzero"`
}

var allPermissions = []plane.Permission{plane.PermissionRead, plane.PermissionSubmit, plane.PermissionConsume, plane.PermissionAdmin}

func (s *Server) handleUISession(w http.ResponseWriter, r *http.Request, p *principal) error {
	out := &uiSession{Auth: s.authOn, SignedIn: true, Admin: p.global(), Permissions: []string{}}
	if p.tok != nil {
		out.TokenID, out.Namespace, out.Queue, out.ExpiresAt = p.tok.ID, p.tok.Namespace, p.tok.Queue, p.tok.ExpiresAt
		for _, perm := range p.tok.Permissions {
			out.Permissions = append(out.Permissions, string(perm))
		}
	} else {
		for _, perm := range allPermissions {
			out.Permissions = append(out.Permissions, string(perm))
		}
	}
	q := r.URL.Query()
	if ns, queue := q.Get("namespace"), q.Get("queue"); ns != "" || queue != "" {
		if err := plane.ValidateNamespace(ns); err != nil {
			return err
		}
		if err := plane.ValidateName("queue name", queue); err != nil {
			return err
		}
		out.QueuePermissions = []string{}
		for _, perm := range allPermissions {
			if p.allows(ns, queue, perm) {
				out.QueuePermissions = append(out.QueuePermissions, string(perm))
			}
		}
	}
	return writeUIJSON(w, out)
}

// uiHistory answers GET /ui/api/history: the rate history of the queues the token covers.
type uiHistory struct {
	// Interval is the sampling interval in seconds.
	Interval float64 `json:"interval"`
	// Queues are the series, one per queue the token may read.
	Queues []ui.Series `json:"queues"`
}

func (s *Server) handleUIHistory(w http.ResponseWriter, r *http.Request, p *principal) error {
	s.history.Start()
	out := &uiHistory{Interval: s.history.Interval().Seconds(),
		Queues: s.history.Series(func(ns, q string) bool { return p.allows(ns, q, anyPerms...) })}
	if out.Queues == nil {
		out.Queues = []ui.Series{}
	}
	return writeUIJSON(w, out)
}

// writeUIJSON writes v as JSON (the dashboard's own answers are JSON only).
func writeUIJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: encode response: %v", api.ErrInternal, err)
	}
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	w.Write(b) //nolint:errcheck // the client went away
	return nil
}
