package slurm

import (
	"errors"
	"testing"
)

// FuzzExpandHostlist: a list is refused with an error, or expands to at
// most MaxHostlist host names.
func FuzzExpandHostlist(f *testing.F) {
	for _, c := range hostlistCases {
		f.Add(c.in)
	}
	for in := range badHostlists {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ExpandHostlist(s)
		if err != nil {
			return
		}
		if len(names) > MaxHostlist {
			t.Fatalf("%q: %d names", s, len(names))
		}
		for _, n := range names {
			if n == "" {
				t.Fatalf("%q gives an empty name", s)
			}
		}
	})
}

// FuzzParse: sinfo and squeue documents are refused with ErrBadDocument,
// or give nodes and jobs that keep the parsers' rules.
func FuzzParse(f *testing.F) {
	f.Add(true, nodesDoc)
	f.Add(false, jobsDoc)
	for _, c := range badDocs {
		f.Add(c.nodes, c.in)
	}
	f.Fuzz(func(t *testing.T, nodes bool, doc string) {
		if nodes {
			ns, err := ParseNodes([]byte(doc))
			if err != nil {
				if !errors.Is(err, ErrBadDocument) {
					t.Fatalf("error without ErrBadDocument: %v", err)
				}
				return
			}
			for _, n := range ns {
				if !hostName(n.Name) || n.CPUs < 1 || n.MemoryMiB < 1 || n.AllocCPUs > n.CPUs || n.State == "" || n.Address == "" {
					t.Fatalf("node %+v breaks the rules", n)
				}
			}
			return
		}
		js, err := ParseJobs([]byte(doc))
		if err != nil {
			if !errors.Is(err, ErrBadDocument) {
				t.Fatalf("error without ErrBadDocument: %v", err)
			}
			return
		}
		for _, j := range js {
			if j.ID < 1 || j.State == "" || len(j.Nodes) > MaxHostlist {
				t.Fatalf("job %+v breaks the rules", j)
			}
		}
	})
}
