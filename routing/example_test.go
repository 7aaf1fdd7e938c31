package routing_test

import (
	"context"
	"fmt"

	"github.com/veerhq/veer/routing"
)

// The routing service is unreachable and nothing was persisted: the app
// uses the default ("wap") domain.
func ExampleBootstrap() {
	cfg := routing.Config{
		URL:           "http://127.0.0.1:1/v1/route", // nothing listens here
		PublicKeys:    []string{"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="},
		DefaultDomain: "wap.example.com",
	}
	res, err := routing.Bootstrap(context.Background(), cfg, routing.Request{DeviceID: "d-42"}, routing.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Source, res.Domains())
	// Output: default [wap.example.com]
}
