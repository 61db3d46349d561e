package server

import (
	"math"
	"net/http"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// SecretPrefix starts every secret the server mints, so they are easy to spot in a leak.
const SecretPrefix = plane.TokenSecretPrefix

// NewSecret returns a random bearer secret: SecretPrefix and 32 random bytes in base64url
// (plane.NewTokenSecret).
func NewSecret() string {
	secret, _ := plane.NewTokenSecret()
	return secret
}

func (s *Server) handleTokenCreate(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.TokenCreateRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if req.TTL < 0 || math.IsNaN(req.TTL) || math.IsInf(req.TTL, 0) {
		return plane.Invalid("ttl", req.TTL, "use seconds ≥ 0 (0: never expires)")
	}
	tok := &plane.TokenInfo{ID: req.ID, Hash: req.Hash, Namespace: req.Namespace, Queue: req.Queue,
		Permissions: api.Permissions(req.Permissions), CreatedAt: req.CreatedAt, ExpiresAt: req.ExpiresAt}
	now := s.cfg.Now()
	if tok.ID == "" {
		tok.ID = s.ids.New(now)
	}
	check := *tok
	if len(check.Hash) == 0 {
		check.Hash = make([]byte, 32) // the server makes the secret below
	}
	if err := check.Validate(); err != nil {
		return err
	}
	if err := authorizeGlobal(p, "creating tokens"); err != nil {
		return err
	}
	if tok.CreatedAt.IsZero() {
		tok.CreatedAt = now
	}
	if req.TTL > 0 {
		tok.ExpiresAt = now.Add(api.Duration(req.TTL))
	}
	var secret string
	if len(tok.Hash) == 0 {
		secret = NewSecret()
		tok.Hash = HashToken(secret)
	}
	tok.RevokedAt = time.Time{}
	if err := s.drv.TokenCreate(r.Context(), tok); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.TokenCreateResponse{Token: api.NewToken(tok), Secret: secret})
	return nil
}

func (s *Server) handleTokenList(w http.ResponseWriter, r *http.Request, p *principal) error {
	if err := authorizeGlobal(p, "listing tokens"); err != nil {
		return err
	}
	toks, err := s.drv.TokenList(r.Context())
	if err != nil {
		return err
	}
	out := &api.TokensResponse{Tokens: make([]api.Token, len(toks))}
	for i := range toks {
		out.Tokens[i] = api.NewToken(&toks[i])
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handleTokenLookup(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.TokenLookupRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if err := authorizeGlobal(p, "looking up tokens"); err != nil {
		return err
	}
	tok, err := s.drv.TokenGet(r.Context(), req.Hash)
	if err != nil {
		return err
	}
	out := api.NewToken(tok)
	out.Hash = tok.Hash
	s.write(w, r, http.StatusOK, &out)
	return nil
}

func (s *Server) handleTokenRevoke(w http.ResponseWriter, r *http.Request, p *principal) error {
	if err := authorizeGlobal(p, "revoking tokens"); err != nil {
		return err
	}
	ok, err := s.drv.TokenRevoke(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: ok})
	return nil
}
