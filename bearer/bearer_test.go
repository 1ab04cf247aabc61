package bearer_test

import (
	"errors"
	"testing"

	"github.com/limiter-dev/limiter/bearer"
)

func toks(s ...string) [][]byte {
	var out [][]byte
	for _, t := range s {
		out = append(out, []byte(t))
	}
	return out
}

// Who may call what, for every way the two sets can be filled.
func TestAllows(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		api, admin           []string
		need                 bearer.Access
		presented            string
		want, required, only bool
	}{
		{"no tokens: API calls open", nil, nil, bearer.API, "", true, false, false},
		{"no tokens: admin calls open", nil, nil, bearer.Admin, "", true, false, false},
		{"API tokens: API call with one", []string{"a"}, nil, bearer.API, "a", true, true, false},
		{"API tokens: API call with a wrong one", []string{"a"}, nil, bearer.API, "b", false, true, false},
		{"API tokens only: admin call takes an API token", []string{"a"}, nil, bearer.Admin, "a", true, true, false},
		{"admin tokens only: API calls stay open", nil, []string{"z"}, bearer.API, "", true, false, false},
		{"both: admin call refuses an API token", []string{"a"}, []string{"z"}, bearer.Admin, "a", false, true, true},
		{"both: admin call takes an admin token", []string{"a"}, []string{"z"}, bearer.Admin, "z", true, true, true},
		{"both: API call takes an admin token", []string{"a"}, []string{"z"}, bearer.API, "z", true, true, false},
		{"both: an empty token is refused", []string{"a"}, []string{"z"}, bearer.API, "", false, true, false},
	} {
		ts := bearer.NewTokens(toks(tc.api...), toks(tc.admin...))
		if got := ts.Allows(tc.need, []byte(tc.presented)); got != tc.want {
			t.Errorf("%s: Allows = %v, want %v", tc.name, got, tc.want)
		}
		if got := ts.Required(tc.need); got != tc.required {
			t.Errorf("%s: Required = %v, want %v", tc.name, got, tc.required)
		}
		if got := ts.AdminOnly(tc.need); got != tc.only {
			t.Errorf("%s: AdminOnly = %v, want %v", tc.name, got, tc.only)
		}
	}
}

// A reload may change the tokens but not whether a set has any.
func TestReplace(t *testing.T) {
	ts := bearer.NewTokens(toks("old"), nil)
	if err := ts.Replace(toks("new"), nil); err != nil {
		t.Fatal(err)
	}
	if ts.Allows(bearer.API, []byte("old")) || !ts.Allows(bearer.API, []byte("new")) {
		t.Fatal("Replace did not revoke the old token")
	}
	if err := ts.Replace(nil, nil); !errors.Is(err, bearer.ErrSetEmptiness) {
		t.Fatalf("emptying the API set: %v", err)
	}
	if err := ts.Replace(toks("new"), toks("admin")); !errors.Is(err, bearer.ErrSetEmptiness) {
		t.Fatalf("filling the admin set: %v", err)
	}
}

func TestFromAuthorization(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer ": "", "Bearer    ": "", "": ""} {
		got, ok := bearer.FromAuthorization(in)
		if string(got) != want || ok != (want != "") {
			t.Errorf("FromAuthorization(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
