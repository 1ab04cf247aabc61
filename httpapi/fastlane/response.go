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
	body              []byte
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
	w.body = w.body[:0]
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
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.declared >= 0 && w.written > w.declared {
		return 0, http.ErrContentLength
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// encodeFields encodes the handler's header in name order, each value on
// a line of its own with line breaks turned to spaces, leaving out what
// net/http leaves out: names that are not tokens, the body's framing on
// an answer that has no body, and Transfer-Encoding (the lane always
// knows the length, and sends it). Connection is left to appendAnswer.
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
	if bodyAllowed(w.status) {
		// A HEAD's handler that wrote nothing may not know the length of
		// the body a GET would get: no length is better than a wrong one.
		if !w.hasLength && (!w.head || len(w.body) > 0) {
			out = append(out, "Content-Length: "...)
			out = strconv.AppendInt(out, int64(len(w.body)), 10)
			out = append(out, "\r\n"...)
		}
		if !w.hasType && !w.hasEncoding && len(w.body) > 0 {
			out = append(out, "Content-Type: "...)
			out = append(out, http.DetectContentType(w.body)...)
			out = append(out, "\r\n"...)
		}
	}
	if w.closeAfter && !hasToken(strings.Join(w.connection, ","), "close") {
		out = append(out, "Connection: close\r\n"...)
	} else {
		for _, v := range w.connection {
			out = append(out, "Connection: "...)
			out = appendFieldValue(out, v)
			out = append(out, "\r\n"...)
		}
	}
	out = append(out, "\r\n"...)
	if !w.head {
		out = append(out, w.body...)
	}
	return out
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

// hasToken reports whether the comma-separated list v holds token, in any
// case.
func hasToken(v, token string) bool {
	for part := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.Trim(part, " \t"), token) {
			return true
		}
	}
	return false
}
