package teams

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// MinPasswordLen is the fewest characters a password may have; bcrypt reads at most 72
// bytes, so a longer one is refused rather than silently cut.
const (
	MinPasswordLen = 10
	MaxPasswordLen = 72
)

// PasswordCost is bcrypt's work factor (tests lower it).
var PasswordCost = 12

// HashPassword checks a password's length and hashes it with bcrypt.
func HashPassword(pw string) (string, error) {
	if n := utf8.RuneCountInString(pw); n < MinPasswordLen {
		return "", fmt.Errorf("the password has %d characters; use at least %d", n, MinPasswordLen)
	}
	if len(pw) > MaxPasswordLen {
		return "", fmt.Errorf("the password is longer than %d bytes", MaxPasswordLen)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), PasswordCost)
	if err != nil {
		return "", err
	}
	return string(h), nil
}

// dummyHash is compared against when an account does not exist, so that a wrong email
// costs the same time as a wrong password.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("no such account, no such password"), bcrypt.MinCost)

// CheckPassword reports whether pw matches hash ("" : no account; it still spends the
// time of a comparison).
func CheckPassword(hash, pw string) bool {
	if hash == "" {
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(pw))
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)) == nil
}

// RandomToken is n random bytes, URL-safe base64 without padding.
func RandomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Digest is the SHA-256 of a secret in hex: what is stored of sessions, keys and reset
// links (a 32-byte random secret needs no slow hash; one read of Redis shows no
// usable secret).
func Digest(secret string) string {
	s := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(s[:])
}

// KeyPrefix starts every API key, so that a key is recognised (by people and by secret
// scanners) and told from SLUICE_TOKEN.
const KeyPrefix = "slk_"

// NewKey returns a new API key "slk_<id>_<secret>" and its id (the visible prefix is
// "slk_<id>"). The id is what the key is found by; only the secret's digest is kept.
func NewKey() (key, id string) {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	id = hex.EncodeToString(b)
	return KeyPrefix + id + "_" + RandomToken(32), id
}

// ParseKey splits a key into its id and whole value; ok is false for anything that is
// not shaped like a key.
func ParseKey(key string) (id string, ok bool) {
	rest, found := strings.CutPrefix(key, KeyPrefix)
	if !found {
		return "", false
	}
	id, secret, found := strings.Cut(rest, "_")
	if !found || len(id) != 10 || len(secret) < 32 {
		return "", false
	}
	return id, true
}
