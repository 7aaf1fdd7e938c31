package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/control/console"
)

// The console wraps the admin API's handler; control.Options.UI takes
// Mount, so that `veer control` serves it at /ui/ on the admin listener.
func ExampleConsole_Mount() {
	con, err := console.New(console.Config{}, console.Options{})
	if err != nil {
		panic(err)
	}
	_ = control.Options{UI: con.Mount} // how veer control wires it

	api := http.NotFoundHandler() // stands in for the admin API here
	h := con.Mount(api, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/", nil))
	fmt.Println(rec.Code, rec.Header().Get("X-Frame-Options"))

	rec = httptest.NewRecorder()
	req := httptest.NewRequest("PUT", "/v1/admin/docs/routing/table", nil)
	req.Header.Set("Origin", "https://evil.example")
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// 200 DENY
	// 403
}
