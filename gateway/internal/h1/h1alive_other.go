//go:build !unix

package h1

// peeker is unused here.
type peeker struct{}

// alive cannot peek without blocking here; it sees only bytes already
// buffered. The retry rules of h1Client.roundTripUntil cover an idle
// connection the backend closed.
func (pc *h1Conn) alive() bool { return pc.br.Buffered() == 0 }

// flush writes the buffered request; the unix build may also wait for the
// answer in the same raw read.
func (pc *h1Conn) flush(late, unwritten bool) error { return pc.bw.Flush() }
