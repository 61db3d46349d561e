package plane

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"regexp"
)

// TokenSecretPrefix starts every token secret, so that secrets are easy to spot in a leak.
const TokenSecretPrefix = "lks_"

// NewTokenSecret returns a random bearer secret (TokenSecretPrefix and 32 random bytes in
// base64url) and its hash as TokenInfo.Hash stores it (HashTokenSecret). The one place
// secrets are made: the server's token create, Admin.CreateToken and the provider
// supervisor's launch tokens use it.
func NewTokenSecret() (secret string, hash []byte) {
	b := make([]byte, 32)
	rand.Read(b) //nolint:errcheck // crypto/rand.Read never fails
	secret = TokenSecretPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, HashTokenSecret(secret)
}

// HashTokenSecret returns the SHA-256 of a bearer secret, as TokenInfo.Hash stores it.
func HashTokenSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// tokenSecretPattern matches a secret NewTokenSecret makes.
var tokenSecretPattern = regexp.MustCompile(TokenSecretPrefix + `[A-Za-z0-9_-]{43}`)

// RedactTokenSecrets returns s with every token secret NewTokenSecret could have made
// (TokenSecretPrefix and 43 base64url characters) replaced by "xxxxx" (as RedactValuesIn does): for
// a line a worker wrote (its log's last line, a provider's error), which may quote a token
// its writer does not know.
func RedactTokenSecrets(s string) string {
	return tokenSecretPattern.ReplaceAllLiteralString(s, "xxxxx")
}
