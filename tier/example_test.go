package tier_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/veerhq/veer/tier"
)

func Example() {
	// An inbound request says how critical it is...
	in := http.Header{}
	in.Set("Veer-Criticality", "critical")
	in.Set("Rpc-Caller", "rider-app")
	ctx := tier.Inbound(context.Background(), in)

	// ...and the service's outbound calls carry it on.
	out := http.Header{}
	tier.SetHeader(out, tier.FromContext(ctx), "trip-service")
	fmt.Println(tier.FromContext(ctx), tier.CallerFromContext(ctx))
	fmt.Println(out.Get("Veer-Criticality"), out.Get("Rpc-Caller"))
	fmt.Println(tier.Sheddable < tier.CriticalPlus)
	// Output:
	// critical rider-app
	// critical trip-service
	// true
}
