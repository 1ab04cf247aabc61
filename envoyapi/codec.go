package envoyapi

import (
	"bytes"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// requestCodec is gRPC's proto codec, except that a RateLimitRequest whose
// strings hold invalid UTF-8 is still read. proto3 strings must be UTF-8,
// and Go's decoder refuses a message with one that is not, but Envoy
// copies header bytes into descriptor values as they come, and a client
// may send any. Refused by the codec, such a request would fail whole,
// before the service sees it: with Envoy's failure_mode_deny false, a
// client could escape every limit of a request by adding a stray byte to
// a header that only an uncounted descriptor carries. Read, the value
// counts where a rule counts it (an id kind refuses it, as any invalid
// id: INVALID_ARGUMENT) and nowhere else.
//
// It also bounds what decoding a RateLimitRequest costs. A message of up to
// --max-body-bytes can hold half a million empty descriptors or entries,
// each a value to allocate: 100 MB and most of a second of CPU for one
// call, before any limit is checked. A request larger than scanFrom is
// first walked as wire data (no allocation), and when it has more
// descriptors than maxDescriptors, or a descriptor more entries than
// maxEntries, only one past each bound is kept for decoding (and an entry
// with an empty key, wherever it was): enough for buildPlan to answer as
// it would the whole (too many descriptors; a descriptor no rule can
// match; an empty key, though its index then counts the entries kept).
type requestCodec struct {
	encoding.CodecV2
	maxDescriptors int
}

func newRequestCodec(maxDescriptors int) requestCodec {
	return requestCodec{CodecV2: encoding.GetCodecV2("proto"), maxDescriptors: maxDescriptors}
}

// scanFrom is the size above which a request is walked before it is
// decoded: a smaller one holds too few values to cost much.
const scanFrom = 4 << 10

// The wire numbers of the fields the walk counts.
var (
	descriptorsField = (*rlsv3.RateLimitRequest)(nil).ProtoReflect().Descriptor().Fields().ByName("descriptors").Number()
	entriesField     = (*ratelimitv3.RateLimitDescriptor)(nil).ProtoReflect().Descriptor().Fields().ByName("entries").Number()
	entryKeyField    = (*ratelimitv3.RateLimitDescriptor_Entry)(nil).ProtoReflect().Descriptor().Fields().ByName("key").Number()
	// descriptorMessages are the fields of a descriptor that hold a
	// message, whose wire data the decoder parses in turn.
	descriptorMessages = func() map[protowire.Number]bool {
		m := map[protowire.Number]bool{}
		fields := (*ratelimitv3.RateLimitDescriptor)(nil).ProtoReflect().Descriptor().Fields()
		for i := range fields.Len() {
			if fd := fields.Get(i); fd.Message() != nil {
				m[fd.Number()] = true
			}
		}
		return m
	}()
)

// Unmarshal decodes as the proto codec does, and a RateLimitRequest that
// it refuses again with strings taken as the bytes they are. A
// RateLimitRequest that fails that too (data that is not protobuf wire
// format) is not an error here: it is read as an empty request marked
// unreadable, which buildPlan refuses.
func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*rlsv3.RateLimitRequest)
	if ok && data.Len() > scanFrom {
		b, err := boundRequest(data.Materialize(), c.maxDescriptors)
		if err != nil {
			markUnreadable(req)
			return nil
		}
		data = mem.BufferSlice{mem.SliceBuffer(b)}
	}
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil || !ok {
		return err
	}
	proto.Reset(req)
	if unmarshalAnyStrings(data.Materialize(), req.ProtoReflect()) != nil {
		markUnreadable(req)
	}
	return nil
}

// unreadableMark is what a request the codec could not read holds: one
// unknown field, of the largest valid number, which RateLimitRequest does
// not use. gRPC answers a request its codec refuses with INTERNAL, the
// code of a fault of the server's own, and does so before any interceptor
// or handler runs. Read as an empty request with this mark instead, it
// reaches the handler, which refuses it as INVALID_ARGUMENT, the client's
// mistake, once its token is checked. A client that sends this field
// itself, and nothing else, is refused the same way; beside any other
// field it is an unknown field as any other, and ignored.
var unreadableMark = protowire.AppendVarint(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.VarintType), 1)

// markUnreadable empties req and marks it as unreadable.
func markUnreadable(req *rlsv3.RateLimitRequest) {
	proto.Reset(req)
	req.ProtoReflect().SetUnknown(unreadableMark)
}

// unreadable reports whether the codec marked req as unreadable: the mark
// is all it holds.
func unreadable(req *rlsv3.RateLimitRequest) bool {
	m := req.ProtoReflect()
	if !bytes.Equal(m.GetUnknown(), unreadableMark) {
		return false
	}
	empty := true
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		empty = false
		return false
	})
	return empty
}

// boundRequest returns the wire data of a RateLimitRequest b with the
// descriptors past the first maxDescriptors+1 left out, and in each kept
// descriptor the entries past the first maxEntries+1, but for the first
// entry with an empty key among them (which fails the request, wherever
// it is): b itself when it is within both bounds. Every other field is
// kept as it is. The descriptors left out are still walked: data that is
// not wire format is an error, as the decoder would find it.
func boundRequest(b []byte, maxDescriptors int) ([]byte, error) {
	descriptors := 0
	return rewrite(b, func(f wireField) ([]byte, error) {
		if f.num != descriptorsField || f.typ != protowire.BytesType {
			return f.all, nil
		}
		descriptors++
		if descriptors > maxDescriptors+1 {
			return nil, walkDescriptor(f.value)
		}
		bounded, err := boundDescriptor(f.value)
		if err != nil || len(bounded) == len(f.value) {
			return f.all, err
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, f.num, f.typ), bounded), nil
	})
}

// boundDescriptor is boundRequest for one descriptor's entries.
func boundDescriptor(b []byte) ([]byte, error) {
	entries, emptyKept := 0, false
	return rewrite(b, func(f wireField) ([]byte, error) {
		if f.num != entriesField || f.typ != protowire.BytesType {
			return f.all, nil
		}
		entries++
		switch {
		case entries <= maxEntries+1:
			return f.all, nil
		case !emptyKept && emptyKey(f.value):
			emptyKept = true
			return f.all, nil
		}
		// Left out, but walked: data that is not wire format is refused as
		// the decoder would refuse it.
		return nil, eachField(f.value, func(wireField) {})
	})
}

// walkDescriptor walks a descriptor left out, and the messages in it (its
// entries, its limit override, its hits_addend), as the decoder would
// parse them: data that is not wire format is an error.
func walkDescriptor(b []byte) error {
	var inner error
	err := eachField(b, func(f wireField) {
		if inner == nil && f.typ == protowire.BytesType && descriptorMessages[f.num] {
			inner = eachField(f.value, func(wireField) {})
		}
	})
	if err != nil {
		return err
	}
	return inner
}

// emptyKey reports whether a descriptor entry's wire data has an empty
// key: none, or one of no bytes (the last one given counts). Data that is
// not wire format reads as a key: the entry is then left out, and its
// walk refuses it.
func emptyKey(b []byte) bool {
	empty := true
	err := eachField(b, func(f wireField) {
		if f.num == entryKeyField && f.typ == protowire.BytesType {
			empty = len(f.value) == 0
		}
	})
	return empty && err == nil
}

// wireField is one field of wire data: its number and type, its offset
// in the data, the whole field with its tag, and a length-delimited
// field's contents.
type wireField struct {
	num   protowire.Number
	typ   protowire.Type
	at    int
	all   []byte
	value []byte
}

// eachField calls fn with each field of wire data b, in order. Data that
// is not wire format is an error.
func eachField(b []byte, fn func(wireField)) error {
	for at := 0; at < len(b); {
		num, typ, n := protowire.ConsumeTag(b[at:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		size := protowire.ConsumeFieldValue(num, typ, b[at+n:])
		if size < 0 {
			return protowire.ParseError(size)
		}
		f := wireField{num: num, typ: typ, at: at, all: b[at : at+n+size]}
		if typ == protowire.BytesType {
			f.value, _ = protowire.ConsumeBytes(b[at+n:])
		}
		fn(f)
		at += n + size
	}
	return nil
}

// rewrite returns b with each field replaced by what keep gives for it
// (the field's own bytes keep it, nil drops it), or b itself when every
// field is kept as it was; the first error of keep, or of the walk, ends
// it.
func rewrite(b []byte, keep func(wireField) ([]byte, error)) ([]byte, error) {
	var out []byte // nil while every field so far is kept as it was
	var keepErr error
	err := eachField(b, func(f wireField) {
		if keepErr != nil {
			return
		}
		kept, err := keep(f)
		if err != nil {
			keepErr = err
			return
		}
		if out == nil && (len(kept) != len(f.all) || (len(kept) > 0 && &kept[0] != &f.all[0])) {
			out = append(make([]byte, 0, len(b)), b[:f.at]...)
		}
		if out != nil {
			out = append(out, kept...)
		}
	})
	if err == nil {
		err = keepErr
	}
	switch {
	case err != nil:
		return nil, err
	case out == nil:
		return b, nil
	}
	return out, nil
}

// unmarshalAnyStrings decodes b into m as proto.Unmarshal does, but sets
// string fields, at any depth, without checking that they are UTF-8.
// Every other field goes through proto.Unmarshal, so anything else it
// refuses (malformed wire data, a type that does not match) is refused
// here too. A singular message field given twice keeps the last.
func unmarshalAnyStrings(b []byte, m protoreflect.Message) error {
	fields := m.Descriptor().Fields()
	var rest []byte // the fields left to proto.Unmarshal
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		size := protowire.ConsumeFieldValue(num, typ, b[n:])
		if size < 0 {
			return protowire.ParseError(size)
		}
		field, value := b[:n+size], b[n:n+size]
		b = b[n+size:]
		fd := fields.ByNumber(num)
		if fd == nil || typ != protowire.BytesType || fd.IsMap() ||
			(fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.MessageKind) {
			rest = append(rest, field...)
			continue
		}
		v, _ := protowire.ConsumeBytes(value)
		var val protoreflect.Value
		if fd.Kind() == protoreflect.StringKind {
			val = protoreflect.ValueOfString(string(v))
		} else {
			var sub protoreflect.Message
			if fd.IsList() {
				sub = m.Mutable(fd).List().NewElement().Message()
			} else {
				sub = m.NewField(fd).Message()
			}
			if err := unmarshalAnyStrings(v, sub); err != nil {
				return err
			}
			val = protoreflect.ValueOfMessage(sub)
		}
		if fd.IsList() {
			m.Mutable(fd).List().Append(val)
		} else {
			m.Set(fd, val)
		}
	}
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(rest, m.Interface())
}
