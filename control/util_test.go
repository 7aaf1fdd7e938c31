package control_test

import (
	"io"
	"net/http"
	"strings"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
func repeat(s string, n int) string    { return strings.Repeat(s, n) }
func readAll(r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}
