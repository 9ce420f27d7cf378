package httpsrv

import "github.com/metasched/metasched/internal/yamlx"

// LimitFields are the fields of a configuration file that ParseLimits
// reads (the serve configuration's and the site file's).
var LimitFields = []string{"max_unproven_connections", "max_unproven_per_address"}

// ParseLimits reads the caps on unproven connections from a configuration
// file's map: max_unproven_connections and max_unproven_per_address, each
// a whole number within 1 and MaxUnprovenLimit (default
// DefaultMaxUnproven and DefaultMaxUnprovenPerAddress), the cap per
// address no larger than the cap in all. A bad value is reported on its
// field and leaves the default.
func ParseLimits(m *yamlx.Map) Limits {
	l := Limits{MaxUnproven: DefaultMaxUnproven, MaxUnprovenPerAddress: DefaultMaxUnprovenPerAddress}
	read := func(key string, into *int) bool {
		n, ok := m.Int(key, false)
		if !ok {
			return false
		}
		if n < 1 || n > MaxUnprovenLimit {
			m.Errorf(key, "must be a whole number within 1 and %d, not %d", MaxUnprovenLimit, n)
			return false
		}
		*into = n
		return true
	}
	read(LimitFields[0], &l.MaxUnproven)
	if read(LimitFields[1], &l.MaxUnprovenPerAddress) && l.MaxUnprovenPerAddress > l.MaxUnproven {
		m.Errorf(LimitFields[1], "must be at most max_unproven_connections (%d), not %d", l.MaxUnproven, l.MaxUnprovenPerAddress)
	}
	l.MaxUnprovenPerAddress = min(l.MaxUnprovenPerAddress, l.MaxUnproven)
	return l
}
