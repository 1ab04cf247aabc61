package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// idempotencyHeader names the header that makes a spend or refund safe to
// retry, and replayedHeader the one that marks an answer given from the
// record of an earlier request with the same key.
const (
	idempotencyHeader = "Idempotency-Key"
	replayedHeader    = "Idempotent-Replayed"
)

// MaxIdempotencyKeyBytes bounds the Idempotency-Key header's value.
const MaxIdempotencyKeyBytes = 255

// idempotencyKey returns the request's Idempotency-Key, scoped to its
// caller, or "" when it sends none. The key is 1 to MaxIdempotencyKeyBytes
// visible ASCII characters. With bearer tokens configured, it is scoped to
// the token presented (through a hash of it, never the token itself), so
// that two clients cannot answer each other's retries or learn each
// other's keys; without tokens, every caller shares one scope.
func (h *handler) idempotencyKey(r *http.Request) (string, *apiError) {
	values := r.Header.Values(idempotencyHeader)
	if len(values) == 0 {
		return "", nil
	}
	if len(values) > 1 {
		return "", badRequest(codeInvalidIdempotencyKey, "send one Idempotency-Key header, not several", -1)
	}
	key := values[0]
	if len(key) == 0 || len(key) > MaxIdempotencyKeyBytes {
		return "", badRequest(codeInvalidIdempotencyKey, "Idempotency-Key must be 1 to 255 visible ASCII characters", -1)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return "", badRequest(codeInvalidIdempotencyKey, "Idempotency-Key must be 1 to 255 visible ASCII characters", -1)
		}
	}
	scope := "-"
	if h.tokens.Configured() {
		if tok, ok := bearerToken(r); ok {
			sum := sha256.Sum256(tok)
			scope = hex.EncodeToString(sum[:12])
		}
	}
	return scope + ":" + key, nil
}
