package gateway

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// childEnv makes the test binary a backend process (see fault_test.go):
// it serves on the address given and answers with its address.
const childEnv = "VEER_GATEWAY_TEST_BACKEND"

func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("listening", ln.Addr())
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(addr))
		}))
		os.Exit(0)
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
