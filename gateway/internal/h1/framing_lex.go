package h1

import "bytes"

// The lexical pieces of HTTP/1.x that the framer reads, each as net/http
// (net/textproto) reads it.

// nextLine returns b's first line without its LF and optional CR.
func nextLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	line, rest = b[:i], b[i+1:]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, rest
}

// nextField returns the next header field with its continuation lines
// folded in as net/http's textproto does (each joined by one space, each
// piece trimmed of spaces and tabs); empty at the end of the head.
func nextField(b []byte) (field, rest []byte) {
	field, rest = nextLine(b)
	if len(rest) == 0 || rest[0] != ' ' && rest[0] != '\t' {
		return trimOWS(field, true, true), rest
	}
	folded := append([]byte(nil), trimOWS(field, true, true)...)
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		var cont []byte
		cont, rest = nextLine(rest)
		folded = append(append(folded, ' '), trimOWS(cont, true, true)...)
	}
	return folded, rest
}

// trimOWS removes spaces and tabs from b's start and/or end.
func trimOWS(b []byte, start, end bool) []byte {
	for start && len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for end && len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseVersion is net/http's ParseHTTPVersion.
func parseVersion(v []byte) (major, minor int, ok bool) {
	if len(v) != len("HTTP/X.Y") || string(v[:5]) != "HTTP/" || v[6] != '.' ||
		v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9' {
		return 0, 0, false
	}
	return int(v[5] - '0'), int(v[7] - '0'), true
}

// asciiEqualFold compares b with the lower-case ASCII string s.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
