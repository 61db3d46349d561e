package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// principal is who a request acts as: everyone (auth off), the admin token, or a stored
// access token.
type principal struct {
	all     bool             // auth off or the admin token: every permission everywhere
	tok     *plane.TokenInfo // a stored token otherwise
	checked time.Time        // when tok was last looked up (authenticate, recheckToken)
}

// HashToken returns the SHA-256 of a bearer secret, as stored by Driver.TokenCreate.
func HashToken(secret string) []byte { return plane.HashTokenSecret(secret) }

// tokenSource says where a client's token comes from, in the answer to a missing, unknown,
// expired or revoked one (a CLI or SDK user never writes the Authorization header).
const tokenSource = "the lakeshore CLI and SDKs send $LAKESHORE_TOKEN"

// authenticate finds the principal of r. Errors: ErrUnauthorized (missing, unknown, expired
// or revoked token). The secret is never logged or echoed.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	if !s.authOn {
		return &principal{all: true}, nil
	}
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return nil, fmt.Errorf("%w: this server needs a token: send Authorization: Bearer <token> (%s)", api.ErrUnauthorized, tokenSource)
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	if subtle.ConstantTimeCompare(sum[:], s.adminHash[:]) == 1 {
		return &principal{all: true}, nil
	}
	tok, err := s.drv.TokenGet(r.Context(), sum[:])
	if errors.Is(err, plane.ErrNotFound) {
		return nil, fmt.Errorf("%w: unknown token: this server holds no such token: never minted here, or revoked or expired more than the retention period ago and deleted (%s: set it to a current token this server minted)", api.ErrUnauthorized, tokenSource)
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	now := s.cfg.Now()
	switch {
	case !tok.RevokedAt.IsZero():
		return nil, fmt.Errorf("%w: token %s was revoked (%s: set it to a current token)", api.ErrUnauthorized, tok.ID, tokenSource)
	case !tok.ExpiresAt.IsZero() && !now.Before(tok.ExpiresAt):
		return nil, fmt.Errorf("%w: token %s expired at %s (%s: set it to a current token)", api.ErrUnauthorized, tok.ID,
			tok.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"), tokenSource)
	}
	return &principal{tok: tok, checked: time.Now()}, nil
}

// streamTokenRecheck is how often a live stream (GET …/stream of frames, GET D/stream of
// records) looks its stored token up again: a stream lasts as long as what it follows keeps
// coming, and a token revoked or expired while it is open must stop receiving within it.
const streamTokenRecheck = time.Second

// recheckToken authenticates r again when p is a stored token last looked up
// streamTokenRecheck or more ago (p.checked, then set to now): a live stream before each
// delivery, and a long-poll before it answers with what came while it waited (claimed
// jobs, a result, frames), so that a token revoked or expired meanwhile gets nothing more.
// Errors: ErrUnauthorized (the token was revoked or expired since), or the token lookup's
// error.
func (s *Server) recheckToken(r *http.Request, p *principal) error {
	if p.tok == nil || time.Since(p.checked) < streamTokenRecheck {
		return nil
	}
	if _, err := s.authenticate(r); err != nil {
		return err
	}
	p.checked = time.Now()
	return nil
}

// has reports whether the token holds one of perms (admin holds all).
func (p *principal) has(perms []plane.Permission) bool {
	if p.all {
		return true
	}
	if slices.Contains(p.tok.Permissions, plane.PermissionAdmin) {
		return true
	}
	for _, want := range perms {
		if slices.Contains(p.tok.Permissions, want) {
			return true
		}
	}
	return false
}

// allows reports whether p may use one of perms on queue (namespace, queue).
func (p *principal) allows(namespace, queue string, perms ...plane.Permission) bool {
	if p.all {
		return true
	}
	return p.has(perms) && globMatch(p.tok.Namespace, namespace) && globMatch(p.tok.Queue, queue)
}

// allowsNamespace reports whether p may use one of perms on some queue of namespace.
func (p *principal) allowsNamespace(namespace string, perms ...plane.Permission) bool {
	if p.all {
		return true
	}
	return p.has(perms) && globMatch(p.tok.Namespace, namespace)
}

// global reports whether p covers every namespace and queue with admin rights: the admin
// token, auth off, or a stored admin token for "*" / "*".
func (p *principal) global() bool {
	return p.all || p.tok.Namespace == "*" && p.tok.Queue == "*" && slices.Contains(p.tok.Permissions, plane.PermissionAdmin)
}

// adminsNamespace reports whether p has admin rights on every queue of namespace: the
// server's admin token, auth off, or a stored admin token for that namespace (or a pattern
// matching it) and queue "*". What a supervisor needs to take the namespace's leases, read
// its launch policy's env, and trim every queue of it; a token scoped to queues, even
// their admin, is a tenant.
func (p *principal) adminsNamespace(namespace string) bool {
	return p.all || p.tok.Queue == "*" && p.allows(namespace, "*", plane.PermissionAdmin)
}

// scoped reports whether p's rights depend on the queue, so a request naming an
// invocation must look up its queue first.
func (p *principal) scoped() bool {
	return !p.all && !(p.tok.Namespace == "*" && p.tok.Queue == "*")
}

// globChars are the characters that make a token's namespace or queue a pattern
// (path.Match) rather than one name.
const globChars = "*?[\\"

func globMatch(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// forbidden is the 403 error for perms on what, p's request. It says what p's token does
// grant, and where ("it grants submit,read on team-a/*"), so its bearer sees the mismatch
// (most often another --namespace) without an admin's token list: its own scope only.
func forbidden(p *principal, what string, perms ...plane.Permission) error {
	names := make([]string, len(perms))
	for i, p := range perms {
		names[i] = string(p)
	}
	err := fmt.Errorf("%w: the token does not grant %s on %s", api.ErrForbidden, strings.Join(names, " or "), what)
	if p == nil || p.tok == nil {
		return err
	}
	granted := make([]string, len(p.tok.Permissions))
	for i, g := range p.tok.Permissions {
		granted[i] = string(g)
	}
	return fmt.Errorf("%w (it grants %s on %s/%s)", err, strings.Join(granted, ","), p.tok.Namespace, p.tok.Queue)
}

// authorizeQueue checks p's rights on a queue.
func authorizeQueue(p *principal, namespace, queue string, perms ...plane.Permission) error {
	if !p.allows(namespace, queue, perms...) {
		return forbidden(p, "queue "+namespace+"/"+queue, perms...)
	}
	return nil
}

// authorizeInvocation checks p's rights on invocation id's queue, looking it up when p is
// scoped. An invocation of a namespace or queue p does not cover answers exactly like an
// unknown id (plane.ErrNotFound), so a token cannot learn which ids exist elsewhere; a
// token lacking perms altogether gets 403.
func (s *Server) authorizeInvocation(r *http.Request, p *principal, id string, perms ...plane.Permission) error {
	if !p.has(perms) {
		return forbidden(p, "invocation "+id, perms...)
	}
	if !p.scoped() {
		return nil
	}
	if err := plane.ValidateID(id); err != nil {
		return err
	}
	inv, err := s.drv.InvocationGet(r.Context(), id)
	if err != nil {
		return err
	}
	if !p.allows(inv.Namespace, inv.Queue, perms...) {
		return plane.ErrNotFound
	}
	return nil
}

// authorizeGlobal checks that p is a global admin.
func authorizeGlobal(p *principal, what string) error {
	if !p.global() {
		return fmt.Errorf("%w: %s needs the admin token or an admin token for every namespace and queue", api.ErrForbidden, what)
	}
	return nil
}
