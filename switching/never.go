package switching

// Never is the policy that never switches: servers stay where they start.
type Never struct{}

var _ Policy = Never{}

// Decide returns NoAction.
func (Never) Decide(State) Action { return NoAction }
