package envoyapi

import (
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
type requestCodec struct{ encoding.CodecV2 }

func newRequestCodec() requestCodec {
	return requestCodec{encoding.GetCodecV2("proto")}
}

// Unmarshal decodes as the proto codec does, and a RateLimitRequest that
// it refuses again with strings taken as the bytes they are; when that
// fails too, the codec's own error stands.
func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	req, ok := v.(*rlsv3.RateLimitRequest)
	if err == nil || !ok {
		return err
	}
	proto.Reset(req)
	if unmarshalAnyStrings(data.Materialize(), req.ProtoReflect()) != nil {
		proto.Reset(req)
		return err
	}
	return nil
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
