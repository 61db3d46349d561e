package server

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"sync"

	"golang.org/x/crypto/scrypt"
)

// A listing's cursor names the last row the plane read (a schedule's "namespace/name"). When
// a scoped token's page skips rows it does not cover, that row may be another tenant's, so
// the cursor such a token gets is sealed: encrypted and authenticated (AES-256-GCM) under a
// key derived from the admin token, so that it tells nothing and cannot be forged, and every
// server given the same admin token opens it. A server without authentication has no
// scoped tokens and never seals.
//
// The key is derived with scrypt (N 2^15, r 8, p 1: about 32 MiB and a tenth of a second,
// once per server, at the first sealed cursor), not a plain hash: a sealed cursor's text is
// partly known ("namespace/…"), so a tenant holding one could test guesses of the admin
// token offline, and a slow derivation makes each guess cost what a login would.

// sealedCursorPrefix starts a sealed cursor ("namespace/name" never does: '~' is not a
// name character).
const sealedCursorPrefix = "~"

// cursorSealer derives the AEAD of the sealed cursors of a server from its admin token, at
// its first use.
type cursorSealer struct {
	adminToken string
	once       sync.Once
	aead       cipher.AEAD
}

func newCursorSealer(adminToken string) *cursorSealer {
	return &cursorSealer{adminToken: adminToken}
}

// get returns the AEAD, deriving its key the first time.
func (c *cursorSealer) get() cipher.AEAD {
	c.once.Do(func() {
		key, err := scrypt.Key([]byte(c.adminToken), []byte("lakeshore listing cursor"), 1<<15, 8, 1, 32)
		if err != nil {
			panic("server: " + err.Error()) // fixed, valid parameters
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			panic("server: " + err.Error()) // a 32-byte key is always an AES-256 key
		}
		if c.aead, err = cipher.NewGCM(block); err != nil {
			panic("server: " + err.Error())
		}
	})
	return c.aead
}

// sealCursor returns cursor sealed ("" stays "").
func (s *Server) sealCursor(cursor string) string {
	if cursor == "" {
		return ""
	}
	aead := s.cursors.get()
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(cursor)+aead.Overhead())
	rand.Read(nonce) //nolint:errcheck // crypto/rand.Read never fails
	return sealedCursorPrefix + base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(cursor), nil))
}

// openCursor returns the cursor a sealed one holds, or cursor itself when it is not sealed;
// ok is false for a sealed cursor this server did not seal (or one altered).
func (s *Server) openCursor(cursor string) (plain string, ok bool) {
	sealed, isSealed := strings.CutPrefix(cursor, sealedCursorPrefix)
	if !isSealed {
		return cursor, true
	}
	if s.cursors == nil {
		return "", false
	}
	aead := s.cursors.get()
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil || len(b) < aead.NonceSize() {
		return "", false
	}
	out, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], nil)
	if err != nil {
		return "", false
	}
	return string(out), true
}
