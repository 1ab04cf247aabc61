package envoyapi

import (
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The codec reads every message proto.Unmarshal reads exactly as it does
// (past scanFrom, the message boundRequest keeps), and any other input
// without panicking: where proto.Unmarshal refuses it for a string that is
// not UTF-8, as it is, and otherwise as a request marked unreadable, which
// buildPlan refuses.
func FuzzRequestCodec(f *testing.F) {
	for _, req := range []*rlsv3.RateLimitRequest{
		{Domain: "edge", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.1"}}},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: "k"}, {Key: "path", Value: "/x"}},
				HitsAddend: wrapperspb.UInt64(2), IsNegativeHits: true,
				Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 2}},
		}},
		{},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, 0xc3, 0x28}) // a domain that is not UTF-8
	codec := newRequestCodec(100)
	f.Fuzz(func(t *testing.T, b []byte) {
		// What the codec decodes: past scanFrom, the request within its
		// bounds (TestBoundRequest holds boundRequest to them).
		ref := b
		if len(b) > scanFrom {
			if bounded, err := boundRequest(b, 100); err == nil {
				ref = bounded
			}
		}
		var want rlsv3.RateLimitRequest
		strictErr := proto.Unmarshal(ref, &want)
		var got rlsv3.RateLimitRequest
		err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got)
		switch {
		case strictErr == nil && (err != nil || !proto.Equal(&got, &want)):
			t.Fatalf("proto.Unmarshal reads %v; the codec %v, %v", &want, &got, err)
		case strictErr != nil && err == nil && !strings.Contains(strictErr.Error(), "UTF-8") && !unreadable(&got):
			t.Fatalf("the codec read %v, not marked unreadable, from bytes proto.Unmarshal refuses for another fault than a string's: %v", &got, strictErr)
		}
	})
}

// boundRequest keeps one descriptor past the bound, and in each descriptor
// one entry past its bound, and everything else as it was: decoded, the
// result is the whole request cut there.
func TestBoundRequest(t *testing.T) {
	entries := func(n int) []*ratelimitv3.RateLimitDescriptor_Entry {
		es := make([]*ratelimitv3.RateLimitDescriptor_Entry, n)
		for i := range es {
			es[i] = &ratelimitv3.RateLimitDescriptor_Entry{Key: "k", Value: strings.Repeat("v", i%3)}
		}
		return es
	}
	full := &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 2}
	for i := range 300 {
		d := &ratelimitv3.RateLimitDescriptor{Entries: entries(1 + i%3), HitsAddend: wrapperspb.UInt64(uint64(i))}
		if i == 1 {
			d.Entries = entries(500)
			d.IsNegativeHits = true
		}
		full.Descriptors = append(full.Descriptors, d)
	}
	b, err := proto.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	bounded, err := boundRequest(b, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got rlsv3.RateLimitRequest
	if err := proto.Unmarshal(bounded, &got); err != nil {
		t.Fatal(err)
	}
	// The entries of the second descriptor past its bound are cut, but
	// for its first with an empty key (entries(500) gives keys "k"; one is
	// emptied here, and one after it).
	full.Descriptors[1].Entries[300].Key = ""
	full.Descriptors[1].Entries[400].Key = ""
	if b, err = proto.Marshal(full); err != nil {
		t.Fatal(err)
	}
	if bounded, err = boundRequest(b, 100); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(bounded, &got); err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(full).(*rlsv3.RateLimitRequest)
	want.Descriptors = want.Descriptors[:101]
	want.Descriptors[1].Entries = append(want.Descriptors[1].Entries[:maxEntries+1:maxEntries+1], want.Descriptors[1].Entries[300])
	if !proto.Equal(&got, want) {
		t.Fatalf("the bounded request is not the whole one cut at the bounds: %d descriptors, %d entries in the second",
			len(got.Descriptors), len(got.Descriptors[1].GetEntries()))
	}
	// Within the bounds, the data is kept as it is, not copied.
	within, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if kept, err := boundRequest(within, 101); err != nil || &kept[0] != &within[0] || len(kept) != len(within) {
		t.Errorf("a request within its bounds was rewritten (%v)", err)
	}
	if _, err := boundRequest([]byte{0x12, 0x05, 0x0a}, 100); err == nil {
		t.Error("a descriptor cut short was read")
	}
	// An entry past the bound is left out, but data in it that is not
	// wire format is still refused, as proto.Unmarshal refuses it.
	var d []byte
	for range maxEntries + 10 {
		d = protowire.AppendBytes(protowire.AppendTag(d, 1, protowire.BytesType), []byte{0x0a, 0x01, 'k'})
	}
	d = protowire.AppendBytes(protowire.AppendTag(d, 1, protowire.BytesType), []byte{0x0a, 0x05, 'k'}) // a key cut short
	req := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), d)
	if err := proto.Unmarshal(req, new(rlsv3.RateLimitRequest)); err == nil {
		t.Fatal("proto.Unmarshal read the entry cut short")
	}
	if _, err := boundRequest(req, 100); err == nil {
		t.Error("an entry past the bound cut short was read")
	}
	// So is one in a descriptor past the bound, left out whole.
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0x0a, 0x05, 'k'})
	var dropped []byte
	for range 5 {
		dropped = protowire.AppendBytes(protowire.AppendTag(dropped, 2, protowire.BytesType), []byte{0x0a, 0x03, 0x0a, 0x01, 'k'})
	}
	dropped = protowire.AppendBytes(protowire.AppendTag(dropped, 2, protowire.BytesType), bad)
	if err := proto.Unmarshal(dropped, new(rlsv3.RateLimitRequest)); err == nil {
		t.Fatal("proto.Unmarshal read the entry cut short")
	}
	if _, err := boundRequest(dropped, 2); err == nil {
		t.Error("an entry cut short in a descriptor past the bound was read")
	}
}

// A request of a million bytes of empty descriptors, or of one descriptor
// of empty entries, costs the codec what a hundred-odd values do, where
// decoding it whole would allocate one for every two bytes.
func TestCodecBoundsTheDecoding(t *testing.T) {
	codec := newRequestCodec(100)
	var manyDescriptors, manyEntries []byte
	manyDescriptors = protowire.AppendTag(manyDescriptors, 1, protowire.BytesType)
	manyDescriptors = protowire.AppendString(manyDescriptors, "edge")
	var entries []byte
	for range 500_000 {
		manyDescriptors = append(manyDescriptors, 0x12, 0x00) // descriptors: an empty one
	}
	for range 200_000 {
		entries = append(entries, 0x0a, 0x03, 0x0a, 0x01, 'k') // entries: one of key "k"
	}
	manyEntries = protowire.AppendTag(manyEntries, 1, protowire.BytesType)
	manyEntries = protowire.AppendString(manyEntries, "edge")
	manyEntries = protowire.AppendTag(manyEntries, 2, protowire.BytesType)
	manyEntries = protowire.AppendBytes(manyEntries, entries)
	for name, b := range map[string][]byte{"descriptors": manyDescriptors, "entries": manyEntries} {
		var req rlsv3.RateLimitRequest
		allocs := testing.AllocsPerRun(1, func() {
			proto.Reset(&req)
			if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &req); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 2_000 {
			t.Errorf("%d bytes of empty %s: %.0f allocations", len(b), name, allocs)
		}
		if n := len(req.Descriptors); name == "descriptors" && n != 101 {
			t.Errorf("%d descriptors decoded, want 101", n)
		}
		if n := len(req.Descriptors[0].GetEntries()); name == "entries" && n != maxEntries+1 {
			t.Errorf("%d entries decoded, want %d", n, maxEntries+1)
		}
	}
}
