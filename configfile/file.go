package configfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"gopkg.in/yaml.v3"
)

// Presence is what a read found at a configuration file's path. A reload
// compares it with what the last load found: a file whose rules are in
// use and that is now absent or blank is far more often a mistake (a
// mistyped move, a write caught half-way, a ConfigMap key gone) than an
// operator's wish to remove every rule, which each file says explicitly
// with its empty form ([] or {}).
type Presence uint8

const (
	// Absent: no file at the path, or no path.
	Absent Presence = iota
	// Blank: a file without a YAML document: no bytes, or white space
	// and comments alone, as a file being rewritten in place is for a
	// moment; or one whose document is null ("~", "null", a bare
	// "---"), which states no form either: a template's rendering of an
	// unset value, more likely than a wish to remove every rule.
	Blank
	// Written: a file with a document, an explicit empty form included.
	Written
)

func (p Presence) String() string {
	switch p {
	case Absent:
		return "absent"
	case Blank:
		return "blank"
	}
	return "written"
}

// File is a configuration file as one read found it. A caller reads each
// file once, with ReadFile, and hands Data to the Parse functions, so that
// what it judged before parsing (a reload refuses a file that went
// missing) is what is parsed.
type File struct {
	Path     string
	Data     []byte
	Presence Presence
}

// ErrNotRegular refuses a path that holds something other than a file,
// for ReadRegularFile.
var ErrNotRegular = errors.New("not a regular file")

// ReadFile reads the file at path. A missing file (or an empty path) is
// Absent, not an error; any other failure to read it is an error naming
// the path. A pipe is read as a file (check-config --defaults <(...)).
func ReadFile(path string) (File, error) {
	return readWith(path, os.ReadFile)
}

// ReadRegularFile is ReadFile refusing, with ErrNotRegular, a path that
// holds anything but a regular file (ReadRegular): a reload reads with it.
func ReadRegularFile(path string) (File, error) {
	return readWith(path, ReadRegular)
}

func readWith(path string, read func(string) ([]byte, error)) (File, error) {
	f := File{Path: path}
	if path == "" {
		return f, nil
	}
	data, err := read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("reading %s: %w", path, err)
	}
	f.Data = data
	f.Presence = Blank
	if hasDocument(data) {
		f.Presence = Written
	}
	return f, nil
}

// ReadRegular reads the file at path, refusing with ErrNotRegular a path
// that holds anything but a regular file. A reload reads every file so: a
// FIFO left at a path would block the read, and every reload after it,
// until something wrote to it. The path is opened without blocking and
// the handle so opened is judged, so that nothing put at the path between
// a look and the read can block it either.
func ReadRegular(path string) ([]byte, error) {
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, info.Mode().Type())}
	}
	return io.ReadAll(file)
}

// hasDocument reports whether data holds a YAML document, parsable or
// not, other than null: anything but white space, comments and a null
// alone. A syntax error counts as a document, for the parser to report
// at its line.
func hasDocument(data []byte) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case err == io.EOF:
		return false
	case err != nil:
		return true
	}
	if len(doc.Content) != 1 || !isNull(doc.Content[0]) {
		return true
	}
	// A null first document followed by another is a file of several
	// documents, for the parser to refuse.
	return dec.Decode(&doc) != io.EOF
}
