// Package cloudinit makes the NoCloud seed of a VM of a cloud image: its
// meta-data (instance ID, host name), network-config (version 2: the
// VM's static address, gateway and DNS, matched by its MAC address) and
// user-data (the job user with the job's ssh public keys), and the
// ISO 9660 volume labelled cidata that holds them, which cloud-init finds
// at its first boot (docs/internals/images.md, "The seed").
//
// The documents are built from values and encoded by a YAML encoder, never
// by pasting strings: nothing a caller gives can add a key. Making them
// does no I/O; ISO writes its volume through a temporary directory (the
// ISO writer's staging area).
package cloudinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"

	"github.com/kdomanski/iso9660"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"
)

// User is the job user every VM of a cloud image gets: the account the
// job's command runs as, reached by the job's ssh key.
const User = "metasched"

// Label is the volume label cloud-init's NoCloud data source looks for.
const Label = "cidata"

// The seed's file names.
const (
	MetaDataFile      = "meta-data"
	UserDataFile      = "user-data"
	NetworkConfigFile = "network-config"
)

// Limits of a seed.
const (
	MaxKeys     = 16
	MaxKeyBytes = 8 << 10
	MaxDNS      = 3 // glibc's resolver reads three name servers
)

// Seed is what a VM learns from its seed.
type Seed struct {
	// InstanceID tells cloud-init a new instance from a reboot of the
	// same one: the VM's name (a VM name is never reused while it lives).
	InstanceID string
	// Hostname is the guest's host name (an RFC 1123 label).
	Hostname string
	// MAC is the guest's network interface's address, which
	// network-config matches; "" with no Address: no network-config.
	MAC string
	// Address is the guest's static IPv4 address with its prefix length;
	// Gateway (optional) the default route; DNS the name servers.
	Address netip.Prefix
	Gateway netip.Addr
	DNS     []netip.Addr
	// AuthorizedKeys are the ssh public keys of the job user, in
	// authorized_keys format ("ssh-ed25519 AAAA… comment").
	AuthorizedKeys []string
	// Extra is the image's own cloud-config (its image file's user_data,
	// checked by CheckUserData), merged into the user-data: what the
	// image's VMs need beyond the job user (packages, mounts, runcmd).
	Extra []byte
}

// MaxUserData bounds an image's own cloud-config.
const MaxUserData = 64 << 10

// reservedKeys are the cloud-config keys of the user-data that the agent
// sets, or that would let someone other than the job's key in: an image's
// own cloud-config may not set them.
var reservedKeys = []string{"users", "user", "disable_root", "ssh_pwauth", "ssh_authorized_keys", "chpasswd", "password"}

// CheckUserData checks an image's own cloud-config: a YAML mapping (a
// "#cloud-config" first line is allowed) of at most MaxUserData bytes,
// without the keys the agent sets (users, disable_root, ssh_pwauth) or
// that would let in anyone but the job's key (user, ssh_authorized_keys,
// chpasswd, password).
func CheckUserData(data []byte) error {
	if len(data) > MaxUserData {
		return fmt.Errorf("must be at most %d bytes, not %d", MaxUserData, len(data))
	}
	m, err := decodeConfig(data)
	if err != nil {
		return err
	}
	var bad []string
	for _, k := range reservedKeys {
		if _, ok := m[k]; ok {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("must not set %s: the job user and who may log in are the agent's", strings.Join(bad, ", "))
	}
	return nil
}

// decodeConfig decodes a cloud-config mapping.
func decodeConfig(data []byte) (map[string]any, error) {
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not a cloud-config mapping: %w", err)
	}
	if m == nil {
		return nil, errors.New("not a cloud-config mapping: empty")
	}
	return m, nil
}

var labelRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// Validate reports every problem of s, each named by its field.
func (s Seed) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if s.InstanceID == "" || len(s.InstanceID) > 64 || strings.ContainsFunc(s.InstanceID, func(r rune) bool { return r <= ' ' || r > '~' }) {
		bad("instance_id", "must be 1 to 64 printable ASCII characters without spaces, not %q", s.InstanceID)
	}
	if !labelRE.MatchString(s.Hostname) {
		bad("hostname", "must be a host name label (1 to 63 of A-Z a-z 0-9 -, not starting or ending with -), not %q", s.Hostname)
	}
	switch {
	case !s.Address.IsValid():
		if s.MAC != "" || s.Gateway.IsValid() || len(s.DNS) > 0 {
			bad("address", "is needed with mac, gateway or dns")
		}
	case !s.Address.Addr().Is4() || s.Address.Bits() < 1 || s.Address.Bits() > 32:
		bad("address", "%s is not an IPv4 address with a prefix length of 1 to 32", s.Address)
	default:
		if hw, err := net.ParseMAC(s.MAC); err != nil || len(hw) != 6 || hw.String() != s.MAC {
			bad("mac", "must be six lower-case hex pairs like 52:54:0a:4d:01:05, not %q", s.MAC)
		}
		if s.Gateway.IsValid() && (!s.Gateway.Is4() || !s.Address.Masked().Contains(s.Gateway) || s.Gateway == s.Address.Addr()) {
			bad("gateway", "%s is not another address of %s", s.Gateway, s.Address.Masked())
		}
	}
	if len(s.DNS) > MaxDNS {
		bad("dns", "at most %d name servers, not %d", MaxDNS, len(s.DNS))
	}
	for i, a := range s.DNS {
		if !a.Is4() {
			bad(fmt.Sprintf("dns[%d]", i), "%s is not an IPv4 address", a)
		}
	}
	if len(s.Extra) > 0 {
		if err := CheckUserData(s.Extra); err != nil {
			bad("user_data", "%v", err)
		}
	}
	if len(s.AuthorizedKeys) > MaxKeys {
		bad("ssh_authorized_keys", "at most %d keys, not %d", MaxKeys, len(s.AuthorizedKeys))
	}
	for i, k := range s.AuthorizedKeys {
		if msg := CheckAuthorizedKey(k); msg != "" {
			bad(fmt.Sprintf("ssh_authorized_keys[%d]", i), "%s", msg)
		}
	}
	return errors.Join(errs...)
}

// CheckAuthorizedKey returns what is wrong with an ssh public key in
// authorized_keys format (one line, no options), or "".
func CheckAuthorizedKey(k string) string {
	switch {
	case len(k) > MaxKeyBytes:
		return fmt.Sprintf("must be at most %d bytes, not %d", MaxKeyBytes, len(k))
	case strings.ContainsAny(k, "\r\n"):
		return "must be one line"
	}
	pub, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(k))
	switch {
	case err != nil:
		return fmt.Sprintf("not an ssh public key (%v)", err)
	case len(options) > 0:
		return "must have no options"
	case len(bytes.TrimSpace(rest)) > 0:
		return "must be one key"
	case pub == nil:
		return "not an ssh public key"
	}
	return ""
}

// metaData is the NoCloud meta-data.
type metaData struct {
	InstanceID    string `yaml:"instance-id"`
	LocalHostname string `yaml:"local-hostname"`
}

// MetaData is the seed's meta-data.
func (s Seed) MetaData() ([]byte, error) {
	return encode(metaData{InstanceID: s.InstanceID, LocalHostname: s.Hostname})
}

type networkConfig struct {
	Version   int                 `yaml:"version"`
	Ethernets map[string]ethernet `yaml:"ethernets"`
}

type ethernet struct {
	Match       map[string]string `yaml:"match"`
	SetName     string            `yaml:"set-name"`
	Addresses   []string          `yaml:"addresses"`
	Gateway4    string            `yaml:"gateway4,omitempty"`
	Nameservers *nameservers      `yaml:"nameservers,omitempty"`
}

type nameservers struct {
	Addresses []string `yaml:"addresses"`
}

// Interface is the name network-config gives the guest's interface.
const Interface = "eth0"

// NetworkConfig is the seed's network-config (version 2), or nil when the
// VM has no address (cloud-init then brings up its fallback network).
func (s Seed) NetworkConfig() ([]byte, error) {
	if !s.Address.IsValid() {
		return nil, nil
	}
	e := ethernet{Match: map[string]string{"macaddress": s.MAC}, SetName: Interface, Addresses: []string{s.Address.String()}}
	if s.Gateway.IsValid() {
		// gateway4, not a route to 0.0.0.0/0: every renderer writes it as
		// the interface's gateway (ifupdown's route to it needs net-tools).
		e.Gateway4 = s.Gateway.String()
	}
	if len(s.DNS) > 0 {
		e.Nameservers = &nameservers{}
		for _, a := range s.DNS {
			e.Nameservers.Addresses = append(e.Nameservers.Addresses, a.String())
		}
	}
	return encode(networkConfig{Version: 2, Ethernets: map[string]ethernet{Interface: e}})
}

type userData struct {
	Users       []user `yaml:"users"`
	DisableRoot bool   `yaml:"disable_root"`
	SSHPwauth   bool   `yaml:"ssh_pwauth"`
}

type user struct {
	Name       string   `yaml:"name"`
	Gecos      string   `yaml:"gecos"`
	Shell      string   `yaml:"shell"`
	LockPasswd bool     `yaml:"lock_passwd"`
	Keys       []string `yaml:"ssh_authorized_keys,omitempty"`
}

// UserData is the seed's user-data (#cloud-config): the job user, with a
// locked password and the job's keys, and no other way in (no root login,
// no password login; the image's default user is not made).
func (s Seed) UserData() ([]byte, error) {
	ud := userData{
		Users:       []user{{Name: User, Gecos: "metasched job user", Shell: "/bin/sh", LockPasswd: true, Keys: s.AuthorizedKeys}},
		DisableRoot: true,
	}
	var v any = ud
	if len(s.Extra) > 0 {
		// The image's keys, then the agent's over them (CheckUserData
		// refused a clash): one mapping, its keys in order.
		m, err := decodeConfig(s.Extra)
		if err != nil {
			return nil, fmt.Errorf("seed: the image's user_data: %w", err)
		}
		m["users"], m["disable_root"], m["ssh_pwauth"] = ud.Users, ud.DisableRoot, ud.SSHPwauth
		v = m
	}
	b, err := encode(v)
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), b...), nil
}

// Files are the seed's files by name.
func (s Seed) Files() (map[string][]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	md, err := s.MetaData()
	if err != nil {
		return nil, err
	}
	ud, err := s.UserData()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{MetaDataFile: md, UserDataFile: ud}
	nc, err := s.NetworkConfig()
	if err != nil {
		return nil, err
	}
	if nc != nil {
		files[NetworkConfigFile] = nc
	}
	return files, nil
}

// ISO is the seed as an ISO 9660 volume labelled cidata, with the files
// in its root directory.
func (s Seed) ISO() ([]byte, error) {
	files, err := s.Files()
	if err != nil {
		return nil, err
	}
	w, err := iso9660.NewWriter()
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	defer w.Cleanup()
	for _, name := range []string{MetaDataFile, UserDataFile, NetworkConfigFile} {
		data, ok := files[name]
		if !ok {
			continue
		}
		if err := w.AddFile(bytes.NewReader(data), name); err != nil {
			return nil, fmt.Errorf("seed: %s: %w", name, err)
		}
	}
	var out bytes.Buffer
	if err := w.WriteTo(&out, Label); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	return out.Bytes(), nil
}

// ReadISO returns the files of a seed volume by name, and its label.
func ReadISO(data []byte) (map[string][]byte, string, error) {
	img, err := iso9660.OpenImage(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("seed: %w", err)
	}
	label, err := img.Label()
	if err != nil {
		return nil, "", fmt.Errorf("seed: %w", err)
	}
	root, err := img.RootDir()
	if err != nil {
		return nil, "", fmt.Errorf("seed: %w", err)
	}
	kids, err := root.GetChildren()
	if err != nil {
		return nil, "", fmt.Errorf("seed: %w", err)
	}
	files := map[string][]byte{}
	for _, k := range kids {
		if k.IsDir() {
			continue
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(k.Reader()); err != nil {
			return nil, "", fmt.Errorf("seed: %s: %w", k.Name(), err)
		}
		files[k.Name()] = b.Bytes()
	}
	return files, label, nil
}

// encode is yaml's encoding of v with two-space indents.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	return b.Bytes(), nil
}

// Result is what cloud-init's result file (/run/cloud-init/result.json,
// written after its last stage) says: the errors of its stages.
type Result struct {
	Errors []string
}

// MaxResult bounds a result file read from a guest.
const MaxResult = 1 << 20

// ParseResult reads a result file, {"v1": {"datasource": …, "errors":
// […]}}, as a guest wrote it: anything else is an error saying so.
func ParseResult(data []byte) (Result, error) {
	if len(data) > MaxResult {
		return Result{}, fmt.Errorf("result.json: %d bytes, more than %d", len(data), MaxResult)
	}
	var r struct {
		V1 *struct {
			Errors []any `json:"errors"`
		} `json:"v1"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return Result{}, fmt.Errorf("result.json: %w", err)
	}
	if r.V1 == nil {
		return Result{}, errors.New("result.json: no v1 object")
	}
	var out Result
	for _, e := range r.V1.Errors {
		s, ok := e.(string)
		if !ok {
			b, _ := json.Marshal(e)
			s = string(b)
		}
		out.Errors = append(out.Errors, s)
	}
	return out, nil
}
