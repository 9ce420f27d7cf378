package executor

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// account is the user of this machine that the jobs' commands run as
// (CommandOptions.RunAs).
type account struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32 // its supplementary groups, its primary group among them
	home   string
	// switched: the commands run with these ids, not the daemon's (which
	// runs as root); false when the daemon runs as this user itself.
	switched bool
}

func (a account) String() string {
	if a.name == "" {
		return "uid " + strconv.FormatUint(uint64(a.uid), 10)
	}
	return fmt.Sprintf("%s (uid %d)", a.name, a.uid)
}

// lookupUser finds a user of this machine by name, or by numeric uid.
type lookupUser func(nameOrUID string) (account, error)

// errNoUser is lookupUser's error for a user the machine does not have.
var errNoUser = errors.New("no such user")

// systemUser looks a user up in the machine's user database (os/user):
// a string of digits is a uid, anything else a name.
func systemUser(s string) (account, error) {
	var (
		u   *user.User
		err error
	)
	if isUID(s) {
		u, err = user.LookupId(s)
	} else {
		u, err = user.Lookup(s)
	}
	var unknownName user.UnknownUserError
	var unknownID user.UnknownUserIdError
	if errors.As(err, &unknownName) || errors.As(err, &unknownID) {
		return account{}, errNoUser
	}
	if err != nil {
		return account{}, err
	}
	a := account{name: u.Username, home: u.HomeDir}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return account{}, fmt.Errorf("user %q: uid %q: %w", s, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return account{}, fmt.Errorf("user %q: gid %q: %w", s, u.Gid, err)
	}
	a.uid, a.gid = uint32(uid), uint32(gid)
	gids, err := u.GroupIds()
	if err != nil {
		return account{}, fmt.Errorf("the groups of user %q: %w", u.Username, err)
	}
	for _, g := range gids {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return account{}, fmt.Errorf("the groups of user %q: gid %q: %w", u.Username, g, err)
		}
		a.groups = append(a.groups, uint32(n))
	}
	return a, nil
}

// isUID reports whether s is a numeric uid (decimal digits only).
func isUID(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// runAsAccount decides which user the jobs' commands run as, from
// CommandOptions.RunAs and the daemon's effective uid:
//
//   - a daemon that runs as root (euid 0) must name a user, and one whose
//     uid is not 0: jobs never run as root. The commands switch to it.
//   - a daemon that runs as another user cannot switch users: run_as must
//     be absent or name that same user, and the commands run as the daemon.
//
// A user the machine does not have is an error. The errors name the
// configuration's field, run_as.
func runAsAccount(runAs string, euid int, lookup lookupUser) (account, error) {
	find := func() (account, error) {
		a, err := lookup(runAs)
		switch {
		case errors.Is(err, errNoUser):
			return account{}, fmt.Errorf("run_as: no user %q on this machine", runAs)
		case err != nil:
			return account{}, fmt.Errorf("run_as: %q: %w", runAs, err)
		}
		return a, nil
	}
	if euid == 0 {
		if runAs == "" {
			return account{}, errors.New("run_as: required when the daemon runs as root: the host-command executor runs the jobs' commands on the daemon's own machine, and never as root; give an unprivileged user of this machine (nobody, or one made for the jobs)")
		}
		a, err := find()
		if err != nil {
			return account{}, err
		}
		if a.uid == 0 {
			return account{}, fmt.Errorf("run_as: %q names root (uid 0): jobs never run as root; give an unprivileged user of this machine (nobody, or one made for the jobs)", runAs)
		}
		a.switched = true
		return a, nil
	}
	self := strconv.Itoa(euid)
	if runAs == "" {
		a, err := lookup(self)
		if err != nil { // a uid without a name still runs the commands
			a = account{uid: uint32(euid)}
		}
		return a, nil
	}
	a, err := find()
	if err != nil {
		return account{}, err
	}
	if int64(a.uid) != int64(euid) {
		me := "uid " + self
		if m, err := lookup(self); err == nil && m.name != "" {
			me = fmt.Sprintf("%s (uid %s)", m.name, self)
		}
		return account{}, fmt.Errorf("run_as: %q is %s, but the daemon runs as %s and cannot switch users: leave run_as out, or name the daemon's own user, or start the daemon as root", runAs, a, me)
	}
	return a, nil
}

// unreachable returns why the account cannot reach path (look up names in
// each directory on the way: search permission), or "" when it can,
// going by the directories' owners and mode bits (access control lists
// are not read).
func unreachable(path string, a account) string {
	if !a.switched {
		return ""
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(dir); err == nil {
			if why := noSearch(fi, a); why != "" {
				return fmt.Sprintf("%s is %s", dir, why)
			}
		}
		if next := filepath.Dir(dir); next == dir {
			return ""
		}
	}
}

// ownerAccounts decides which user each owner's jobs run as, from
// CommandOptions.Accounts (owner → a user's name or uid) and the
// daemon's effective uid: only a daemon that runs as root switches users;
// no account is root; every owner has a uid of its own, which is not
// run_as's either (shared, when given, by the owners the map does not
// name). The errors name the configuration's field, accounts.
func ownerAccounts(owners map[string]string, euid int, lookup lookupUser, runAs *account) (map[string]account, error) {
	if len(owners) == 0 {
		return nil, nil
	}
	if euid != 0 {
		return nil, fmt.Errorf("accounts: the daemon runs as uid %d and cannot switch users: an account per owner needs a daemon that runs as root", euid)
	}
	names := slices.Sorted(maps.Keys(owners))
	out := make(map[string]account, len(owners))
	byUID := map[uint32]string{}
	for _, owner := range names {
		user := owners[owner]
		a, err := lookup(user)
		switch {
		case errors.Is(err, errNoUser):
			return nil, fmt.Errorf("accounts: %s: no user %q on this machine", owner, user)
		case err != nil:
			return nil, fmt.Errorf("accounts: %s: %q: %w", owner, user, err)
		case a.uid == 0:
			return nil, fmt.Errorf("accounts: %s: %q names root (uid 0): jobs never run as root", owner, user)
		case runAs != nil && a.uid == runAs.uid:
			return nil, fmt.Errorf("accounts: %s: %s is run_as, which every owner that accounts does not name shares: give %s an account of its own", owner, a, owner)
		}
		if other, ok := byUID[a.uid]; ok {
			return nil, fmt.Errorf("accounts: %s and %s both run as %s: each owner needs an account of its own, or its jobs can read and signal the other's", other, owner, a)
		}
		byUID[a.uid] = owner
		a.switched = true
		out[owner] = a
	}
	return out, nil
}

// ErrNoAccount is returned (wrapped) by Command.Run, and by
// Command.Admits, for a job whose owner has no account to run as.
var ErrNoAccount = errors.New("no account on the daemon's machine for the job's owner")
