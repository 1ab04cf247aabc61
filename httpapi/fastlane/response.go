package fastlane

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// responseWriter holds a lane request's answer until its handler returns,
// then appends it to the connection's output as net/http would have sent
// it: the header as it was when the status was written, Date,
// Content-Length and a sniffed Content-Type when the handler set none, and
// Connection: close when the connection ends after it. One per
// connection, reset for every request.
type responseWriter struct {
	header http.Header
	head   bool // the request is a HEAD: the body is counted, not sent
	status int
	// fields is the header as of WriteHeader, already encoded.
	fields []byte
	// Which of the headers the lane adds the handler set itself.
	hasDate, hasLength, hasType, hasEncoding bool
	// connection is the handler's Connection header, sent by appendAnswer.
	connection []string
	// declared is the handler's Content-Length (-1: none), written what
	// its writes added up to, as net/http holds a handler to it.
	declared, written int64
	// te is the handler's Transfer-Encoding, if it set one.
	te   string
	body []byte
	// buffered and chunks follow net/http's buffering of a body: it keeps
	// up to chunkingThreshold bytes, and a body that outgrows that is sent
	// in chunks as the buffer fills, ending where chunks says.
	buffered int
	chunks   []int
	// closeAfter: the connection ends after this answer, which says so
	// (the request or the handler asked for it, or a shutdown is under
	// way); endsUnannounced: it ends without saying so.
	closeAfter, endsUnannounced bool
	// sortedKeys is scratch space for the header's names.
	sortedKeys []string
	// date caches Date's value for the second it was made in.
	date       []byte
	dateSecond int64
}

// reset readies w for the next request.
func (w *responseWriter) reset(head bool) {
	clear(w.header)
	w.head = head
	w.status = 0
	w.fields = w.fields[:0]
	w.hasDate, w.hasLength, w.hasType, w.hasEncoding = false, false, false, false
	w.connection = w.connection[:0]
	w.declared, w.written = -1, 0
	w.te = ""
	w.body = w.body[:0]
	if cap(w.body) > maxKeptBuffer {
		w.body = nil
	}
	w.buffered, w.chunks = 0, w.chunks[:0]
	w.closeAfter, w.endsUnannounced = false, false
}

// Header returns the answer's header; changes after WriteHeader are not
// sent, as with net/http.
func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader sets the status, once. Informational statuses (1xx) are not
// sent: nothing the lane serves asks for them.
func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code)) // as net/http does
	}
	if w.status != 0 || code < 200 {
		return
	}
	w.status = code
	w.encodeFields()
}

// Write adds p to the body, writing the status 200 first if none was.
func (w *responseWriter) Write(p []byte) (int, error) {
	return w.write(p, "", true)
}

// WriteString is Write of a string. Like net/http's, it buffers a long
// string piece by piece, where Write sends a long slice whole: the chunks
// of a long body differ.
func (w *responseWriter) WriteString(s string) (int, error) {
	return w.write(nil, s, false)
}

// write adds p, or s, to the body; whole says that a write longer than
// the room in net/http's buffer goes out as one chunk when the buffer is
// empty (its bufio.Writer's Write), rather than filling it first
// (WriteString).
func (w *responseWriter) write(p []byte, s string, whole bool) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 && len(s) == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	n := len(p) + len(s)
	w.written += int64(n)
	if w.declared >= 0 && w.written > w.declared {
		return 0, http.ErrContentLength
	}
	w.body = append(append(w.body, p...), s...)
	// Where net/http's buffer of chunkingThreshold bytes would have sent
	// a chunk: a write larger than the room left is sent whole when the
	// buffer is empty (whole), else the buffer is filled and sent.
	for rest := n; rest > 0; {
		room := chunkingThreshold - w.buffered
		switch {
		case rest <= room:
			w.buffered += rest
			rest = 0
		case whole && w.buffered == 0:
			rest = 0
			w.chunks = append(w.chunks, len(w.body))
		default:
			rest -= room
			w.buffered = 0
			w.chunks = append(w.chunks, len(w.body)-rest)
		}
	}
	return n, nil
}

// chunkingThreshold is net/http's buffer for a handler's body: a body
// that fits is sent with its length once the handler returns, a longer
// one in chunks as it is written.
const chunkingThreshold = 2048

// encodeFields encodes the handler's header in name order, each value on
// a line of its own with line breaks turned to spaces, leaving out what
// net/http leaves out: names that are not tokens, the body's framing on
// an answer that has no body. Transfer-Encoding and Connection are left to
// appendAnswer.
func (w *responseWriter) encodeFields() {
	keys := w.sortedKeys[:0]
	for k := range w.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.sortedKeys = keys
	noBody := !bodyAllowed(w.status)
	for _, k := range keys {
		if !validName(k) {
			continue
		}
		switch k {
		case "Transfer-Encoding":
			w.te = w.header.Get(k)
			continue
		case "Content-Length":
			if noBody {
				continue
			}
			v, err := strconv.ParseInt(w.header.Get(k), 10, 64)
			if err != nil || v < 0 {
				continue // net/http drops what is not a length
			}
			w.declared = v
			w.hasLength = true
		case "Content-Type":
			if w.status == http.StatusNotModified {
				continue
			}
			w.hasType = true
		case "Content-Encoding":
			w.hasEncoding = w.header.Get(k) != ""
		case "Date":
			w.hasDate = true
		case "Connection":
			// Written by appendAnswer, which knows by then whether the
			// connection ends. Only "close" itself ends it, as in net/http.
			if w.header.Get(k) == "close" {
				w.closeAfter = true
			}
			w.connection = append(w.connection, w.header[k]...)
			continue
		}
		for _, v := range w.header[k] {
			w.fields = append(w.fields, k...)
			w.fields = append(w.fields, ": "...)
			w.fields = appendFieldValue(w.fields, v)
			w.fields = append(w.fields, "\r\n"...)
		}
	}
}

// appendFieldValue appends v with CR and LF turned to spaces, then the
// spaces and tabs around it trimmed, as net/http sends a header value.
func appendFieldValue(b []byte, v string) []byte {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' {
				return ' '
			}
			return r
		}, v)
	}
	return append(b, strings.Trim(v, " \t")...)
}

// appendAnswer appends the whole answer to out. closing says the server
// is shutting down: the connection ends after this answer.
func (w *responseWriter) appendAnswer(out []byte, closing bool) []byte {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if closing {
		w.closeAfter = true
	}
	// A body not the length its header says leaves the connection
	// unable to carry another answer: it ends, unannounced, as net/http
	// finds out only once the header is sent.
	w.endsUnannounced = !w.head && w.declared >= 0 && bodyAllowed(w.status) && w.written != w.declared
	// The body's framing, as net/http chooses it: a length when it knows
	// one (the handler's, or the whole body's when it fitted the buffer
	// and the handler set no Transfer-Encoding), else chunks, or for a
	// Transfer-Encoding of identity, the end of the connection.
	framed := bodyAllowed(w.status) && !w.head
	chunked := framed && !w.hasLength && (w.te != "" && w.te != "identity" || w.te == "" && len(w.chunks) > 0)
	if framed && !w.hasLength && w.te == "identity" {
		w.closeAfter = true
	}
	autoLength := bodyAllowed(w.status) && !w.hasLength && w.te == "" && len(w.chunks) == 0 && (!w.head || len(w.body) > 0)
	out = append(out, "HTTP/1.1 "...)
	out = strconv.AppendInt(out, int64(w.status), 10)
	out = append(out, ' ')
	if text := http.StatusText(w.status); text != "" {
		out = append(out, text...)
	} else {
		out = append(out, "status code "...)
		out = strconv.AppendInt(out, int64(w.status), 10)
	}
	out = append(out, "\r\n"...)
	out = append(out, w.fields...)
	if !w.hasDate {
		out = append(out, "Date: "...)
		out = append(out, w.dateNow()...)
		out = append(out, "\r\n"...)
	}
	if autoLength {
		// A HEAD's handler that wrote nothing may not know the length of
		// the body a GET would get: no length is better than a wrong one.
		out = append(out, "Content-Length: "...)
		out = strconv.AppendInt(out, int64(len(w.body)), 10)
		out = append(out, "\r\n"...)
	}
	if bodyAllowed(w.status) && !w.hasType && !w.hasEncoding && w.te == "" && len(w.body) > 0 {
		out = append(out, "Content-Type: "...)
		out = append(out, http.DetectContentType(w.body)...)
		out = append(out, "\r\n"...)
	}
	if chunked {
		out = append(out, "Transfer-Encoding: chunked\r\n"...)
	}
	if w.closeAfter && !hasToken(w.firstConnection(), "close") {
		out = append(out, "Connection: close\r\n"...)
	} else {
		for _, v := range w.connection {
			out = append(out, "Connection: "...)
			out = appendFieldValue(out, v)
			out = append(out, "\r\n"...)
		}
	}
	out = append(out, "\r\n"...)
	switch {
	case w.head || !bodyAllowed(w.status):
	case chunked:
		from := 0
		for _, end := range append(w.chunks, len(w.body)) {
			if end > from {
				out = strconv.AppendInt(out, int64(end-from), 16)
				out = append(out, "\r\n"...)
				out = append(out, w.body[from:end]...)
				out = append(out, "\r\n"...)
				from = end
			}
		}
		out = append(out, "0\r\n\r\n"...)
	default:
		out = append(out, w.body...)
	}
	return out
}

// firstConnection is the first value of the handler's Connection header,
// the one net/http reads.
func (w *responseWriter) firstConnection() string {
	if len(w.connection) == 0 {
		return ""
	}
	return w.connection[0]
}

// dateNow is the Date header's value for now, made once a second.
func (w *responseWriter) dateNow() []byte {
	now := time.Now()
	if s := now.Unix(); s != w.dateSecond || w.date == nil {
		w.date = now.UTC().AppendFormat(w.date[:0], http.TimeFormat)
		w.dateSecond = s
	}
	return w.date
}

// bodyAllowed reports whether an answer with status may have a body
// (RFC 9110: not 1xx, 204 or 304).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// hasToken reports whether v holds token, in any case, between
// separators (commas, spaces, tabs) or the ends, as net/http reads a
// Connection header.
func hasToken(v, token string) bool {
	for i := 0; i+len(token) <= len(v); i++ {
		if (i == 0 || isTokenSeparator(v[i-1])) &&
			(i+len(token) == len(v) || isTokenSeparator(v[i+len(token)])) &&
			strings.EqualFold(v[i:i+len(token)], token) {
			return true
		}
	}
	return false
}

// isTokenSeparator reports the bytes that end a token in a list.
func isTokenSeparator(b byte) bool { return b == ',' || b == ' ' || b == '\t' }
