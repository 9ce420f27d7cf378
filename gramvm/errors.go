package gramvm

import "errors"

// Sentinel errors. The service wraps them with what it was asked, so a
// caller tests them with errors.Is.
var (
	// ErrInvalid: an input is out of range (a measured bandwidth outside
	// graph.MinMbps and graph.MaxMbps).
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: the grid has no such link.
	ErrNotFound = errors.New("not found")
)
