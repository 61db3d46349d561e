package server

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// A listing's cursor names the last row the plane read (a schedule's "namespace/name"). When
// a scoped token's page skips rows it does not cover, that row may be another tenant's, so
// the cursor such a token gets is sealed: encrypted and authenticated (AES-256-GCM) under a
// key derived from the admin token, so that it tells nothing and cannot be forged, and every
// server given the same admin token opens it. A server without authentication has no
// scoped tokens and never seals.

// sealedCursorPrefix starts a sealed cursor ("namespace/name" never does: '~' is not a
// name character).
const sealedCursorPrefix = "~"

// cursorSealer returns the AEAD of the sealed cursors of a server whose admin token is
// adminToken.
func cursorSealer(adminToken string) cipher.AEAD {
	key := sha256.Sum256([]byte("lakeshore listing cursor\x00" + adminToken))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic("server: " + err.Error()) // a 32-byte key is always an AES-256 key
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic("server: " + err.Error())
	}
	return aead
}

// sealCursor returns cursor sealed ("" stays "").
func (s *Server) sealCursor(cursor string) string {
	if cursor == "" {
		return ""
	}
	nonce := make([]byte, s.cursors.NonceSize(), s.cursors.NonceSize()+len(cursor)+s.cursors.Overhead())
	rand.Read(nonce) //nolint:errcheck // crypto/rand.Read never fails
	return sealedCursorPrefix + base64.RawURLEncoding.EncodeToString(s.cursors.Seal(nonce, nonce, []byte(cursor), nil))
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
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil || len(b) < s.cursors.NonceSize() {
		return "", false
	}
	out, err := s.cursors.Open(nil, b[:s.cursors.NonceSize()], b[s.cursors.NonceSize():], nil)
	if err != nil {
		return "", false
	}
	return string(out), true
}
