package concurrency

import (
	"crypto/rand"
	"encoding/hex"
)

// IDLength is the length of a lease id: 128 bits as lowercase hexadecimal.
const IDLength = 32

// NewID returns a new lease id of 128 random bits. Ids are unguessable so
// that only the holder of a lease can release or renew it.
func NewID() string {
	var b [IDLength / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read)
	return hex.EncodeToString(b[:])
}

// ValidID reports whether s is a lease id the service could have made:
// exactly IDLength lowercase hexadecimal characters.
func ValidID(s string) bool {
	if len(s) != IDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
