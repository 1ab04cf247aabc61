// Package archtest holds no code: its test checks the import edges between
// the module's layers, so that a change which lets the domain speak HTTP,
// a source load configuration, or a handler reach past the Limiter into a
// source fails `go test ./...` instead of waiting for a reader to notice.
//
// The layers, from the inside out:
//
//   - the domain: ratelimits and its algorithm packages (gcra, window,
//     bucket, once, and any added beside them). It decides; it reads no
//     file, speaks no HTTP and knows no storage. Inside it, the pure
//     algorithms (gcra, window, ratecounter) import nothing from the module
//     and only math and math/bits from the standard library; calendar,
//     whose periods come from the zone database, adds time and sync/atomic
//     to them (and errors and fmt for an unknown zone); the lease
//     arithmetic (concurrency) sorts and makes random lease ids; and
//     bucket, which applies the batch rules, imports only the algorithms
//     from the module.
//   - the config loader: the package that turns YAML files into the
//     domain's Config. It is the only part of ratelimits/... allowed
//     gopkg.in/yaml.v3; by convention its last path element starts with
//     "config".
//   - the sources: source/... store buckets. They use the domain's types
//     and algorithms, never configuration files or HTTP.
//   - the handlers: httpapi/... speak HTTP to a Limiter and never to a
//     source or to Redis directly.
//   - the forward-auth rules: forwardauth reads what a reverse proxy says
//     of the request it holds. The loader builds its rules and the
//     handlers use them, so it imports the standard library alone.
//   - the top denied ids: topdenied counts the ids the front ends hand it
//     (through decisionmetrics) and merges what a store gives back as
//     bytes; it knows no HTTP, no Redis, no source and not the domain.
//     Its sketch, internal/spacesaving, is the standard library without
//     clock, locks or I/O.
//   - cmd/limiter wires them together and may import anything.
//
// Beside the layers, the Go client (client/) is what applications import
// to call the service. It is a module of its own whose go.mod requires
// nothing, so that the go command itself refuses any import beyond the
// standard library (the server's packages and their wire types included)
// and it brings its users nothing else; the test here keeps its go.mod so.
package archtest
