package switching

// Policy names: how a user names a switching policy, in the daemon's
// configuration (policy: {name: heuristic}) and to the simulator
// (metasched simulate --policy heuristic). The daemon's policy engine and
// the experiments both take their names from here.
const (
	PolicyOptimal    = "optimal"     // a Table solved for the model (Solve)
	PolicyHeuristic  = "heuristic"   // Fisher et al.'s rule (NewHeuristic)
	PolicyStatic     = "static"      // toward the proportional allocation (NewStatic)
	PolicyBestStatic = "best-static" // toward the allocation of least M/M/k cost (NewBestStatic)
	PolicyCMu        = "cmu"         // the cµ rule (NewCMu)
	PolicyNone       = "none"        // never switch (Never)
)

// PolicyNames lists every policy name, in this order. A user of the names
// offers the ones it can build: the experiments every policy but none, the
// daemon's policy engine every policy but cµ.
var PolicyNames = []string{PolicyOptimal, PolicyHeuristic, PolicyStatic, PolicyBestStatic, PolicyCMu, PolicyNone}
