package outcome_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/veerhq/veer/outcome"
)

func ExampleClassify() {
	resp := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"3"}}}
	o := outcome.Classify(resp, nil)
	fmt.Println(o.Kind, o.RetryAfter, o.Network())
	// Output: overloaded 3s false
}

func ExampleWriteHTTP() {
	rec := httptest.NewRecorder()
	outcome.WriteHTTP(rec, outcome.Outcome{Kind: outcome.Limited, RetryAfter: 2 * time.Second}, "tenant rate")
	fmt.Println(rec.Code, rec.Header().Get("Retry-After"))
	fmt.Print(rec.Body.String())
	// Output:
	// 429 2
	// {"error":"limited","reason":"tenant rate","retry_after_seconds":2}
}
