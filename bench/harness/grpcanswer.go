package main

import (
	"encoding/binary"
	"errors"
	"fmt"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
)

// grpcBench is the gRPC rows' workload: the domain and descriptor key the
// harness's rules file maps to the limit the HTTP rows spend.
const (
	grpcBenchDomain = "bench"
	grpcBenchKey    = "api_key"
)

// grpcPrefixLen is the length of the prefix gRPC puts before every
// message on the wire: a compressed flag and a big-endian length.
const grpcPrefixLen = 5

// encodeRequests returns n encoded RateLimitRequests of domain, the i-th
// with one descriptor {key: "key-<i+1>"} and a cost of 1: the same ids
// bench/spend.lua spends over HTTP.
func encodeRequests(domain, key string, n int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range out {
		req := &rlsv3.RateLimitRequest{
			Domain: domain,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{
				Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: fmt.Sprintf("key-%d", i+1)}},
			}},
			HitsAddend: 1,
		}
		b, err := proto.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("encoding request %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// grpcFrame returns msg as a gRPC call's request body: the uncompressed
// message behind its length prefix, ready to be one DATA frame.
func grpcFrame(msg []byte) []byte {
	out := make([]byte, grpcPrefixLen, grpcPrefixLen+len(msg))
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// errBadAnswer is what the answer checks wrap: the server answered with
// OK but not with a rate-limit answer of one decided descriptor.
var errBadAnswer = errors.New("not a rate-limit answer")

// checkFraming returns an error unless an answer body of size bytes that
// begins with prefix holds exactly one uncompressed gRPC message: what
// every answer is held to without decoding it.
func checkFraming(prefix [grpcPrefixLen]byte, size int) error {
	switch {
	case size < grpcPrefixLen:
		return fmt.Errorf("%w: %d bytes, not a gRPC message", errBadAnswer, size)
	case prefix[0] != 0:
		return fmt.Errorf("%w: a compressed message, though no compression was offered", errBadAnswer)
	case int64(binary.BigEndian.Uint32(prefix[1:])) != int64(size-grpcPrefixLen):
		return fmt.Errorf("%w: a message of %d bytes in %d bytes after the prefix", errBadAnswer, binary.BigEndian.Uint32(prefix[1:]), size-grpcPrefixLen)
	}
	return nil
}

// checkAnswer decodes an answer into into (reused by the caller) and
// returns an error unless it is a RateLimitResponse of one descriptor
// whose overall code is OK or OVER_LIMIT, and, when limit is not empty,
// whose descriptor was counted by that limit.
func checkAnswer(answer []byte, into *rlsv3.RateLimitResponse, limit string) error {
	into.Reset()
	if err := proto.Unmarshal(answer, into); err != nil {
		return fmt.Errorf("%w: %w", errBadAnswer, err)
	}
	switch into.GetOverallCode() {
	case rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT:
	default:
		return fmt.Errorf("%w: overall code %s", errBadAnswer, into.GetOverallCode())
	}
	if n := len(into.GetStatuses()); n != 1 {
		return fmt.Errorf("%w: %d descriptor statuses for one descriptor", errBadAnswer, n)
	}
	if got := into.GetStatuses()[0].GetCurrentLimit().GetName(); limit != "" && got != limit {
		return fmt.Errorf("%w: the descriptor was counted by %q, not %q (is the rules file loaded?)", errBadAnswer, got, limit)
	}
	return nil
}
