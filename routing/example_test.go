package routing_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

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

// A signed answer serves the device it was given to, until it expires.
func ExampleVerifyFor() {
	pub, priv, _ := ed25519.GenerateKey(nil)
	issued := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	a := routing.Answer{Primary: "a1.example.com", Backups: []string{"b1.example.com"}, TTLSeconds: 3600, Rule: "region:east"}
	body, _ := routing.Sign(a.Bind("device-1", issued), priv) // what veer control answers
	keys := []ed25519.PublicKey{pub}

	got, err := routing.VerifyFor(body, keys, "device-1", issued.Add(time.Minute))
	fmt.Println(got.Primary, err)
	_, err = routing.VerifyFor(body, keys, "device-2", issued.Add(time.Minute))
	fmt.Println(errors.Is(err, routing.ErrOtherDevice))
	_, err = routing.VerifyFor(body, keys, "device-1", issued.Add(2*time.Hour))
	fmt.Println(errors.Is(err, routing.ErrExpired))
	// Output:
	// a1.example.com <nil>
	// true
	// true
}
