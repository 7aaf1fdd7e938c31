package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/obs"
)

// A gateway in front of two clusters: the first one's only backend refuses
// connections, so the request is retried on the second cluster.
func Example() {
	west := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "west answered %s %s", r.Method, r.URL.Path)
	}))
	defer west.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there any more

	yaml := fmt.Sprintf(`
routes:
  - {name: api, path_prefix: /api, clusters: [{name: east}, {name: west}]}
clusters:
  - {name: east, backends: [{address: %q}]}
  - {name: west, backends: [{address: %q}]}
`, dead.Listener.Addr().String(), west.Listener.Addr().String())
	var cfg gateway.Config
	if err := config.Parse([]byte(yaml), "gateway.yaml", &cfg); err != nil {
		fmt.Println(err)
		return
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()

	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://example.com/api/users", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	fmt.Println(rec.Code, string(body))
	// Output: 200 west answered GET /api/users
}

// An invalid config names the file, the line and the field.
func ExampleConfig_Validate() {
	var cfg gateway.Config
	err := config.Parse([]byte(`
clusters:
  - name: east
    backends: [{address: "10.0.0.1:80"}]
routes:
  - name: api
    clusters: [{name: west}]
`), "gateway.yaml", &cfg)
	fmt.Println(err)
	// Output: gateway.yaml:7: routes[0].clusters[0].name: no cluster named "west"
}
