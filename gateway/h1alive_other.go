//go:build !unix

package gateway

// alive cannot peek without blocking here: the retry rules of
// h1Client.RoundTrip cover an idle connection the backend closed.
func (pc *h1Conn) alive() bool { return true }
