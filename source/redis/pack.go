package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// Batch packing: the calls a pipe sends in one pipeline are packed, up to
// maxPack at a time, into single script calls (operations M and P of
// the script), which spares Redis most of its fixed cost per call. A
// packed call decides its batches one after another inside one script
// run, each as if alone, and a failing batch answers its own error; its
// reply is the batches' replies one after another in one flat list.

// maxPack bounds the batches packed into one script call: a whole
// pipeline. Redis runs nothing else while a script runs, but it also runs
// the commands of one client's pipeline one after another before it turns
// to other clients, so one script of a pipeline's batches holds others up
// no longer than the pipeline's commands did, and pays the script's fixed
// cost (its arguments' tables, its functions, its reply) once.
const maxPack = maxPipeline

// packing is how a pipe packs queued calls into script calls.
type packing int

const (
	// packNone sends one script call per queued call.
	packNone packing = iota
	// packKeys packs any calls into M calls, their keys declared: for a
	// standalone Redis, where a script may declare keys of any slot.
	packKeys
	// packInline packs one-key calls into P calls, their keys passed as
	// arguments: for a cluster master, where the keys a script declares
	// must share a slot but a script may reach undeclared keys of every
	// slot the node serves. A key whose slot has moved fails its own
	// batch having changed nothing that any answer can tell (the
	// script's operation P), and Source.evalOn sends that call again alone, its key
	// declared. A call of several keys is never packed this way: its keys
	// are declared, so that Redis checks them all before the script runs.
	packInline
)

// pack splits calls into the groups that become one script call each, as
// p.packing allows. The batches of the script's fast path
// (scriptCall.fastShape) come first in a packed call: the script decides
// a run of them from its start without making its other functions
// (lua/fast.lua). Calls queued together are concurrent, so their order is
// free.
func (p *pipe) pack(calls []*queued) [][]*queued {
	var packs [][]*queued
	packable := make([]*queued, 0, len(calls))
	var rest []*queued
	for _, q := range calls {
		switch {
		case p.packing == packNone, p.packing == packInline && len(q.call.keys) != 1:
			packs = append(packs, []*queued{q})
		case q.call.fastShape():
			packable = append(packable, q)
		default:
			rest = append(rest, q)
		}
	}
	packable = append(packable, rest...)
	for len(packable) > 0 {
		n := min(maxPack, len(packable))
		packs = append(packs, packable[:n:n])
		packable = packable[n:]
	}
	return packs
}

// exec sends one EVALSHA per pack as one pipeline. Every command gets its
// own reply or error, also when the connection fails (then all of them).
func (p *pipe) exec(ctx context.Context, packs [][]*queued) []*goredis.Cmd {
	pl := p.node.Pipeline()
	cmds := make([]*goredis.Cmd, len(packs))
	calls := make([]*scriptCall, 0, maxPack)
	for i, u := range packs {
		var keys []string
		var args []any
		if len(u) == 1 {
			keys, args = p.wire.encode(u[0].call)
		} else {
			calls = calls[:0]
			for _, q := range u {
				calls = append(calls, q.call)
			}
			keys, args = p.wire.encodePacked(calls, p.packing)
		}
		cmds[i] = pl.EvalSha(ctx, p.script.Hash(), keys, args...)
	}
	_, _ = pl.Exec(ctx) // each command holds its own error
	return cmds
}

// deliver hands the calls of a pack their replies from its command: a
// packed call's flat reply is cut into each batch's share (replyWidth).
func deliver(u []*queued, cmd *goredis.Cmd) {
	reply, err := cmd.Result()
	if len(u) == 1 || err != nil {
		for _, q := range u {
			q.finish(reply, err)
		}
		return
	}
	items, ok := reply.([]any)
	width := 0
	for _, q := range u {
		width += replyWidth(q.call)
	}
	if !ok || len(items) != width {
		err := fmt.Errorf("%w: %d reply items for %d packed batches of %d", ErrBadReply, len(items), len(u), width)
		for _, q := range u {
			q.finish(nil, err)
		}
		return
	}
	for _, q := range u {
		w := replyWidth(q.call)
		mine := items[:w:w]
		items = items[w:]
		switch e, isErr := mine[0].(error); {
		case isErr:
			q.finish(nil, e)
		case w == 1:
			q.finish(mine[0], nil)
		default:
			q.finish(mine, nil)
		}
	}
}
