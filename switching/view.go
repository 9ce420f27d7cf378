package switching

import (
	"fmt"
	"slices"
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
// pools), rows j1, columns j2, the other queues 0, size min(11, J_i) over
// the pools.
func DefaultView(m *Model) View {
	M, N := m.NumPools(), m.Servers
	v := View{K: make([]int, M), Rows: 0, Cols: 1, Fixed: map[int]int{}, Size: min(11, slices.Min(m.Limits()))}
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
	M, N := m.NumPools(), m.Servers
	fixed := map[int]int{}
	rowsSet, colsSet, sizeSet := false, false, false
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
			if err != nil || n < 1 {
				return View{}, fmt.Errorf("size: must be a whole number >= 1, got %q", val)
			}
			v.Size, sizeSet = n, true
		case strings.HasPrefix(key, "j"):
			i, err := poolAxis(key, M)
			if err != nil {
				return View{}, fmt.Errorf("%s: %w", key, err)
			}
			n, err := strconv.Atoi(val)
			if J := m.Limit(i); err != nil || n < 0 || n >= J {
				return View{}, fmt.Errorf("%s: must be a queue length from 0 to J%d−1 = %d, got %q", key, i+1, J-1, val)
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
	// The axes run over queue lengths both pools' truncations hold.
	if J := min(m.Limit(v.Rows), m.Limit(v.Cols)); !sizeSet {
		v.Size = min(11, J)
	} else if v.Size > J {
		return View{}, fmt.Errorf("size: must be a whole number from 1 to %d (the truncation J of j%d and j%d), got %d",
			J, v.Rows+1, v.Cols+1, v.Size)
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

// ViewChoice says how ChooseView picked its view.
type ViewChoice struct {
	// Candidates is the number of slices compared.
	Candidates int
	// Changes is the chosen slice's number of cells whose action differs
	// from the cell to the right or below: the length of the policy's
	// switching curves in it.
	Changes int
	// Switching is the chosen slice's number of cells where the policy
	// starts a switch.
	Switching int
	// Unserved is true when the policy does nothing in every candidate
	// slice that leaves no pool without a server, so that the choice was
	// made among all configurations.
	Unserved bool
}

// maxViewConfigs bounds the server configurations ChooseView compares.
const maxViewConfigs = 64

// ChooseView picks the 2-D view of policy p that shows most of where it
// acts. The candidates are: server configurations near DefaultView's even
// split (moving one server at a time, at most maxViewConfigs of them; the
// static allocation is always one), first those that leave no pool
// without a server (when N ≥ M), then, if the policy does nothing in all
// of their slices, any; every pair of queues on the rows and columns; the
// other queues all 0 or all at (size−1)/2. The choice is the slice with
// the most cells whose action differs from a neighbour's (the policy's
// switching curves), then the most distinct actions, then the most
// switching cells, then the first in that order (DefaultView first). A
// policy that does nothing in every candidate gets DefaultView.
// Deterministic; at most 2·maxViewConfigs·M(M−1)·size² decisions.
func ChooseView(m *Model, p Policy) (View, ViewChoice) {
	def := DefaultView(m)
	best, choice := def, ViewChoice{}
	bestKinds := 0
	for _, served := range []bool{true, false} {
		if !served && (choice.Switching > 0 || m.Servers < m.NumPools()) {
			break // the policy acts in a slice with every pool served, or every configuration was a candidate already
		}
		for _, v := range viewCandidates(m, def, served) {
			choice.Candidates++
			changes, kinds, switching := sliceScore(v.Slice(p))
			if changes > choice.Changes || changes == choice.Changes &&
				(kinds > bestKinds || kinds == bestKinds && switching > choice.Switching) {
				best, bestKinds = v, kinds
				choice.Changes, choice.Switching, choice.Unserved = changes, switching, !served
			}
		}
	}
	return best, choice
}

// viewCandidates lists ChooseView's candidate views: for each
// configuration of viewConfigs, each pair of queues on the axes, the other
// queues at 0 and at (size−1)/2.
func viewCandidates(m *Model, def View, served bool) []View {
	M := m.NumPools()
	fixedValues := []int{0}
	if half := (def.Size - 1) / 2; half > 0 && M > 2 {
		fixedValues = append(fixedValues, half)
	}
	var out []View
	for _, k := range viewConfigs(m, def.K, served) {
		for a := range M {
			for b := a + 1; b < M; b++ {
				for _, fixed := range fixedValues {
					v := View{K: k, Rows: a, Cols: b, Fixed: map[int]int{}, Size: def.Size}
					for i := range M {
						if i != a && i != b {
							v.Fixed[i] = fixed
						}
					}
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// sliceScore counts the cells of a slice whose action differs from the
// cell to the right or below, the distinct actions, and the cells that
// switch.
func sliceScore(s [][]Action) (changes, kinds, switching int) {
	seen := map[Action]bool{}
	for r, row := range s {
		for c, a := range row {
			seen[a] = true
			if a != 0 {
				switching++
			}
			if c+1 < len(row) && row[c+1] != a || r+1 < len(s) && s[r+1][c] != a {
				changes++
			}
		}
	}
	return changes, len(seen), switching
}

// viewConfigs are the server configurations ChooseView compares: even
// first, then the static allocation, then the others breadth first from
// even by moving one server (from pool i to pool j, i then j in order),
// with at least one server per pool if served (and N ≥ M); at most
// maxViewConfigs.
func viewConfigs(m *Model, even []int, served bool) [][]int {
	M, N := m.NumPools(), m.Servers
	least := 0
	if served && N >= M {
		least = 1
	}
	key := func(k []int) string { return fmt.Sprint(k) }
	seen := map[string]bool{key(even): true}
	out := [][]int{even}
	if st := StaticAllocation(m); !seen[key(st)] && slices.Min(st) >= least {
		seen[key(st)] = true
		out = append(out, st)
	}
	for q := 0; q < len(out) && len(out) < maxViewConfigs; q++ {
		for i := range M {
			for j := range M {
				if i == j || out[q][i] <= least || len(out) >= maxViewConfigs {
					continue
				}
				k := slices.Clone(out[q])
				k[i]--
				k[j]++
				if !seen[key(k)] {
					seen[key(k)] = true
					out = append(out, k)
				}
			}
		}
	}
	return out
}
