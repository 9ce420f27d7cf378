package hypervisorproxy

import "fmt"

// migrationPorts is the pool of the site's migration_ports: a live
// migration takes one port of the range (the destination listens on it)
// and gives it back when it ends. The agent's lock guards it.
type migrationPorts struct {
	first, last int
	used        map[int]bool
}

func newMigrationPorts(r [2]int) migrationPorts {
	return migrationPorts{first: r[0], last: r[1], used: map[int]bool{}}
}

// take takes the lowest free port.
func (p *migrationPorts) take() (int, error) {
	for port := p.first; port <= p.last; port++ {
		if !p.used[port] {
			p.used[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("%w: every migration port (%d-%d) is in use", ErrBusy, p.first, p.last)
}

// release gives a port back.
func (p *migrationPorts) release(port int) { delete(p.used, port) }
