package redis

import (
	_ "embed"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// bucketLua is the script that decides and writes every batch inside
// Redis. One script serves both key formats (the format is an argument,
// see encode.go), so a source loads it once and calls it by its SHA-1.
//
//go:embed bucket.lua
var bucketLua string

// smallBatch is the batch size whose states read, and refund amounts,
// live in stack arrays.
const smallBatch = 8

// stateBuffer returns n state slots, from buf when they fit.
func stateBuffer(buf []bucket.State, n int) []bucket.State {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]bucket.State, n)
}

// amountBuffer returns n int64 slots, from buf when they fit.
func amountBuffer(buf []int64, n int) []int64 {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]int64, n)
}
