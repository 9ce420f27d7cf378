package executor

// CheckRunAs decides whom the commands of a daemon whose effective uid is
// euid run as, for CommandOptions.RunAs runAs, with this machine's users:
// their uid, and whether they switch to it from the daemon's.
func CheckRunAs(runAs string, euid int) (uid uint32, switched bool, err error) {
	a, err := runAsAccount(runAs, euid, systemUser)
	return a.uid, a.switched, err
}

// ParseIDs is the supervisor's reading of its --uid, --gid and --groups.
func ParseIDs(uid, gid, groups string) (ok bool, err error) {
	ids, err := parseIDs(uid, gid, groups)
	return ids != nil, err
}
