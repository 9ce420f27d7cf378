package switching

import (
	"fmt"
	"strconv"
	"strings"
)

// View is a 2-D slice of a policy table like the papers' tables: the
// servers in place at each pool (nobody in transit), two queues on the rows
// and columns from 0 to Size−1, and the other queues fixed.
type View struct {
	K     []int       // servers per pool, Σ = N
	Rows  int         // pool index on the rows
	Cols  int         // pool index on the columns
	Fixed map[int]int // queue length of every other pool
	Size  int
}

// DefaultView is k as even as possible (the extra servers to the lowest
// pools), rows j1, columns j2, the other queues 0, size min(11, J).
func DefaultView(m *Model) View {
	M, N := m.NumPools(), m.Servers
	v := View{K: make([]int, M), Rows: 0, Cols: 1, Fixed: map[int]int{}, Size: min(11, m.QueueLimit)}
	for i := range M {
		v.K[i] = N / M
		if i < N%M {
			v.K[i]++
		}
	}
	for i := 2; i < M; i++ {
		v.Fixed[i] = 0
	}
	return v
}

// ParseView reads a view spec such as "k=1,1,1 m=0 j1=0 rows=j2 cols=j3
// size=10" (pools numbered from 1, as in the papers). Omitted parts take
// DefaultView's values; fixed queues default to 0.
func ParseView(m *Model, spec string) (View, error) {
	v := DefaultView(m)
	M, N, J := m.NumPools(), m.Servers, m.QueueLimit
	fixed := map[int]int{}
	rowsSet, colsSet := false, false
	for _, tok := range strings.Fields(spec) {
		key, val, ok := strings.Cut(tok, "=")
		if !ok || val == "" {
			return View{}, fmt.Errorf("%q: want key=value", tok)
		}
		switch {
		case key == "k":
			parts := strings.Split(val, ",")
			if len(parts) != M {
				return View{}, fmt.Errorf("k: want %d numbers (one per pool), got %d", M, len(parts))
			}
			sum := 0
			for i, p := range parts {
				n, err := strconv.Atoi(p)
				if err != nil || n < 0 || n > N {
					// Bounded by N, so that the sum cannot overflow to N.
					return View{}, fmt.Errorf("k: %q is not a number of servers from 0 to N = %d", p, N)
				}
				v.K[i] = n
				sum += n
			}
			if sum != N {
				return View{}, fmt.Errorf("k: must sum to N = %d, got %d", N, sum)
			}
		case key == "m":
			if val != "0" {
				return View{}, fmt.Errorf("m: only m=0 (no switches in flight) is supported, got %q", val)
			}
		case key == "rows" || key == "cols":
			i, err := poolAxis(val, M)
			if err != nil {
				return View{}, fmt.Errorf("%s: %w", key, err)
			}
			if key == "rows" {
				v.Rows, rowsSet = i, true
			} else {
				v.Cols, colsSet = i, true
			}
		case key == "size":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > J {
				return View{}, fmt.Errorf("size: must be a whole number from 1 to J = %d, got %q", J, val)
			}
			v.Size = n
		case strings.HasPrefix(key, "j"):
			i, err := poolAxis(key, M)
			if err != nil {
				return View{}, fmt.Errorf("%s: %w", key, err)
			}
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n >= J {
				return View{}, fmt.Errorf("%s: must be a queue length from 0 to J−1 = %d, got %q", key, J-1, val)
			}
			fixed[i] = n
		default:
			return View{}, fmt.Errorf("%q: unknown key (want k, m, jN, rows, cols or size)", key)
		}
	}
	switch {
	case rowsSet && !colsSet && v.Rows == v.Cols:
		v.Cols = firstOther(M, v.Rows)
	case colsSet && !rowsSet && v.Rows == v.Cols:
		v.Rows = firstOther(M, v.Cols)
	}
	if v.Rows == v.Cols {
		return View{}, fmt.Errorf("rows and cols: must be two different queues, both are j%d", v.Rows+1)
	}
	for i := range fixed {
		if i == v.Rows || i == v.Cols {
			return View{}, fmt.Errorf("j%d: is on the %s, it cannot be fixed too", i+1, map[bool]string{true: "rows", false: "columns"}[i == v.Rows])
		}
	}
	v.Fixed = map[int]int{}
	for i := range M {
		if i != v.Rows && i != v.Cols {
			v.Fixed[i] = fixed[i]
		}
	}
	return v, nil
}

func firstOther(m, not int) int {
	for i := range m {
		if i != not {
			return i
		}
	}
	return 0
}

func poolAxis(s string, m int) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "j"))
	if !strings.HasPrefix(s, "j") || err != nil || n < 1 || n > m {
		return 0, fmt.Errorf("%q is not a queue: want j1 to j%d", s, m)
	}
	return n - 1, nil
}

// String prints the view in the spec syntax ParseView reads.
func (v View) String() string {
	k := make([]string, len(v.K))
	for i, n := range v.K {
		k[i] = strconv.Itoa(n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "k=%s m=0", strings.Join(k, ","))
	for i := range v.K {
		if n, ok := v.Fixed[i]; ok {
			fmt.Fprintf(&b, " j%d=%d", i+1, n)
		}
	}
	fmt.Fprintf(&b, " rows=j%d cols=j%d size=%d", v.Rows+1, v.Cols+1, v.Size)
	return b.String()
}

// Slice returns the view's actions of policy p: actions[r][c] is the
// decision with j_rows = r and j_cols = c.
func (v View) Slice(p Policy) [][]Action {
	M := len(v.K)
	st := State{Jobs: make([]int, M), Servers: append([]int(nil), v.K...), Transit: make([][]int, M)}
	for a := range st.Transit {
		st.Transit[a] = make([]int, M)
	}
	for i, n := range v.Fixed {
		st.Jobs[i] = n
	}
	out := make([][]Action, v.Size)
	for r := range out {
		out[r] = make([]Action, v.Size)
		for c := range out[r] {
			st.Jobs[v.Rows], st.Jobs[v.Cols] = r, c
			out[r][c] = p.Decide(st)
		}
	}
	return out
}
