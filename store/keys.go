package store

// The keys of every document veer keeps in the store, in one place: the
// control plane writes them (its admin API validates each against its
// schema), gateways and the private DNS read them, and each side imports the
// key from here. The schemas the control plane and the DNS share are in
// store/docs; each key says where its schema is.
const (
	// KeyTable holds the routing table (control.Table; the DNS reads its
	// regions when dns/zones has none).
	KeyTable = "routing/table"
	// KeyState holds the sites' and clusters' state (control.State, the
	// playbooks).
	KeyState = "routing/state"
	// KeyEmergency holds the emergency overrides (control.Emergency).
	KeyEmergency = "routing/emergency"
	// KeyWhitelists prefixes the whitelist documents named by routing
	// rules (control.Whitelist).
	KeyWhitelists = "routing/whitelists/"
	// KeyAccess holds the scheduling API's access nodes (docs.Access),
	// read by the control plane's scheduling API and the private DNS.
	KeyAccess = "access/nodes"
	// KeyZones holds the private DNS's zones and region table
	// (dnsserver.Data's shape, access domains without nodes: their nodes
	// come from KeyAccess).
	KeyZones = "dns/zones"

	// KeyGatewayPrefix prefixes every document published to gateways
	// (written by the control plane's admin API, read by
	// gateway.FollowStore).
	KeyGatewayPrefix = "gateway/"
	// KeyGatewayCriticality holds the criticality table (shed.Config's
	// shape, YAML or JSON).
	KeyGatewayCriticality = KeyGatewayPrefix + "criticality"
	// KeyGatewayLimits holds the limits (limit.Config's shape).
	KeyGatewayLimits = KeyGatewayPrefix + "limits"
)
