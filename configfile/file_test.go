package configfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReadFilePresence(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content *string // nil: no file
		want    Presence
	}{
		{"no file", nil, Absent},
		{"no bytes", ptr(""), Blank},
		{"white space", ptr("\n  \n\n"), Blank},
		{"comments alone", ptr("# rules come later\n  # indented\n"), Blank},
		{"empty list", ptr("[]\n"), Written},
		{"empty mapping", ptr("{}"), Written},
		{"null", ptr("null\n"), Blank},
		{"tilde", ptr("~\n"), Blank},
		{"a bare document start", ptr("---\n"), Blank},
		{"null after a comment", ptr("# c\nnull\n"), Blank},
		{"null, then another document", ptr("~\n---\n[]\n"), Written},
		{"rules", ptr("- domain: edge\n"), Written},
		{"a syntax error", ptr("[unclosed\n"), Written},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".yaml")
			if tt.content != nil {
				if err := os.WriteFile(path, []byte(*tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f, err := ReadFile(path)
			if err != nil || f.Presence != tt.want || f.Path != path {
				t.Errorf("ReadFile = %+v, %v; want %v", f, err, tt.want)
			}
		})
	}
	if f, err := ReadFile(""); err != nil || f.Presence != Absent {
		t.Errorf("ReadFile(\"\") = %+v, %v; want Absent", f, err)
	}
	if os.Geteuid() != 0 { // root reads every file
		unreadable := filepath.Join(dir, "unreadable.yaml")
		if err := os.WriteFile(unreadable, []byte("[]"), 0o000); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(unreadable); err == nil {
			t.Error("an unreadable file read without error")
		}
	}
	if _, err := ReadFile(dir); err == nil {
		t.Error("a directory read as a file without error")
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Reading a FIFO would block until a writer came: the test would hang.
	if _, err := ReadRegularFile(fifo); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadRegularFile of a FIFO: %v, want ErrNotRegular", err)
	}
	if f, err := ReadRegularFile(filepath.Join(dir, "empty list.yaml")); err != nil || f.Presence != Written {
		t.Errorf("ReadRegularFile of a file: %+v, %v", f, err)
	}
}

func ptr(s string) *string { return &s }

// The forward-auth file's explicit empty forms all mean no rules.
func TestForwardAuthEmptyForms(t *testing.T) {
	for _, form := range []string{"{}", "rules: {}", "[]", "trusted_proxies: []\nrules: {}\n"} {
		rules, err := ParseForwardAuth("forward-auth.yaml", []byte(form), nil)
		if err != nil || rules.Count() != 0 {
			t.Errorf("%q: %v, %d rules; want no rules", form, err, rules.Count())
		}
	}
	if _, err := ParseForwardAuth("forward-auth.yaml", []byte("[{rules: {}}]"), nil); err == nil {
		t.Error("a non-empty list loaded")
	}
	// No rules, but none of the empty forms: a file cut short after its
	// proxies, or rules left null.
	for form, omits := range map[string]bool{
		"trusted_proxies: [10.0.0.0/8]\n": true, "rules:\n": true, "rules: ~\ntrusted_proxies: []\n": true,
		"{}": false, "[]": false, "rules: {}\n": false, "trusted_proxies: []\nrules: {}\n": false, "": false,
		"rules:\n  api: {limits: [{limit: L, id: client_ip}]}\n": false,
	} {
		if got := ForwardAuthOmitsRules([]byte(form)); got != omits {
			t.Errorf("ForwardAuthOmitsRules(%q) = %v, want %v", form, got, omits)
		}
	}
}
