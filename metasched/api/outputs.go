package api

// OutputList is GET /v1/jobs/{id}/outputs: the output files of a finished
// job's last attempt, as the guest executor copied them out of the master
// VM into the job's run directory.
type OutputList struct {
	Job string `json:"job"`
	// Attempt is the attempt whose outputs these are (the last one).
	Attempt int `json:"attempt"`
	// Files are the outputs copied, by name (the path the job file gives,
	// relative to the command's working directory), sorted.
	Files []OutputFile `json:"files"`
	// Missing names the outputs of the job file that were not copied: the
	// master did not write them, or they could not be read (the job's log
	// says why).
	Missing []string `json:"missing,omitempty"`
}

// OutputFile is a file of OutputList.
type OutputFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}
