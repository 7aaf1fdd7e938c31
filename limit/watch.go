package limit

import (
	"github.com/veerhq/veer/config"
)

// Watch loads the YAML (or JSON) file at path into l and reloads it on
// change through config.Watch: a valid new file replaces the limits (keeping
// the key state of dimensions that stay); an invalid one is logged and
// counted and the old limits stay in force.
func Watch(path string, l *Limiter, opts config.WatchOptions) (*config.Watcher[Config], error) {
	return config.Watch(path, opts, func(c *Config) {
		// c has passed Validate in config.Parse; Update cannot fail.
		_ = l.Update(*c)
	})
}
