package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxQueryParam bounds a query parameter's value as an error message
// repeats it.
const maxQueryParam = 64

// queryParams reads r's query for an admin GET: only the names in known,
// each at most once. Anything else is a 400 that names the problem, so a
// misspelt parameter is not silently ignored.
func queryParams(r *http.Request, known ...string) (map[string]string, *apiError) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest(codeInvalidArgument, "the query string is malformed: "+err.Error(), -1)
	}
	out := make(map[string]string, len(q))
	for name, values := range q {
		ok := false
		for _, k := range known {
			ok = ok || name == k
		}
		if !ok {
			takes := "no query parameters"
			if len(known) > 0 {
				takes = strings.Join(known, ", ")
			}
			return nil, badRequest(codeInvalidArgument, "unknown query parameter "+quoteShort(name)+"; this path takes "+takes, -1)
		}
		if len(values) != 1 {
			return nil, badRequest(codeInvalidArgument, "query parameter "+name+" given more than once", -1)
		}
		out[name] = values[0]
	}
	return out, nil
}

// quoteShort quotes a client's text for a message, cut to maxQueryParam
// bytes.
func quoteShort(s string) string {
	return strconv.Quote(shorten(s, maxQueryParam))
}
