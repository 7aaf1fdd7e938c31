// Package test holds cross-package scenario tests with real sockets: the
// parts of veer composed the way a service owner or an app would compose
// them. It has no non-test code besides this comment.
package test
