package tiergrpc_test

import (
	"context"
	"fmt"

	"google.golang.org/grpc/metadata"

	"github.com/veerhq/veer/tier"
	"github.com/veerhq/veer/tier/tiergrpc"
)

func ExampleOutbound() {
	// A handler serving a critical request from "app" calls the next hop.
	in := tiergrpc.Inbound(context.Background(), metadata.Pairs(tier.MetadataKey, "critical", tier.CallerMetadataKey, "app"))
	out := tiergrpc.Outbound(in, "checkout")
	md, _ := metadata.FromOutgoingContext(out)
	fmt.Println(md.Get(tier.MetadataKey), md.Get(tier.CallerMetadataKey))
	// Output: [critical] [checkout]
}
