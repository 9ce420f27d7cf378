package executor

// FindCgroupParent is the cgroup v2 directory of this process.
func FindCgroupParent() (string, error) { return findCgroupParent() }

// ParseCgroupParent finds a process's cgroup v2 directory from its
// mountinfo and /proc/PID/cgroup.
func ParseCgroupParent(mountinfo, self []byte) (string, error) {
	return parseCgroupParent(mountinfo, self)
}
