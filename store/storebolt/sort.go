package storebolt

import (
	"slices"

	"github.com/veerhq/veer/store"
)

// sortNewestFirst orders changes by revision, newest first.
func sortNewestFirst(cs []store.Change) {
	slices.SortFunc(cs, func(a, b store.Change) int {
		switch {
		case a.Revision > b.Revision:
			return -1
		case a.Revision < b.Revision:
			return 1
		}
		return 0
	})
}
