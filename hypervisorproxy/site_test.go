package hypervisorproxy_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/tlsx"
)

// siteFull is a site file with every field.
const siteFull = `
site: spain
listen: 0.0.0.0:9101
tls: {cert_file: agent-spain.pem, key_file: agent-spain-key.pem, ca_file: /etc/pki/ms/ca.pem}
switch_delay: 1m30s
pool: render
hosts:
  - {name: spain-0, uri: "qemu+unix:///session?socket=/run/a/libvirt-sock"}
  - {name: spain-1, uri: "qemu+ssh://node1.example/system", pool: batch}
  - {name: spain-2, uri: "test:///default", migration_address: 10.0.0.3, image_dir: /var/lib/metasched/images, cpus: 2, memory_mib: 1536}
migration_ports: 50000-50009
migration_progress_timeout: 2m
migration_tls: true
data_dir: /var/lib/ms
max_unproven_connections: 200
max_unproven_per_address: 20
images: {render: images/render, batch: /srv/images/batch}
boot_timeout: 2m
max_concurrent_boots: 4
network:
  bridge: msbr0
  subnet: 10.77.0.0/16
  addresses: 10.77.1.10 - 10.77.1.250
  gateway: 10.77.0.1
  dns: [10.77.0.53, 9.9.9.9]
cpu_quota: 0.25
`

func TestParseSite(t *testing.T) {
	got, err := hp.ParseSite("/etc/ms/site.yaml", []byte(siteFull))
	if err != nil {
		t.Fatal(err)
	}
	want := &hp.Site{
		Site: "spain", Listen: "0.0.0.0:9101", SwitchDelay: 90 * time.Second,
		TLS:  &tlsx.Files{Cert: "/etc/ms/agent-spain.pem", Key: "/etc/ms/agent-spain-key.pem", CA: "/etc/pki/ms/ca.pem"},
		Pool: "render", DataDir: "/var/lib/ms", MigrationPorts: [2]int{50000, 50009}, MigrationProgressTimeout: 2 * time.Minute,
		MigrationTLS: true, MaxUnproven: 200, MaxUnprovenPerAddress: 20,
		Images:      map[string]string{"render": "/etc/ms/images/render", "batch": "/srv/images/batch"},
		BootTimeout: 2 * time.Minute, MaxConcurrentBoots: 4, CPUQuota: 0.25,
		Network: &hp.Network{Bridge: "msbr0", Subnet: netip.MustParsePrefix("10.77.0.0/16"),
			First: netip.MustParseAddr("10.77.1.10"), Last: netip.MustParseAddr("10.77.1.250"), Gateway: netip.MustParseAddr("10.77.0.1"),
			DNS: []netip.Addr{netip.MustParseAddr("10.77.0.53"), netip.MustParseAddr("9.9.9.9")}},
		Hosts: []hp.SiteHost{
			{Name: "spain-0", URI: "qemu+unix:///session?socket=/run/a/libvirt-sock", Pool: "render"},
			{Name: "spain-1", URI: "qemu+ssh://node1.example/system", Pool: "batch"},
			{Name: "spain-2", URI: "test:///default", Pool: "render", MigrationAddress: "10.0.0.3", ImageDir: "/var/lib/metasched/images",
				CPUs: 2, MemoryMiB: 1536},
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Defaults.
	got, err = hp.ParseSite("site.yaml", []byte("site: lab\ntoken_file: /t\ninsecure_http: true\ngrid: g.yaml\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = &hp.Site{Site: "lab", Listen: hp.DefaultListen, TokenFile: "/t", Grid: "g.yaml",
		MigrationPorts: hp.DefaultMigrationPorts, MigrationProgressTimeout: hp.DefaultProgressTimeout,
		BootTimeout: hp.DefaultBootTimeout,
		MaxUnproven: httpsrv.DefaultMaxUnproven, MaxUnprovenPerAddress: httpsrv.DefaultMaxUnprovenPerAddress}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

// siteOK is the start of a valid site file, siteHost its hosts.
const (
	siteOK   = "site: lab\ntoken_file: t\ninsecure_http: true\n"
	siteHost = "hosts:\n  - {name: h-0, uri: \"test:///default\"}\n"
)

// siteErrorCases are invalid site files and a part of their errors
// (TestParseSiteErrors), and seeds of FuzzParseSite.
var siteErrorCases = []struct{ name, yaml, want string }{
	{"no site", "token_file: t\ninsecure_http: true\n" + siteHost, "s.yaml: site: missing required field"},
	{"bad site", "site: Lab\ntoken_file: t\ninsecure_http: true\n" + siteHost, `s.yaml: site: must be a cluster name (a-z, 0-9, -), not "Lab"`},
	{"no token", "site: lab\ninsecure_http: true\n" + siteHost, "s.yaml: token_file: missing required field"},
	{"no tls", "site: lab\n" + siteHost, "s.yaml: tls: is required: {cert_file, key_file, ca_file}"},
	{"plain off loopback", "site: lab\nlisten: 10.0.0.2:9101\ntoken_file: t\ninsecure_http: true\n" + siteHost,
		`s.yaml: insecure_http: plain HTTP is served on a loopback address only (127.0.0.1, ::1, localhost), not on listen "10.0.0.2:9101": give tls`},
	{"plain and tls", "site: lab\ninsecure_http: true\ntls: {cert_file: a.pem, key_file: a-key.pem, ca_file: ca.pem}\n" + siteHost,
		"s.yaml: insecure_http: must not be true with tls"},
	{"tls and token", "site: lab\ntoken_file: t\ntls: {cert_file: a.pem, key_file: a-key.pem, ca_file: ca.pem}\n" + siteHost,
		"s.yaml: token_file: must not be given with tls: the daemon proves itself by its certificate"},
	{"tls without ca", "site: lab\ntls: {cert_file: a.pem, key_file: a-key.pem}\n" + siteHost, "s.yaml: tls.ca_file: missing required field"},
	{"tls field", "site: lab\ntls: {cert_file: a.pem, key_file: a-key.pem, ca_file: ca.pem, verify: false}\n" + siteHost, "s.yaml: tls.verify: unknown field"},
	{"tls empty cert", "site: lab\ntls: {cert_file: \"\", key_file: a-key.pem, ca_file: ca.pem}\n" + siteHost, "s.yaml: tls.cert_file: must not be empty"},
	{"unknown field", siteOK + siteHost + "colour: red\n", `s.yaml: colour: unknown field`},
	{"no hosts and no grid", siteOK, "s.yaml: hosts: is required when there is no grid"},
	{"empty hosts", siteOK + "hosts: []\n", "s.yaml: hosts: must list at least one host"},
	{"bad listen", siteOK + siteHost + "listen: localhost\n", `s.yaml: listen: must be HOST:PORT, not "localhost"`},
	{"listen not a string", siteOK + siteHost + "listen: 9101\n", `s.yaml: listen: must be a string`},
	{"bad delay", siteOK + siteHost + "switch_delay: soon\n", `s.yaml: switch_delay: not a duration like 30s or 2m: "soon"`},
	{"negative delay", siteOK + siteHost + "switch_delay: -1s\n", "s.yaml: switch_delay: must be >= 0"},
	{"zero progress timeout", siteOK + siteHost + "migration_progress_timeout: 0s\n", "s.yaml: migration_progress_timeout: must be > 0"},
	{"bad ports", siteOK + siteHost + "migration_ports: 50-40\n", `s.yaml: migration_ports: must be a range of ports within 1-65535 with FROM <= TO, not "50-40"`},
	{"migration tls not a bool", siteOK + siteHost + "migration_tls: yes-please\n", "s.yaml: migration_tls: must be true or false"},
	{"ports not numbers", siteOK + siteHost + "migration_ports: many\n", `migration_ports: must be a port range FROM-TO`},
	{"host without uri", siteOK + "hosts:\n  - {name: h-0}\n", "s.yaml: hosts[0].uri: missing required field"},
	{"bad uri", siteOK + "hosts:\n  - {name: h-0, uri: \"xen:///\"}\n", `s.yaml: hosts[0].uri: driver "xen" of "xen:///" is not supported (test, qemu, slurm for a node of a Slurm site, or sim for a simulated host)`},
	{"bad sim uri", siteOK + "hosts:\n  - {name: h-0, uri: \"sim:///h-0?cpus=8\"}\n", `s.yaml: hosts[0].uri: "sim:///h-0?cpus=8": memory_mib: required`},
	{"sim uri delay", siteOK + "hosts:\n  - {name: h-0, uri: \"sim:///h-0?cpus=8&memory_mib=1024&create=forever\"}\n", `hosts[0].uri: "sim:///h-0?cpus=8&memory_mib=1024&create=forever": create: must be a duration`},
	{"not a uri", siteOK + "hosts:\n  - {name: h-0, uri: \"localhost\"}\n", `hosts[0].uri: must be a libvirt URI`},
	{"twice", siteOK + "hosts:\n  - {name: h-0, uri: \"test:///default\"}\n  - {name: h-0, uri: \"test:///default\"}\n", `s.yaml: hosts[1].name: host "h-0" is listed twice`},
	{"bad pool", siteOK + "hosts:\n  - {name: h-0, uri: \"test:///default\", pool: Big}\n", `hosts[0].pool: must be a pool name`},
	{"images not a map", siteOK + siteHost + "images: /srv/img\n", "s.yaml: images: must be a mapping"},
	{"bad image pool", siteOK + siteHost + "images: {Render: /srv/img}\n", `s.yaml: images.Render: must be keyed by an image name (a-z, 0-9, -), not "Render"`},
	{"empty image", siteOK + siteHost + "images: {render: \"\"}\n", "s.yaml: images.render: must be the directory of an image, not empty"},
	{"image not a string", siteOK + siteHost + "images: {render: [a]}\n", "s.yaml: images.render: must be a string"},
	{"image twice", siteOK + siteHost + "images: {render: /a, render: /b}\n", "s.yaml: images.render: duplicate field"},
	{"zero boot timeout", siteOK + siteHost + "boot_timeout: 0s\n", "s.yaml: boot_timeout: must be > 0"},
	{"bad boot timeout", siteOK + siteHost + "boot_timeout: soon\n", `s.yaml: boot_timeout: not a duration like 30s or 2m: "soon"`},
	{"network not a map", siteOK + siteHost + "network: msbr0\n", "s.yaml: network: must be a mapping"},
	{"network without fields", siteOK + siteHost + "network: {}\n", "s.yaml: network.bridge: missing required field"},
	{"network field", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/8, addresses: 10.0.0.2, mtu: 9000}\n", "s.yaml: network.mtu: unknown field"},
	{"bad bridge", siteOK + siteHost + "network: {bridge: a-bridge-too-long, subnet: 10.0.0.0/8, addresses: 10.0.0.2}\n", "s.yaml: network.bridge: must be at most 15 bytes (a Linux interface name), not 17"},
	{"bad subnet", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0, addresses: 10.0.0.2}\n", `s.yaml: network.subnet: must be an IPv4 network like 10.77.0.0/16, not "10.0.0.0"`},
	{"ipv6 subnet", siteOK + siteHost + "network: {bridge: b, subnet: \"fd00::/64\", addresses: 10.0.0.2}\n", `s.yaml: network.subnet: must be an IPv4 network like 10.77.0.0/16, not "fd00::/64"`},
	{"subnet not masked", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.1/8, addresses: 10.0.0.2}\n", `s.yaml: network.subnet: must be a network address (10.0.0.0/8), not "10.0.0.1/8"`},
	{"subnet too small", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/31, addresses: 10.0.0.1}\n", "s.yaml: network.subnet: must have a prefix length from 8 to 30, not 31"},
	{"bad range", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/8, addresses: 10.0.0.9-10.0.0.2}\n", `s.yaml: network.addresses: must have FIRST <= LAST, not "10.0.0.9-10.0.0.2"`},
	{"range not addresses", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/8, addresses: many}\n", `s.yaml: network.addresses: must be a range of IPv4 addresses FIRST-LAST`},
	{"range outside", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/24, addresses: 10.0.0.2-10.0.1.2}\n", "s.yaml: network.addresses: 10.0.1.2 is not in the subnet 10.0.0.0/24"},
	{"range has broadcast", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/24, addresses: 10.0.0.2-10.0.0.255}\n", "s.yaml: network.addresses: 10.0.0.255 is the subnet's network or broadcast address"},
	{"range too big", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/8, addresses: 10.0.0.1-10.2.0.0}\n", "s.yaml: network.addresses: must hold at most 65536 addresses, not 131072"},
	{"gateway in range", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/8, addresses: 10.0.0.1-10.0.0.9, gateway: 10.0.0.5}\n", "s.yaml: network.gateway: 10.0.0.5 is in the VMs' address range 10.0.0.1-10.0.0.9"},
	{"gateway outside", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/8, addresses: 10.0.0.1-10.0.0.9, gateway: 11.0.0.1}\n", "s.yaml: network.gateway: 11.0.0.1 is not in the subnet 10.0.0.0/8"},
	{"negative boots", siteOK + siteHost + "max_concurrent_boots: -1\n", "s.yaml: max_concurrent_boots: must be 0 (no bound) to 1000, not -1"},
	{"bad dns", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/8, addresses: 10.0.0.1-10.0.0.9, dns: [10.0.0.53, resolver]}\n", `s.yaml: network.dns[1]: must be an IPv4 address, not "resolver"`},
	{"too many dns", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/8, addresses: 10.0.0.1-10.0.0.9, dns: [1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4]}\n", "s.yaml: network.dns: must list at most 3 name servers, not 4"},
	{"bad gateway", siteOK + siteHost + "network: {bridge: b, subnet: 10.0.0.0/8, addresses: 10.0.0.1-10.0.0.9, gateway: router}\n", `s.yaml: network.gateway: must be an IPv4 address, not "router"`},
	{"relative image dir", siteOK + "hosts:\n  - {name: h-0, uri: \"test:///default\", image_dir: images}\n", `hosts[0].image_dir: must be a clean absolute path of the host, not "images"`},
	{"quota above a core", siteOK + siteHost + "cpu_quota: 2\n", "s.yaml: cpu_quota: must be 0 (no limit) or a fraction of one core from 0.01 to 1, not 2"},
	{"negative quota", siteOK + siteHost + "cpu_quota: -0.25\n", "s.yaml: cpu_quota: must be 0 (no limit) or a fraction of one core from 0.01 to 1, not -0.25"},
	{"tiny quota", siteOK + siteHost + "cpu_quota: 0.001\n", "s.yaml: cpu_quota: must be 0 (no limit) or a fraction of one core from 0.01 to 1, not 0.001"},
	{"quota not a number", siteOK + siteHost + "cpu_quota: quarter\n", "s.yaml: cpu_quota: must be a number"},
	{"host field", siteOK + "hosts:\n  - {name: h-0, uri: \"test:///default\", disks: 4}\n", `hosts[0].disks: unknown field`},
	{"no cpus", siteOK + "hosts:\n  - {name: h-0, uri: \"test:///default\", cpus: 0}\n", `hosts[0].cpus: must be within 1 and 65536, not 0`},
	{"cpus not a number", siteOK + "hosts:\n  - {name: h-0, uri: \"test:///default\", cpus: half}\n", `hosts[0].cpus: must be a number`},
	{"negative memory", siteOK + "hosts:\n  - {name: h-0, uri: \"test:///default\", memory_mib: -512}\n", `hosts[0].memory_mib: must be within 1 and 1073741824, not -512`},
	{"slurm node without block", siteOK + slurmHosts, `s.yaml: hosts: host n1 is a Slurm node (slurm:n1), but the site has no slurm block`},
	{"slurm uri query", siteOK + "slurm: {partitions: {farm: batch}}\nhosts:\n  - {name: n1, uri: \"slurm:n1?x=1\"}\n", `hosts[0].uri: must be slurm:NODE for a node of the site's Slurm cluster, not "slurm:n1?x=1"`},
	{"slurm uri path", siteOK + "slurm: {partitions: {farm: batch}}\nhosts:\n  - {name: n1, uri: \"slurm:///n1\"}\n", `hosts[0].uri: must be slurm:NODE`},
	{"slurm bad node", siteOK + "slurm: {partitions: {farm: batch}}\nhosts:\n  - {name: n1, uri: \"slurm:n%201\"}\n", `hosts[0].uri: "slurm:n%201": "n%201" is not a Slurm node name`},
	{"slurm without partitions", siteOK + "slurm: {conf: /etc/slurm/slurm.conf}\n" + slurmHosts, "s.yaml: slurm.partitions: missing required field"},
	{"slurm empty partitions", siteOK + "slurm: {partitions: {}}\n" + slurmHosts, "s.yaml: slurm.partitions: must map at least one pool to its partition"},
	{"slurm bad pool", siteOK + "slurm: {partitions: {Farm: batch}}\n" + slurmHosts, `s.yaml: slurm.partitions.Farm: must be keyed by a pool name (a-z, 0-9, -), not "Farm"`},
	{"slurm bad partition", siteOK + "slurm: {partitions: {farm: \"bat ch\"}}\n" + slurmHosts, `s.yaml: slurm.partitions.farm: "bat ch" is not a Slurm partition name`},
	{"slurm partition twice", siteOK + "slurm: {partitions: {farm: batch, render: batch}}\n" + slurmHosts, `s.yaml: slurm.partitions.render: partition "batch" is pool farm's already: a partition is one pool`},
	{"slurm field", siteOK + "slurm: {partitions: {farm: batch}, jwt: x}\n" + slurmHosts, "s.yaml: slurm.jwt: unknown field"},
	{"slurm bad timeout", siteOK + "slurm: {partitions: {farm: batch}, switch_timeout: 0s}\n" + slurmHosts, "s.yaml: slurm.switch_timeout: must be > 0"},
	{"slurm relative bin", siteOK + "slurm: {partitions: {farm: batch}, bin: bin}\n" + slurmHosts, `s.yaml: slurm.bin: must be a clean absolute directory, not "bin"`},
	{"slurm with a libvirt host", siteOK + "slurm: {partitions: {farm: batch}}\n" + siteHost, "a Slurm site's hosts are its nodes, slurm:NODE"},
	{"slurm host pool", siteOK + "slurm: {partitions: {farm: batch}}\nhosts:\n  - {name: n1, uri: \"slurm:n1\", pool: render}\n", "s.yaml: hosts: host n1: pool render has no partition in slurm.partitions"},
	{"slurm with images", siteOK + "slurm: {partitions: {farm: batch}}\n" + slurmHosts + "images: {farm: /srv/img}\n", "s.yaml: images: does not apply to a Slurm site"},
	{"slurm without hosts", siteOK + "grid: g.yaml\nslurm: {partitions: {farm: batch}}\n", "s.yaml: hosts: must list the Slurm nodes the site gives the grid"},
}

// slurmHosts are the hosts of a Slurm site.
const slurmHosts = "hosts:\n  - {name: n1, uri: \"slurm:n1\"}\n  - {name: n2, uri: \"slurm:n2\", pool: farm}\n"

// A Slurm site: its cluster, its pools' partitions and its nodes.
func TestParseSlurmSite(t *testing.T) {
	s, err := hp.ParseSite("/etc/ms/s.yaml", []byte(siteOK+"slurm:\n  conf: slurm/slurm.conf\n  bin: /opt/slurm/bin\n  partitions: {farm: batch, render: gfx}\n  switch_timeout: 5m\n"+slurmHosts))
	if err != nil {
		t.Fatal(err)
	}
	want := &hp.SlurmSite{Conf: "/etc/ms/slurm/slurm.conf", Bin: "/opt/slurm/bin", Partitions: map[string]string{"farm": "batch", "render": "gfx"},
		SwitchTimeout: 5 * time.Minute}
	if diff := cmp.Diff(want, s.Slurm); diff != "" {
		t.Errorf("slurm (-want +got):\n%s", diff)
	}
	if len(s.Hosts) != 2 || s.Hosts[0].URI != "slurm:n1" || s.Hosts[0].Pool != "" || s.Hosts[1].Pool != "farm" {
		t.Errorf("hosts %+v", s.Hosts)
	}
	s, err = hp.ParseSite("s.yaml", []byte(siteOK+"slurm: {partitions: {farm: batch}}\n"+slurmHosts))
	if err != nil || s.Slurm.SwitchTimeout != hp.DefaultSlurmSwitchTimeout || s.Slurm.Conf != "" {
		t.Errorf("defaults: %+v, %v", s.Slurm, err)
	}
}

func TestParseSiteErrors(t *testing.T) {
	for _, tc := range siteErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hp.ParseSite("s.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestGenerateHosts(t *testing.T) {
	g, err := graph.ParseGrid("g.yaml", []byte(`
clusters:
  - {name: a, machines: 2, cores: 4, memory_mib: 8192, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 100}
  - {name: b, machines: 2, cores: 2, memory_mib: 2048, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 100, hypervisor: "qemu+ssh://b{i}.example/system"}
links:
  - {between: [a, b], mbps: 10}
`))
	if err != nil {
		t.Fatal(err)
	}
	hosts, c, err := hp.GenerateHosts(g, "a", "render", func(n string) string { return "/d/" + n + ".xml" })
	if err != nil || c.Cores != 4 {
		t.Fatal(err)
	}
	want := []hp.SiteHost{{Name: "a-0", URI: "test:///d/a-0.xml", Pool: "render"}, {Name: "a-1", URI: "test:///d/a-1.xml", Pool: "render"}}
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("test hosts (-want +got):\n%s", diff)
	}
	hosts, _, err = hp.GenerateHosts(g, "b", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want = []hp.SiteHost{{Name: "b-0", URI: "qemu+ssh://b0.example/system"}, {Name: "b-1", URI: "qemu+ssh://b1.example/system"}}
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("uri template (-want +got):\n%s", diff)
	}
	if _, _, err := hp.GenerateHosts(g, "c", "", nil); err == nil || !strings.Contains(err.Error(), `site "c"`) {
		t.Errorf("unknown site: %v", err)
	}
}
