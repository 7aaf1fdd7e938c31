package store

import "slices"

// sortNewestFirst orders changes by revision, newest first.
func sortNewestFirst(cs []Change) {
	slices.SortFunc(cs, func(a, b Change) int {
		switch {
		case a.Revision > b.Revision:
			return -1
		case a.Revision < b.Revision:
			return 1
		}
		return 0
	})
}
