package policy

import (
	"github.com/metasched/metasched/switching"
)

// Slice is a 2-D view of the optimal table in force, like the papers'
// tables: the servers in place at each pool (none in transit), the first
// two pools' queue lengths on the rows and columns, the other queues fixed.
type Slice struct {
	// Spec is the view in the syntax of switching.ParseView.
	Spec string `json:"spec"`
	// Pools are the table's pools in order; Rows and Cols index them.
	Pools []string `json:"pools"`
	Rows  int      `json:"rows"`
	Cols  int      `json:"cols"`
	// Servers are the servers in place per pool, Fixed the queue lengths of
	// the pools on neither axis.
	Servers []int       `json:"servers"`
	Fixed   map[int]int `json:"fixed,omitempty"`
	// Actions[r][c] is the decision with r jobs at pool Rows and c at pool
	// Cols: "" does nothing, "a→b" switches a server from pool a to pool b.
	Actions [][]string `json:"actions"`
	// Live marks the cell of the live queue lengths, when it is in the view
	// (-1 otherwise).
	LiveRow int `json:"live_row"`
	LiveCol int `json:"live_col"`
}

// TableSlice returns the view of the table in force at the live state:
// servers and jobs per pool, in the order of pools. The view takes the live
// servers when they are all in place and sum to the table's N (else the
// table's default allocation), and the live queue lengths of the pools on
// neither axis (capped at J−1). It returns nil when no table is held.
func (e *Engine) TableSlice(pools []string, servers, jobs []int) *Slice {
	e.mu.Lock()
	tbl := e.table
	e.mu.Unlock()
	if tbl == nil {
		return nil
	}
	m := tbl.t.Model
	v := switching.DefaultView(m)
	// The live values in the table's pool order, when every pool is known.
	k := make([]int, m.NumPools())
	j := make([]int, m.NumPools())
	known, sum := 0, 0
	for i, p := range m.Pools {
		for x, name := range pools {
			if name == p.Name && x < len(servers) && x < len(jobs) {
				k[i], j[i] = servers[x], jobs[x]
				sum += servers[x]
				known++
			}
		}
	}
	if known == m.NumPools() && sum == m.Servers {
		v.K = k
	}
	if known == m.NumPools() {
		for i := range v.Fixed {
			v.Fixed[i] = min(j[i], m.QueueLimit-1)
		}
	}
	s := &Slice{Spec: v.String(), Rows: v.Rows, Cols: v.Cols, Servers: v.K, LiveRow: -1, LiveCol: -1}
	if len(v.Fixed) > 0 {
		s.Fixed = v.Fixed
	}
	for _, p := range m.Pools {
		s.Pools = append(s.Pools, p.Name)
	}
	if known == m.NumPools() && j[v.Rows] < v.Size && j[v.Cols] < v.Size {
		s.LiveRow, s.LiveCol = j[v.Rows], j[v.Cols]
	}
	acts := v.Slice(tbl.t)
	s.Actions = make([][]string, len(acts))
	for r, row := range acts {
		s.Actions[r] = make([]string, len(row))
		for c, a := range row {
			if a != switching.NoAction {
				pr := a.Pair(m.NumPools())
				s.Actions[r][c] = s.Pools[pr.From] + "→" + s.Pools[pr.To]
			}
		}
	}
	return s
}
