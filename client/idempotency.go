package client

import "crypto/rand"

// newIdempotencyKey is a fresh random key for one logical spend or
// refund: 26 base32 characters from crypto/rand, 130 bits, so two calls
// never share one by chance.
func newIdempotencyKey() string {
	return "lc-" + rand.Text()
}
