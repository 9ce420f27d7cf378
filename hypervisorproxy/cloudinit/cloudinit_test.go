package cloudinit_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/metasched/metasched/hypervisorproxy/cloudinit"
)

const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk0RSsbkSP5D37Gc6fdqaWtGIYB5hWQ/xW6DFqYxkYZ metasched job 7"

func seed() cloudinit.Seed {
	return cloudinit.Seed{
		InstanceID: "j-7-a1-m", Hostname: "j-7-a1-m", MAC: "52:54:0a:4d:01:05",
		Address: netip.MustParsePrefix("10.77.1.5/16"), Gateway: netip.MustParseAddr("10.77.0.1"),
		DNS:            []netip.Addr{netip.MustParseAddr("10.77.0.53")},
		AuthorizedKeys: []string{key},
	}
}

func TestSeedFiles(t *testing.T) {
	files, err := seed().Files()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"meta-data": "instance-id: j-7-a1-m\nlocal-hostname: j-7-a1-m\n",
		"network-config": `version: 2
ethernets:
  eth0:
    match:
      macaddress: 52:54:0a:4d:01:05
    set-name: eth0
    addresses:
      - 10.77.1.5/16
    gateway4: 10.77.0.1
    nameservers:
      addresses:
        - 10.77.0.53
`,
		"user-data": `#cloud-config
users:
  - name: metasched
    gecos: metasched job user
    shell: /bin/sh
    lock_passwd: true
    ssh_authorized_keys:
      - ` + key + `
disable_root: true
ssh_pwauth: false
`,
	}
	got := map[string]string{}
	for n, b := range files {
		got[n] = string(b)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("seed files (-want +got):\n%s", d)
	}

	// Without an address: no network-config (cloud-init's fallback).
	s := seed()
	s.Address, s.MAC, s.Gateway, s.DNS = netip.Prefix{}, "", netip.Addr{}, nil
	files, err = s.Files()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["network-config"]; ok {
		t.Errorf("a seed without an address has a network-config")
	}
}

// The volume is what cloud-init's NoCloud looks for: labelled cidata,
// the files in its root under their own names.
func TestSeedISO(t *testing.T) {
	iso, err := seed().ISO()
	if err != nil {
		t.Fatal(err)
	}
	files, label, err := cloudinit.ReadISO(iso)
	if err != nil {
		t.Fatal(err)
	}
	if label != cloudinit.Label {
		t.Errorf("label %q, want %q", label, cloudinit.Label)
	}
	want, err := seed().Files()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, files); d != "" {
		t.Errorf("the volume's files (-want +got):\n%s", d)
	}
}

// Nothing given can add a key to a document: values are encoded, not
// pasted.
func TestSeedNoInjection(t *testing.T) {
	s := seed()
	s.AuthorizedKeys = []string{key + "\nruncmd: [reboot]"}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "ssh_authorized_keys[0]: must be one line") {
		t.Errorf("a key with a new line: %v", err)
	}
	s = seed()
	s.AuthorizedKeys = []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk0RSsbkSP5D37Gc6fdqaWtGIYB5hWQ/xW6DFqYxkYZ x: y # runcmd"}
	ud, err := s.UserData()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ud), `- 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk0RSsbkSP5D37Gc6fdqaWtGIYB5hWQ/xW6DFqYxkYZ x: y # runcmd'`) {
		t.Errorf("a key comment with YAML in it was not quoted:\n%s", ud)
	}
}

func TestSeedBadFields(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*cloudinit.Seed)
		want string
	}{
		{"no instance", func(s *cloudinit.Seed) { s.InstanceID = "" }, "instance_id: must be 1 to 64"},
		{"instance with space", func(s *cloudinit.Seed) { s.InstanceID = "a b" }, "instance_id: must be"},
		{"hostname", func(s *cloudinit.Seed) { s.Hostname = "-x" }, "hostname: must be a host name label"},
		{"hostname dot", func(s *cloudinit.Seed) { s.Hostname = "a.b" }, "hostname: must be a host name label"},
		{"mac", func(s *cloudinit.Seed) { s.MAC = "52:54:0A:4D:01:05" }, "mac: must be six lower-case hex pairs"},
		{"ipv6", func(s *cloudinit.Seed) { s.Address = netip.MustParsePrefix("fd00::5/64") }, "address: fd00::5/64 is not an IPv4 address"},
		{"gateway outside", func(s *cloudinit.Seed) { s.Gateway = netip.MustParseAddr("10.78.0.1") }, "gateway: 10.78.0.1 is not another address of 10.77.0.0/16"},
		{"gateway is the vm", func(s *cloudinit.Seed) { s.Gateway = netip.MustParseAddr("10.77.1.5") }, "gateway: 10.77.1.5 is not another address"},
		{"dns v6", func(s *cloudinit.Seed) { s.DNS = []netip.Addr{netip.MustParseAddr("::1")} }, "dns[0]: ::1 is not an IPv4 address"},
		{"too many dns", func(s *cloudinit.Seed) {
			a := netip.MustParseAddr("10.0.0.1")
			s.DNS = []netip.Addr{a, a, a, a}
		}, "dns: at most 3 name servers, not 4"},
		{"gateway without address", func(s *cloudinit.Seed) { s.Address, s.MAC = netip.Prefix{}, "" }, "address: is needed with mac, gateway or dns"},
		{"not a key", func(s *cloudinit.Seed) { s.AuthorizedKeys = []string{"ssh-ed25519 nope"} }, "ssh_authorized_keys[0]: not an ssh public key"},
		{"key options", func(s *cloudinit.Seed) { s.AuthorizedKeys = []string{`command="/bin/sh" ` + key} }, "ssh_authorized_keys[0]: must have no options"},
		{"key too long", func(s *cloudinit.Seed) { s.AuthorizedKeys = []string{key + strings.Repeat("x", cloudinit.MaxKeyBytes)} }, "ssh_authorized_keys[0]: must be at most 8192 bytes"},
		{"too many keys", func(s *cloudinit.Seed) {
			s.AuthorizedKeys = make([]string, cloudinit.MaxKeys+1)
			for i := range s.AuthorizedKeys {
				s.AuthorizedKeys[i] = key
			}
		}, "ssh_authorized_keys: at most 16 keys, not 17"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := seed()
			c.edit(&s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if _, err := s.ISO(); err == nil {
				t.Errorf("a bad seed made a volume")
			}
		})
	}
}

// An image's own cloud-config is merged into the user-data; it may not
// touch the job user or who logs in.
func TestSeedImageUserData(t *testing.T) {
	s := seed()
	s.Extra = []byte("#cloud-config\npackages: [htop]\nruncmd:\n  - [sh, -c, 'echo ready > /run/ready']\n")
	ud, err := s.UserData()
	if err != nil {
		t.Fatal(err)
	}
	want := `#cloud-config
disable_root: true
packages:
  - htop
runcmd:
  - - sh
    - -c
    - echo ready > /run/ready
ssh_pwauth: false
users:
  - name: metasched
    gecos: metasched job user
    shell: /bin/sh
    lock_passwd: true
    ssh_authorized_keys:
      - ` + key + `
`
	if d := cmp.Diff(want, string(ud)); d != "" {
		t.Errorf("merged user-data (-want +got):\n%s", d)
	}
	for _, c := range badUserData {
		s := seed()
		s.Extra = []byte(c.extra)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "user_data: "+c.want) {
			t.Errorf("user_data %.40q: %v, want %q", c.extra, err, c.want)
		}
	}
}

// badUserData are images' cloud-configs refused, and why (the test's and
// the fuzz target's seeds).
var badUserData = []struct{ extra, want string }{
	{"users: [default]\nssh_authorized_keys: [x]\n", "must not set users, ssh_authorized_keys: the job user and who may log in are the agent's"},
	{"chpasswd: {expire: false}\npassword: x\n", "must not set chpasswd, password"},
	{"- runcmd\n", "not a cloud-config mapping"},
	{"#cloud-config\n", "not a cloud-config mapping: empty"},
	{"a: [\n", "not a cloud-config mapping"},
	{"a: " + strings.Repeat("x", cloudinit.MaxUserData) + "\n", "must be at most 65536 bytes"},
}

// An image's cloud-config is refused, or merged into a user-data that is
// a cloud-config mapping whose job user is the agent's.
func FuzzUserData(f *testing.F) {
	for _, c := range badUserData {
		f.Add([]byte(c.extra))
	}
	f.Add([]byte("#cloud-config\npackages: [htop]\nruncmd: [[touch, /run/x]]\n"))
	f.Fuzz(func(t *testing.T, extra []byte) {
		if cloudinit.CheckUserData(extra) != nil {
			return
		}
		s := seed()
		s.Extra = extra
		ud, err := s.UserData()
		if err != nil {
			t.Fatalf("an accepted cloud-config gives no user-data: %v", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(ud, &m); err != nil {
			t.Fatalf("the user-data is not YAML: %v\n%s", err, ud)
		}
		users, _ := m["users"].([]any)
		u, _ := users[0].(map[string]any)
		if len(users) != 1 || u["name"] != cloudinit.User || m["disable_root"] != true || m["ssh_pwauth"] != false {
			t.Fatalf("the user-data's users and logins are not the agent's:\n%s", ud)
		}
	})
}

// badResults are result files a guest might write that are refused.
var badResults = []struct{ data, want string }{
	{"", "result.json: unexpected end of JSON input"},
	{"{}", "result.json: no v1 object"},
	{`{"v1": {"errors": "one"}}`, "result.json: json: cannot unmarshal"},
	{"[]", "result.json: json: cannot unmarshal array"},
}

func TestParseResult(t *testing.T) {
	r, err := cloudinit.ParseResult([]byte(`{"v1": {"datasource": "DataSourceNoCloud [seed=/dev/vdb]", "errors": []}}`))
	if err != nil || len(r.Errors) != 0 {
		t.Errorf("a clean result: %+v, %v", r, err)
	}
	r, err = cloudinit.ParseResult([]byte(`{"v1": {"errors": ["('scripts_user', RuntimeError('Runparts: 1 failures'))", {"x": 1}]}}`))
	if err != nil || len(r.Errors) != 2 || !strings.Contains(r.Errors[0], "scripts_user") || r.Errors[1] != `{"x":1}` {
		t.Errorf("a result with errors: %+v, %v", r, err)
	}
	for _, c := range badResults {
		if _, err := cloudinit.ParseResult([]byte(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseResult(%q) = %v, want %q", c.data, err, c.want)
		}
	}
}

// A guest's result file is read or refused, never a panic; a result read
// has its errors as strings.
func FuzzParseResult(f *testing.F) {
	for _, c := range badResults {
		f.Add([]byte(c.data))
	}
	f.Add([]byte(`{"v1": {"datasource": "x", "errors": ["a", 1, null, {"b": [2]}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := cloudinit.ParseResult(data)
		if err != nil && len(r.Errors) > 0 {
			t.Fatalf("a refused result with errors: %+v", r)
		}
	})
}
