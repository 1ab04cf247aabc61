package httpapi

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/httpapi/wire"
)

// The field lists are the wire request types' JSON names, in their order,
// so that the documented types and the decoder agree.
func TestERLFieldsAreTheWireTypes(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields []string
	}{
		{wire.CheckRateRequest{}, checkRateFields}, {wire.CheckRatesRequest{}, checkRatesFields},
		{wire.RateCheckRequest{}, rateCheckFields}, {wire.IncrementRequest{}, incrementFields},
		{wire.BoxAddRequest{}, boxAddFields}, {wire.BoxRemoveRequest{}, boxRemoveFields},
	} {
		typ := reflect.TypeOf(c.v)
		var names []string
		for i := range typ.NumField() {
			names = append(names, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		if !slices.Equal(names, c.fields) {
			t.Errorf("%s: %v, the decoder takes %v", typ.Name(), names, c.fields)
		}
	}
}

// The decoder's body types have the fields of the wire types, so that
// every field a call takes is decoded.
func TestERLBodyHasEveryField(t *testing.T) {
	for _, c := range []struct {
		body   any
		fields []string
	}{{erlBody{}, erlBodyFields}, {rateCheckBody{}, rateCheckFields}} {
		typ := reflect.TypeOf(c.body)
		var names []string
		for i := range typ.NumField() {
			names = append(names, typ.Field(i).Tag.Get("json"))
		}
		if !slices.Equal(names, c.fields) {
			t.Errorf("%s: %v, want %v", typ.Name(), names, c.fields)
		}
	}
	for _, fields := range [][]string{checkRateFields, checkRatesFields, incrementFields, boxAddFields, boxRemoveFields} {
		for _, f := range fields {
			if !slices.Contains(erlBodyFields, f) {
				t.Errorf("erlBody has no field %q", f)
			}
		}
	}
}
