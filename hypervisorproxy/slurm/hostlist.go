package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxHostlist is the most names ExpandHostlist gives for one list.
const MaxHostlist = 1 << 16

// ExpandHostlist expands a Slurm hostlist, such as "n[1-3,7],gpu[01-02]",
// "rack[1-2]-n[1-2]" or "login", into its names in order. Ranges keep the
// zero padding of their first number. An empty list gives none.
func ExpandHostlist(s string) ([]string, error) {
	var out []string
	for _, item := range splitTop(s) {
		if item == "" {
			if s == "" {
				return nil, nil
			}
			return nil, fmt.Errorf("hostlist %q: an empty name", s)
		}
		names, err := expandItem(item, MaxHostlist-len(out))
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", s, err)
		}
		out = append(out, names...)
	}
	return out, nil
}

// splitTop splits s at the commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// expandItem expands one name with bracketed ranges, at most limit names.
func expandItem(item string, limit int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "] \t\n") {
			return nil, fmt.Errorf("%q is not a host name", item)
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q: a '[' without its ']'", item)
	}
	end += open
	prefix, ranges, rest := item[:open], item[open+1:end], item[end+1:]
	if strings.ContainsAny(prefix, "] \t\n") {
		return nil, fmt.Errorf("%q is not a host name", item)
	}
	var nums []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a || !digits(lo) || !digits(hi) {
			return nil, fmt.Errorf("%q: %q is not a number or a range a-b with a <= b", item, r)
		}
		if b-a >= limit-len(nums) {
			return nil, fmt.Errorf("more than %d names", MaxHostlist)
		}
		for n := a; n <= b; n++ {
			nums = append(nums, fmt.Sprintf("%0*d", len(lo), n))
		}
	}
	tails := []string{""}
	if rest != "" {
		var err error
		if tails, err = expandItem(rest, max(1, limit/len(nums))); err != nil {
			return nil, err
		}
	}
	if len(nums)*len(tails) > limit {
		return nil, fmt.Errorf("more than %d names", MaxHostlist)
	}
	out := make([]string, 0, len(nums)*len(tails))
	for _, n := range nums {
		for _, t := range tails {
			out = append(out, prefix+n+t)
		}
	}
	return out, nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
