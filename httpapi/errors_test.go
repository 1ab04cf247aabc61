package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/source/memory"
)

// A refusal that quotes what the client sent stays small however much it
// sent: the message is cut, whole characters kept, and says so.
func TestRefusalsQuoteBoundedly(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	long := strings.Repeat("é", 300_000)
	for _, body := range []string{
		`{"` + long + `":1}`,
		`{"limit":"` + long + `","id":"1"}`,
		`{"limit":"NewOrdersPerAccount","id":"1","cost":1` + strings.Repeat("0", 500_000) + `}`,
	} {
		rec := s.post("/v1/spend", body)
		e := decode[wire.ErrorResponse](t, rec)
		if rec.Code != http.StatusBadRequest || rec.Body.Len() > 2048 || !utf8.ValidString(e.Error.Message) || !strings.HasSuffix(e.Error.Message, " bytes, cut)") {
			t.Errorf("%.40s…: %d, %d bytes, message %.80q…; want 400 with a cut message", body, rec.Code, rec.Body.Len(), e.Error.Message)
		}
	}
}

// Two Content-Type headers are a JSON body only when both say so: one that
// does not is refused whichever comes first, since a proxy on the way may
// have read it.
func TestTwoContentTypes(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	for _, tt := range []struct {
		types []string
		want  int
	}{
		{[]string{"application/json", "text/plain"}, http.StatusUnsupportedMediaType},
		{[]string{"text/plain", "application/json"}, http.StatusUnsupportedMediaType},
		{[]string{"application/json", "application/json; charset=utf-8"}, http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/spend", strings.NewReader(`{"limit":"Logins","id":"a"}`))
		req.Header["Content-Type"] = tt.types
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%q: %d %s, want %d", tt.types, rec.Code, rec.Body, tt.want)
		}
	}
}

// So do a 415 that quotes a long Content-Type and a 404 that quotes a
// long path.
func TestOtherRefusalsQuoteBoundedly(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	for _, rec := range []*httptest.ResponseRecorder{
		s.do(http.MethodPost, "/v1/spend", "text/"+strings.Repeat("x", 100_000), `{}`),
		s.do(http.MethodGet, "/v1/"+strings.Repeat("y", 100_000), "", ""),
	} {
		e := decode[wire.ErrorResponse](t, rec)
		if rec.Code < 400 || rec.Body.Len() > 2048 || !strings.HasSuffix(e.Error.Message, " bytes, cut)") {
			t.Errorf("%d, %d bytes, message %.80q…; want a refusal with a cut message", rec.Code, rec.Body.Len(), e.Error.Message)
		}
	}
}
