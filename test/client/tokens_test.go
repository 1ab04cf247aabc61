package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/limiter-dev/limiter/client"
)

// Every call sends the API token; the admin calls send the admin token
// when the client has one, else the API token. A token the service does
// not take is a 401 *Error with code unauthorized.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	alice := client.Transaction{Limit: "Logins", ID: "alice"}
	type call struct {
		name  string
		admin bool
		run   func(c *client.Client) error
	}
	calls := []call{
		{"spend", false, func(c *client.Client) error { _, err := c.Spend(ctx, alice); return err }},
		{"check", false, func(c *client.Client) error { _, err := c.Check(ctx, alice); return err }},
		{"refund", false, func(c *client.Client) error { _, err := c.Refund(ctx, alice); return err }},
		{"limits", false, func(c *client.Client) error { _, err := c.Limits(ctx); return err }},
		{"subscriber", false, func(c *client.Client) error { _, err := c.Subscriber(ctx, "Logins", "alice"); return err }},
		{"box has", false, func(c *client.Client) error { _, _, err := c.PenaltyBoxHas(ctx, "Hits", "192.0.2.1"); return err }},
		{"reset", true, func(c *client.Client) error { _, err := c.Reset(ctx, alice); return err }},
		{"reload", true, func(c *client.Client) error { return c.Reload(ctx) }},
		{"sync", true, func(c *client.Client) error { _, err := c.Sync(ctx); return err }},
		{"reload status", true, func(c *client.Client) error { _, err := c.ReloadStatus(ctx); return err }},
		{"top denied", true, func(c *client.Client) error { _, err := c.TopDenied(ctx, "", 0); return err }},
		{"boxes", true, func(c *client.Client) error { _, err := c.Boxes(ctx, "Lockout", ""); return err }},
		{"box remove", true, func(c *client.Client) error { _, err := c.PenaltyBoxRemove(ctx, "Hits", "192.0.2.1"); return err }},
	}
	tests := []struct {
		name                string
		server              serverOptions
		api, admin          string
		wantAPI, wantAdmin  string // Authorization sent; "" none
		apiOK, adminCallsOK bool
	}{
		{"no tokens anywhere", serverOptions{}, "", "", "", "", true, true},
		{"the API token on every call when the client has no admin token",
			serverOptions{apiTokens: []string{"api-1"}}, "api-1", "", "Bearer api-1", "Bearer api-1", true, true},
		{"the admin token on admin calls",
			serverOptions{apiTokens: []string{"api-1"}, adminTokens: []string{"root-1"}}, "api-1", "root-1", "Bearer api-1", "Bearer root-1", true, true},
		{"an API token alone cannot reset when the service has admin tokens",
			serverOptions{apiTokens: []string{"api-1"}, adminTokens: []string{"root-1"}}, "api-1", "", "Bearer api-1", "Bearer api-1", true, false},
		{"a wrong API token", serverOptions{apiTokens: []string{"api-1"}}, "api-2", "", "Bearer api-2", "Bearer api-2", false, false},
		{"no token where one is needed", serverOptions{apiTokens: []string{"api-1"}}, "", "", "", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			tt.server.wrap = rec.wrap
			tt.server.reload = func() error { return nil }
			s := newServer(t, tt.server)
			c := newClient(t, s, client.Options{APIToken: tt.api, AdminToken: tt.admin})
			for _, cl := range calls {
				rec.reset()
				err := cl.run(c)
				want, ok := tt.wantAPI, tt.apiOK
				if cl.admin {
					want, ok = tt.wantAdmin, tt.adminCallsOK
				}
				if sent := rec.all(); len(sent) != 1 || sent[0].auth != want {
					t.Errorf("%s sent %+v, want one request with Authorization %q", cl.name, sent, want)
				}
				if ok {
					if err != nil {
						t.Errorf("%s: %v", cl.name, err)
					}
					continue
				}
				var e *client.Error
				if !errors.As(err, &e) || e.StatusCode != 401 || e.Code != client.CodeUnauthorized || e.Message == "" {
					t.Errorf("%s: %v, want a 401 *Error with code unauthorized", cl.name, err)
				}
			}
		})
	}
}

// A base URL with a path prefix keeps it: a proxy may serve the API under
// one.
func TestBaseURLWithAPrefix(t *testing.T) {
	prefixed := newServer(t, serverOptions{wrap: func(api http.Handler) http.Handler {
		return http.StripPrefix("/limiter", api)
	}})
	c, err := client.New(client.Options{BaseURL: prefixed.URL + "/limiter/"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d, err := c.Spend(context.Background(), client.Transaction{Limit: "Logins", ID: "x"}); err != nil || !d.Allowed {
		t.Fatalf("through a prefix: %+v %v", d, err)
	}
}
