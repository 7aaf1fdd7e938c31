package h1

import (
	"bytes"
	"strconv"
)

// framer follows the message framing of an HTTP/1.x request stream, the
// bytes a client sends, exactly as net/http's server will read them: where
// each request head ends, how long its body is (Content-Length, or chunked
// with a trailer section), where the next request starts. It exists to
// refuse what net/http would otherwise repair silently: a request with
// both Content-Length and Transfer-Encoding (net/http drops the
// Content-Length), several Content-Length fields (net/http folds identical
// ones), or Transfer-Encoding on HTTP/1.0 (net/http ignores it and reads
// by Content-Length). A proxy that repairs such a request agrees with
// itself, but a server behind or beside it may not: the classic request
// smuggling set-up (RFC 9112 §11.2).
//
// The framer holds no bytes: advance is handed the stream in pieces and
// says how many are approved. A head (and a trailer section) is approved
// only once complete, so the caller holds it back meanwhile; everything
// else streams. The rules mirror net/http 1.26 (FuzzFraming checks them):
// lines end in LF with an optional CR before it, a line starting with a
// space or tab continues the previous field, field names compare without
// case, up to four CR/LF bytes after a POST are skipped, chunk lines must
// end in CRLF, and a trailer section must show a CRLFCRLF within 4096
// bytes.
type framer struct {
	maxHead int // hold a head up to this many bytes; beyond, net/http answers 431

	st       fstate
	lastPOST bool  // the previous request was a POST: skip up to 4 CR/LF
	sec      int   // held section: bytes of it already scanned (a line start)
	remain   int64 // Content-Length body bytes left
	chunk    uint64
	digits   int   // hex digits of the chunk-size line
	lineLen  int   // length of the chunk-size line so far
	excess   int64 // net/http's non-data overhead count for chunked bodies
	post     bool  // the current request is a POST
	upgrade  bool  // the current request asks for another protocol: fAwait after it
	why      string
	approved int64 // stream bytes approved so far

	onEnd func(end int64) // tests: called with the stream offset where a request ends
}

type fstate uint8

const (
	fHead        fstate = iota // at (or inside) a request head: held
	fBody                      // Content-Length body
	fChunkSize                 // chunk-size hex digits
	fChunkOWS                  // whitespace after the digits
	fChunkExt                  // chunk extension, ignored up to CR
	fChunkLF                   // LF ending a chunk-size line
	fChunkData                 // chunk data
	fChunkCR                   // CR after chunk data
	fChunkDataLF               // LF after chunk data
	fTrailer                   // trailer section: held
	fAwait                     // after an Upgrade or CONNECT request: nothing delivered until net/http hijacks or reads on
	fOpen                      // transparent: hijacked, h2c, or a head too long to follow
	fDead                      // refused or malformed: nothing more is delivered
)

// result of advance.
type fresult uint8

const (
	fOK        fresult = iota // every byte approved
	fHold                     // b[n:] starts a section that is not complete: hold it, call again with more
	fRefuse                   // ambiguous framing: b[:n] approved, the rest must never reach net/http
	fMalformed                // net/http will refuse this itself: everything approved, then end the stream
)

const (
	chunkLineMax  = 4096 // net/http reads a chunk-size line within its 4 KiB bufio buffer
	trailerWindow = 4096 // net/http looks for the trailer's CRLFCRLF within its buffer
	headSlack     = 8192 // net/http may read a head 4096 bytes over MaxHeaderBytes, plus one bufio fill before the limit
)

func newFramer(maxHeaderBytes int) framer {
	return framer{maxHead: maxHeaderBytes + headSlack}
}

// open reports whether the stream is no longer followed.
func (f *framer) open() bool { return f.st == fOpen }

// advance consumes b. When the framer is inside a held section (a head or
// a trailer) b must start at that section's first byte, i.e. with the bytes
// held back by the previous call.
func (f *framer) advance(b []byte) (n int, r fresult) {
	for n < len(b) {
		switch f.st {
		case fOpen:
			f.approved += int64(len(b) - n)
			return len(b), fOK
		case fAwait:
			return n, fHold
		case fDead:
			return len(b), fMalformed
		case fHead, fTrailer:
			m, r := f.section(b[n:])
			f.approved += int64(m)
			n += m
			if r == fOK && f.st == fBody && f.remain == 0 {
				f.end() // a request without a body, or the end of a trailer
			}
			if r != fOK {
				if r == fMalformed {
					f.approved += int64(len(b) - n)
					return len(b), r
				}
				return n, r
			}
		case fBody:
			k := int64(len(b) - n)
			if k > f.remain {
				k = f.remain
			}
			n += int(k)
			f.approved += k
			f.remain -= k
			if f.remain == 0 {
				f.end()
			}
		case fChunkData:
			k := uint64(len(b) - n)
			if k > f.chunk {
				k = f.chunk
			}
			n += int(k)
			f.approved += int64(k)
			f.chunk -= k
			if f.chunk == 0 {
				f.st = fChunkCR
			}
		default:
			if !f.chunkByte(b[n]) {
				f.st = fDead
				f.approved += int64(len(b) - n)
				return len(b), fMalformed
			}
			n++
			f.approved++
		}
	}
	return n, fOK
}

func (f *framer) end() { // a request is complete: the next byte starts a head
	f.st, f.sec, f.lastPOST = fHead, 0, f.post
	if f.upgrade {
		f.st = fAwait
	}
	if f.onEnd != nil {
		f.onEnd(f.approved)
	}
}

// chunkByte steps the chunk-size line and the CRLF after chunk data, as
// net/http's chunked reader parses them; false: net/http will fail here.
func (f *framer) chunkByte(c byte) bool {
	switch f.st {
	case fChunkCR:
		f.st = fChunkDataLF
		return c == '\r'
	case fChunkDataLF:
		f.st, f.chunk, f.digits, f.lineLen = fChunkSize, 0, 0, 0
		return c == '\n'
	}
	f.lineLen++
	if f.lineLen > chunkLineMax {
		return false
	}
	switch f.st {
	case fChunkSize:
		if d, ok := unhex(c); ok {
			if f.digits == 16 {
				return false
			}
			f.digits++
			f.chunk = f.chunk<<4 | uint64(d)
			return true
		}
		if f.digits == 0 {
			return false
		}
		switch c {
		case ';':
			f.st = fChunkExt
		case ' ', '\t':
			f.st = fChunkOWS
		case '\r':
			f.st = fChunkLF
		default:
			return false
		}
	case fChunkOWS:
		switch c {
		case ' ', '\t':
		case '\r':
			f.st = fChunkLF
		default:
			return false // "5 x" and "5 ;x" do not parse in net/http
		}
	case fChunkExt:
		switch c {
		case '\r':
			f.st = fChunkLF
		case '\n':
			return false
		}
	case fChunkLF:
		if c != '\n' {
			return false
		}
		// net/http: excess += line+CRLF; excess -= 16 + 2n; at most 16 KiB.
		f.excess += int64(f.lineLen)
		f.excess -= 16 + 2*int64(f.chunk)
		f.excess = max(f.excess, 0)
		if f.excess > 16*1024 {
			return false
		}
		if f.chunk == 0 {
			f.st, f.sec = fTrailer, 0
		} else {
			f.st = fChunkData
		}
	}
	return true
}

// section looks for the end of the held head or trailer that b starts
// with. It returns the bytes approved (the whole section once complete).
func (f *framer) section(b []byte) (int, fresult) {
	if f.st == fTrailer {
		return f.trailer(b)
	}
	skip := 0
	if f.lastPOST {
		// net/http: Peek(4), then discard the leading CR/LF among them.
		if len(b) < 4 {
			return 0, fHold
		}
		for skip < 4 && (b[skip] == '\r' || b[skip] == '\n') {
			skip++
		}
	}
	start := max(f.sec, skip)
	end := -1
	for i := bytes.IndexByte(b[start:], '\n'); i >= 0; i = bytes.IndexByte(b[start:], '\n') {
		line := b[start : start+i]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		start += i + 1
		if len(line) == 0 {
			end = start
			break
		}
	}
	if end < 0 {
		f.sec = start
		if len(b) > f.maxHead {
			// Too long for net/http, which answers 431 and closes.
			f.st = fOpen
			return len(b), fOK
		}
		return 0, fHold
	}
	return f.head(b[:end], skip)
}

// trailer finds the end of a trailer section: its first empty line, and
// net/http also wants a CRLFCRLF to end within trailerWindow bytes of its
// start (seeUpcomingDoubleCRLF), which may lie after the section.
func (f *framer) trailer(b []byte) (int, fresult) {
	if len(b) < 2 {
		return 0, fHold
	}
	if b[0] == '\r' && b[1] == '\n' {
		f.st, f.remain = fBody, 0
		return 2, fOK
	}
	w := b[:min(len(b), trailerWindow)]
	if !bytes.Contains(w, []byte("\r\n\r\n")) {
		if len(b) >= trailerWindow {
			f.st = fDead
			return len(b), fMalformed
		}
		return 0, fHold
	}
	start := 0
	for i := bytes.IndexByte(b, '\n'); i >= 0; i = bytes.IndexByte(b[start:], '\n') {
		line := b[start : start+i]
		start += i + 1
		if len(line) == 0 || len(line) == 1 && line[0] == '\r' {
			f.st, f.remain = fBody, 0
			return start, fOK
		}
	}
	return 0, fHold // unreachable: a CRLFCRLF holds an empty line
}

// head decides a complete head h (skip leading CR/LF bytes, then the
// request line, the fields and the empty line).
func (f *framer) head(h []byte, skip int) (int, fresult) {
	lines := h[skip:]
	reqLine, lines := nextLine(lines)
	method, rest, ok1 := bytes.Cut(reqLine, []byte(" "))
	uri, proto, ok2 := bytes.Cut(rest, []byte(" "))
	major, minor, ok := parseVersion(proto)
	if !ok1 || !ok2 || !ok {
		return f.malformed(len(h))
	}
	if major != 1 {
		if major == 2 && minor == 0 && string(method) == "PRI" && string(uri) == "*" {
			f.st = fOpen // prior-knowledge HTTP/2 preface
			return len(h), fOK
		}
		return f.malformed(len(h)) // 505 from net/http
	}
	var nCL, nTE int
	var cl, te []byte
	upgrade := false
	if len(lines) > 0 && (lines[0] == ' ' || lines[0] == '\t') {
		return f.malformed(len(h))
	}
	for len(lines) > 0 {
		var field []byte
		field, lines = nextField(lines)
		if len(field) == 0 {
			break
		}
		name, value, ok := bytes.Cut(field, []byte(":"))
		if !ok {
			return f.malformed(len(h))
		}
		switch {
		case asciiEqualFold(name, "content-length"):
			nCL++
			cl = value
		case asciiEqualFold(name, "transfer-encoding"):
			nTE++
			te = value
		case asciiEqualFold(name, "upgrade"):
			upgrade = true
		}
	}
	switch {
	case nCL > 1:
		return f.refuse("more than one Content-Length")
	case nTE > 0 && nCL > 0:
		return f.refuse("both Transfer-Encoding and Content-Length")
	case nTE > 0 && minor == 0:
		return f.refuse("Transfer-Encoding on HTTP/1.0")
	}
	f.post = string(method) == "POST"
	f.upgrade = upgrade || string(method) == "CONNECT" // the bytes after it may be another protocol
	switch {
	case nTE > 0:
		if nTE > 1 || !asciiEqualFold(trimOWS(te, true, false), "chunked") {
			return f.malformed(len(h)) // 501 from net/http
		}
		f.st, f.chunk, f.digits, f.lineLen, f.excess = fChunkSize, 0, 0, 0, 0
	case nCL == 1:
		n, err := strconv.ParseUint(string(bytes.Trim(cl, " \t\r\n")), 10, 63)
		if err != nil {
			return f.malformed(len(h))
		}
		f.st, f.remain = fBody, int64(n)
	default:
		f.st, f.remain = fBody, 0
	}
	return len(h), fOK
}

func (f *framer) malformed(n int) (int, fresult) { f.st = fDead; return n, fMalformed }

func (f *framer) refuse(why string) (int, fresult) {
	f.st, f.why = fDead, why
	return 0, fRefuse
}
