package redis

import (
	_ "embed"
)

// bucketLua is the script that decides and writes every batch inside
// Redis. One script serves both key formats (the format is an argument,
// see encode.go), so a source loads it once and calls it by its SHA-1.
//
//go:embed bucket.lua
var bucketLua string

// smallBatch is the batch size whose TATs live in a stack array.
const smallBatch = 8

// tatBuffer returns n int64 slots, from buf when they fit.
func tatBuffer(buf []int64, n int) []int64 {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]int64, n)
}
